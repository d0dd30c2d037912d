// How long one scheduled iteration really takes: the schedulers decide with interpolated
// predictors; the simulator plays the decision on the "true" costs (OnlineCosts) with lanes GPU,
// CPU and PCIe, and applies the non-blocking CPU check of APEX's asynchronous overlap.

import type { OnlineCosts } from '../neo/costs';
import type { SubBatch } from '../neo/batch';
import type { IterationPlan } from '../neo/scheduler';
import { type OnlineRequest, contextTokens } from '../neo/request';

export interface IterationResult {
  ms: number;
  /** Busy ms per lane over the iteration. */
  gpuMs: number;
  cpuMs: number;
  pcieMs: number;
  /** Requests that produce a token this iteration. */
  produced: OnlineRequest[];
  /** APEX AO: CPU requests whose layer finished within the window (advance one layer). */
  aoAdvanced: OnlineRequest[];
}

function prefillAttn(b: SubBatch, c: OnlineCosts): number {
  let s = 0;
  for (const r of b.gpuPrefills) s += c.gpuPrefillAttnMs(r.promptTokens);
  for (const r of b.cpuPrefills) s += c.gpuPrefillAttnMs(r.promptTokens);
  return s;
}

/**
 * PCIe per layer: KV of swapped requests and of CPU prefills (layer-wise swap-out, NEO §3.1),
 * TrQKV/TrO for CPU decodes. Decision (digest 003 §6: the paper's T_tr omits PCIe): the
 * simulator charges it on its own lane, overlapping compute, so it only costs time when it is
 * the longest lane of a layer.
 */
function pcieLayerMs(plan: IterationPlan, c: OnlineCosts, cpuDecodes: number): number {
  let bytes = 0;
  for (const r of plan.swapOut) bytes += contextTokens(r) * c.kvBytesPerTokenLayer;
  for (const r of plan.swapIn) bytes += contextTokens(r) * c.kvBytesPerTokenLayer;
  for (const b of plan.batches) for (const r of b.cpuPrefills) bytes += r.promptTokens * c.kvBytesPerTokenLayer;
  bytes += cpuDecodes * c.qkvoBytesPerToken;
  return (bytes / (c.pcieGBps * 1e9)) * 1e3;
}

export function executeIteration(plan: IterationPlan, c: OnlineCosts): IterationResult {
  const L = c.nLayers;
  const produced: OnlineRequest[] = [];
  for (const b of plan.batches) produced.push(...b.gpuPrefills, ...b.cpuPrefills, ...b.gpuDecodes);
  const lin = (b: SubBatch | undefined): number => (b && b.tokens > 0 ? c.linearMs(b.tokens) : 0);
  if (plan.mode === 'async-overlap') {
    // APEX §3.3: one unified batch for the linear ops; each CPU request sits at one layer, so over
    // the iteration the CPU requests add n_cpu/L rows per layer on average (decision). The CPU
    // works on its requests' current layer during the whole GPU iteration; results not ready by
    // the end are picked up in a later iteration (non-blocking check).
    const b = plan.batches[0]!;
    const nCpu = b.cpuDecodes.length;
    const rows = b.tokens - nCpu + nCpu / L;
    const gpuLayer = (rows > 0 ? c.linearMs(rows) : 0) + c.gpuDecodeAttnMs(b.gpuDecodeKv) + prefillAttn(b, c);
    const pcie = pcieLayerMs(plan, c, nCpu / L);
    const heads = produced.length > 0 ? c.headMs(produced.length) : 0;
    const gpuMs = L * gpuLayer + heads;
    const ms = Math.max(gpuMs, L * pcie);
    let cpuMs = 0;
    const aoAdvanced: OnlineRequest[] = [];
    for (const r of b.cpuDecodes) {
      const t = c.cpuAttnMs(contextTokens(r));
      if (cpuMs + t > ms) break;
      cpuMs += t;
      aoAdvanced.push(r);
    }
    // A CPU-only iteration (no GPU work at all) waits for the CPU, one request at least.
    if (aoAdvanced.length === 0 && nCpu > 0 && gpuMs === 0) {
      const r = b.cpuDecodes[0]!;
      cpuMs = c.cpuAttnMs(contextTokens(r));
      aoAdvanced.push(r);
      return { ms: Math.max(ms, cpuMs), gpuMs, cpuMs, pcieMs: L * pcie, produced, aoAdvanced };
    }
    return { ms, gpuMs, cpuMs, pcieMs: L * pcie, produced, aoAdvanced };
  }
  const b0 = plan.batches[0]!;
  const b1 = plan.batches[1];
  produced.push(...b0.cpuDecodes, ...(b1?.cpuDecodes ?? []));
  const tl0 = lin(b0);
  const tga0 = c.gpuDecodeAttnMs(b0.gpuDecodeKv) + prefillAttn(b0, c);
  const tca0 = c.cpuAttnMs(b0.cpuKv);
  const tl1 = lin(b1);
  const tca1 = b1 ? c.cpuAttnMs(b1.cpuKv) : 0;
  const nCpu = b0.cpuDecodes.length + (b1?.cpuDecodes.length ?? 0);
  // NEO §3.2: T_tr = L × (max{T_l0, T_ca1} + max{T_l1 + T_ga0, T_ca0}); GPU-only: T_l + T_ga.
  const compute = plan.mode === 'two-batch' ? Math.max(tl0, tca1) + Math.max(tl1 + tga0, tca0) : tl0 + tga0 + tca0;
  const pcie = pcieLayerMs(plan, c, nCpu);
  const heads = produced.length > 0 ? c.headMs(produced.length) : 0;
  const ms = L * Math.max(compute, pcie) + heads;
  return { ms, gpuMs: L * (tl0 + tga0 + tl1) + heads, cpuMs: L * (tca0 + tca1), pcieMs: L * pcie, produced, aoAdvanced: [] };
}
