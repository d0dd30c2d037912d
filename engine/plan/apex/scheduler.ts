// APEX (paper 004) Algorithm 1: per iteration, GPU-only, asymmetric pipelining (AP, NEO's
// two-batch schedule) or asynchronous overlap (AO). Queue management (GPU-first KV, swaps,
// FIFO prefills) is NEO's (APEX extends NEO's code base, §4).
// Decisions (digest 004 §6): "select active requests" = NEO's queue management (steps 2–3);
// the AP partition is NEO's steps 4–6; AO takes CPU requests in queue order (partially processed
// first) while their one-layer attention fits in the predicted GPU iteration.

import type { OnlinePredictors } from '../neo/costs';
import { addCpuDecode, addGpuDecode, addPrefill, emptySubBatch, requestsIn } from '../neo/batch';
import { type IterationPlan, type ModeEstimate, NeoScheduler, type OnlineQueues, type SchedulerLimits } from '../neo/scheduler';
import { contextTokens } from '../neo/request';
import { type ApexRates, apBeatsGpuOnly, apBeatsGpuOnlyMixed } from './condition';

export interface ApexOptions {
  /**
   * §4.2: CPU attention runs only when #CPU requests ≥ threshold × #GPU requests (8 in the
   * paper) to amortise the thread hand-off. Decision: it gates AO only (AP is NEO's schedule,
   * which has its own load balancing).
   */
  cpuRequestRatio?: number;
}

/** Why the iteration ran in its mode, for the explanation. */
export interface ApexDecision {
  mode: IterationPlan['mode'];
  reason: string;
  rates?: ApexRates;
}

export class ApexScheduler {
  private readonly neo: NeoScheduler;
  readonly ratio: number;
  lastDecision: ApexDecision = { mode: 'gpu-only', reason: 'not run yet' };

  constructor(readonly limits: SchedulerLimits, readonly predictors: OnlinePredictors, opt: ApexOptions = {}) {
    this.neo = new NeoScheduler('neo', limits, predictors, { reduceCpuPrefills: false });
    this.ratio = opt.cpuRequestRatio ?? 8;
  }

  schedule(q: OnlineQueues): IterationPlan {
    const p = this.predictors;
    const L = this.limits.nLayers;
    // Partial-progress priority (§3.4): CPU requests already through some layers go first.
    if (q.cpu.some((r) => r.aoLayer > 0)) q.cpu.sort((a, b) => b.aoLayer - a.aoLayer);
    // NEO's schedule is APEX's AP candidate (and carries the GPU-only alternative).
    const ap = this.neo.schedule(q);
    const b0 = ap.batches[0]!;
    const moved = new Set(ap.swapOut);
    const cpuReady = q.cpu.filter((r) => !moved.has(r) && !b0.cpuPrefills.includes(r));
    const gpuDecodes = b0.gpuDecodes;
    if (cpuReady.length === 0) {
      this.lastDecision = { mode: ap.mode, reason: 'no CPU requests: GPU-first (Algorithm 1, D_cpu empty)' };
      return ap;
    }
    // Rates from the profiled predictors on this iteration's batches. Decision (digest 004 §6,
    // units unspecified): N_G, N_C = decode-attention requests per ms for one layer — the GPU
    // batch's count over its T_gatt, the CPU candidates' count over their T_ca.
    let cpuKv = 0;
    for (const r of cpuReady) cpuKv += contextTokens(r);
    let gpuKv = 0;
    for (const r of gpuDecodes) gpuKv += contextTokens(r);
    const nG = Math.max(1, gpuDecodes.length);
    const tGatt = Math.max(1e-6, p.gpuDecodeAttn.at(Math.max(gpuKv, cpuKv / cpuReady.length)));
    const rates: ApexRates = {
      gpuTokensPerMs: nG / tGatt,
      cpuTokensPerMs: cpuReady.length / Math.max(1e-6, p.cpuAttn.at(cpuKv)),
      linearMs: p.linear.at(nG),
      gpuAttnMs: tGatt,
    };
    const prefillTokens = b0.gpuPrefills.reduce((s, r) => s + r.promptTokens, 0) + b0.cpuPrefills.reduce((s, r) => s + r.promptTokens, 0);
    const apWins = prefillTokens === 0
      ? apBeatsGpuOnly(rates)
      : apBeatsGpuOnlyMixed(rates, p.linear.at(nG + prefillTokens), tGatt + b0.prefillAttnMs);
    if (apWins) {
      this.lastDecision = { mode: ap.mode, reason: `inequality ${prefillTokens === 0 ? '(5)' : '(mixed)'} holds: AP (NEO) schedule`, rates };
      return ap;
    }
    if (cpuReady.length < this.ratio * gpuDecodes.length) {
      this.lastDecision = { mode: ap.mode, reason: `AP not beneficial and ${cpuReady.length} CPU requests < ${this.ratio}× ${gpuDecodes.length} GPU requests: no CPU attention launched (§4.2)`, rates };
      return this.gpuOnlyOf(ap);
    }
    // Asynchronous overlap: one unified batch; CPU requests run one layer each within the GPU
    // iteration's window (§3.3).
    const ao = emptySubBatch();
    for (const r of gpuDecodes) addGpuDecode(ao, r);
    for (const r of b0.gpuPrefills) addPrefill(ao, r, false, p);
    for (const r of b0.cpuPrefills) addPrefill(ao, r, true, p);
    const gpuLayer = (ao.tokens > 0 ? p.linear.at(ao.tokens) : 0) + p.gpuDecodeAttn.at(ao.gpuDecodeKv) + ao.prefillAttnMs;
    const windowMs = L * gpuLayer + p.head.at(Math.max(1, requestsIn(ao)));
    let cpuMs = 0;
    for (const r of cpuReady) {
      const t = p.cpuAttn.at(contextTokens(r));
      if (cpuMs + t > windowMs && ao.cpuDecodes.length > 0) break;
      cpuMs += t;
      addCpuDecode(ao, r);
    }
    const produced = requestsIn(ao) - ao.cpuDecodes.length + ao.cpuDecodes.length / L;
    const est: ModeEstimate = { mode: 'async-overlap', layerMs: gpuLayer, iterationMs: windowMs, requests: produced, tokensPerMs: produced / windowMs };
    this.lastDecision = { mode: 'async-overlap', reason: 'AP not beneficial (N_G/N_C ≥ RHS of (6)): asynchronous overlap', rates };
    return { mode: 'async-overlap', batches: [ao], swapOut: ap.swapOut, swapIn: ap.swapIn, predicted: est, considered: [...ap.considered, est], skippedCpu: cpuReady.length - ao.cpuDecodes.length };
  }

  /** The AP plan reduced to its GPU part (CPU requests wait this iteration). */
  private gpuOnlyOf(ap: IterationPlan): IterationPlan {
    if (ap.mode === 'gpu-only') return ap;
    const b0 = ap.batches[0]!;
    const g = emptySubBatch();
    for (const r of b0.gpuDecodes) addGpuDecode(g, r);
    for (const r of b0.gpuPrefills) addPrefill(g, r, false, this.predictors);
    for (const r of b0.cpuPrefills) addPrefill(g, r, true, this.predictors);
    const est = ap.considered.find((c) => c.mode === 'gpu-only') ?? ap.predicted;
    return { ...ap, mode: 'gpu-only', batches: [g], predicted: est, stages: undefined };
  }
}

