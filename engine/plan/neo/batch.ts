// Sub-batches of one iteration and the NEO (paper 003) §3.2 time estimate over them:
//   T ≈ T_tr = L × ( max{T_l0, T_ca1} + max{T_l1 + T_ga0, T_ca0} )
// Sums are kept incrementally so the scheduler adds/removes a request in O(1) plus one
// interpolation per predictor.

import type { OnlinePredictors } from './costs';
import { type OnlineRequest, contextTokens } from './request';

export interface SubBatch {
  gpuPrefills: OnlineRequest[];
  /** Prefills whose KV is swapped out layer by layer to the host (they become CPU requests). */
  cpuPrefills: OnlineRequest[];
  gpuDecodes: OnlineRequest[];
  cpuDecodes: OnlineRequest[];
  /** Rows through the linear ops: prompt tokens + one per decode. */
  tokens: number;
  /** KV tokens read by GPU decode attention. */
  gpuDecodeKv: number;
  /** Predicted GPU prefill attention (ms, per layer), summed per prompt. */
  prefillAttnMs: number;
  /** KV tokens read by CPU decode attention. */
  cpuKv: number;
}

export function emptySubBatch(): SubBatch {
  return { gpuPrefills: [], cpuPrefills: [], gpuDecodes: [], cpuDecodes: [], tokens: 0, gpuDecodeKv: 0, prefillAttnMs: 0, cpuKv: 0 };
}

/** A copy to change without changing the original (same request lists, same sums). */
export function copySubBatch(b: SubBatch): SubBatch {
  return { ...b, gpuPrefills: [...b.gpuPrefills], cpuPrefills: [...b.cpuPrefills], gpuDecodes: [...b.gpuDecodes], cpuDecodes: [...b.cpuDecodes] };
}

export function requestsIn(b: SubBatch): number {
  return b.gpuPrefills.length + b.cpuPrefills.length + b.gpuDecodes.length + b.cpuDecodes.length;
}

export function addPrefill(b: SubBatch, r: OnlineRequest, onCpu: boolean, p: OnlinePredictors): void {
  (onCpu ? b.cpuPrefills : b.gpuPrefills).push(r);
  b.tokens += r.promptTokens;
  b.prefillAttnMs += p.gpuPrefillAttn.at(r.promptTokens);
}

export function removeLastCpuPrefill(b: SubBatch, p: OnlinePredictors): OnlineRequest | undefined {
  const r = b.cpuPrefills.pop();
  if (r) {
    b.tokens -= r.promptTokens;
    b.prefillAttnMs -= p.gpuPrefillAttn.at(r.promptTokens);
  }
  return r;
}

export function addGpuDecode(b: SubBatch, r: OnlineRequest): void {
  b.gpuDecodes.push(r);
  b.tokens += 1;
  b.gpuDecodeKv += contextTokens(r);
}

export function addCpuDecode(b: SubBatch, r: OnlineRequest): void {
  b.cpuDecodes.push(r);
  b.tokens += 1;
  b.cpuKv += contextTokens(r);
}

export function popCpuDecode(b: SubBatch): void {
  const r = b.cpuDecodes.pop();
  if (r) {
    b.tokens -= 1;
    b.cpuKv -= contextTokens(r);
  }
}

/** The four per-layer stage times of a two-batch schedule, ms. */
export interface StageTimes { tl0: number; tga0: number; tca0: number; tl1: number; tca1: number }

export function stageTimes(b0: SubBatch, b1: SubBatch, p: OnlinePredictors): StageTimes {
  return {
    tl0: b0.tokens > 0 ? p.linear.at(b0.tokens) : 0,
    tga0: p.gpuDecodeAttn.at(b0.gpuDecodeKv) + b0.prefillAttnMs,
    tca0: p.cpuAttn.at(b0.cpuKv),
    tl1: b1.tokens > 0 ? p.linear.at(b1.tokens) : 0,
    tca1: p.cpuAttn.at(b1.cpuKv),
  };
}

/** NEO's two inequalities: T_ca1 ≤ T_l0 and T_ca0 ≤ T_l1 + T_ga0 ("Hiding CPU"). */
export function cpuHidden(t: StageTimes): boolean {
  return t.tca1 <= t.tl0 && t.tca0 <= t.tl1 + t.tga0;
}

/** One layer of a two-batch iteration (§3.2). */
export function twoBatchLayerMs(t: StageTimes): number {
  return Math.max(t.tl0, t.tca1) + Math.max(t.tl1 + t.tga0, t.tca0);
}

/** One layer of a GPU-only iteration over one sub-batch (no CPU decodes). */
export function gpuOnlyLayerMs(b: SubBatch, p: OnlinePredictors): number {
  if (b.tokens === 0) return 0;
  return p.linear.at(b.tokens) + p.gpuDecodeAttn.at(b.gpuDecodeKv) + b.prefillAttnMs;
}
