// APEX (paper 004) Algorithm 1: per iteration, GPU-only, asymmetric pipelining (AP, NEO's
// two-batch schedule) or asynchronous overlap (AO). Queue management (GPU-first KV, swaps,
// FIFO prefills) is NEO's (APEX extends NEO's code base, §4).
// Decisions (digest 004 §6): "select active requests" = NEO's queue management (steps 2–3);
// the AP partition is NEO's steps 4–6; AO takes CPU requests in queue order (partially processed
// first) while their one-layer attention fits in the predicted GPU iteration.
// Decision (issue 21 item 5, never below NEO): Algorithm 1 never compares AO with the schedule NEO
// itself would run, and its AP kept every overflowing prefill on the CPU, so on the T4 preset at
// vram=14G (where (5) always holds and AO never runs) APEX fell 0.03 % below NEO. Each iteration
// APEX now plans NEO's own schedule too: where (5) holds it runs exactly that schedule, and it
// runs AO only when AO's estimate beats that schedule's. Both schedules share NEO's steps 1–4
// (formed once) and differ only in step 5's reduction, so nothing is run twice and the queues are
// changed once, for the schedule chosen.
// Decision: the iterations that fill the CPU queue for AO (mixed inequality holds, (5) does not)
// and §4.2's GPU-only iterations are not compared per iteration: their pay-off is the AO
// iterations after them, which a one-iteration estimate does not see (compared, AO never ran:
// APEX/NEO 1.000 on the A10 of Fig. 7 instead of 1.065).

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
  /**
   * NEO's scheduler: steps 1–4 for both candidates; with step 5's reduction it is NEO's own
   * schedule (the floor APEX never goes below by its estimate), without it APEX's AP candidate
   * (the CPU queue fills for AO).
   */
  private readonly neo: NeoScheduler;
  readonly ratio: number;
  lastDecision: ApexDecision = { mode: 'gpu-only', reason: 'not run yet' };

  constructor(readonly limits: SchedulerLimits, readonly predictors: OnlinePredictors, opt: ApexOptions = {}) {
    this.neo = new NeoScheduler('neo', limits, predictors);
    this.ratio = opt.cpuRequestRatio ?? 8;
  }

  schedule(q: OnlineQueues): IterationPlan {
    const p = this.predictors;
    const L = this.limits.nLayers;
    // Partial-progress priority (§3.4): CPU requests already through some layers go first.
    if (q.cpu.some((r) => r.aoLayer > 0)) q.cpu.sort((a, b) => b.aoLayer - a.aoLayer);
    const formed = this.neo.form(q);
    // Each candidate is chosen from `formed` when first needed; `run` commits one to the queues.
    let neoPlan: IterationPlan | undefined;
    let apPlan: IterationPlan | undefined;
    const neoOwn = (): IterationPlan => (neoPlan ??= this.neo.choose(formed, true));
    // NEO's schedule without the reduction is APEX's AP candidate and carries the GPU-only alternative.
    const apOwn = (): IterationPlan => (apPlan ??= this.neo.choose(formed, false));
    const run = (queuesOf: IterationPlan, plan: IterationPlan, decision: ApexDecision): IterationPlan => {
      this.neo.commit(q, queuesOf, formed);
      this.lastDecision = decision;
      return plan;
    };
    const runNeo = (reason: string, rates?: ApexRates): IterationPlan => {
      const neo = neoOwn();
      return run(neo, neo, { mode: neo.mode, reason, ...(rates ? { rates } : {}) });
    };
    const cpuReady = formed.cpuCandidates;
    const gpuDecodes = formed.b0.gpuDecodes;
    if (cpuReady.length === 0) {
      const ap = apOwn();
      return run(ap, ap, { mode: ap.mode, reason: 'no CPU requests: GPU-first (Algorithm 1, D_cpu empty)' });
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
    const b0 = formed.b0;
    const prefillTokens = b0.gpuPrefills.reduce((s, r) => s + r.promptTokens, 0) + b0.cpuPrefills.reduce((s, r) => s + r.promptTokens, 0);
    // Where the decode-only inequality (5) holds, asynchronous overlap is never APEX's mode, so
    // there is no CPU queue to fill for it: run exactly NEO's schedule (the AP candidate is not
    // needed). Where only the mixed one holds, AP runs with every overflowing prefill kept on the
    // CPU (the CPU queue fills for the overlap of the decode-only iterations that follow: the
    // source of APEX's gain over NEO).
    const decodeOnlyWins = apBeatsGpuOnly(rates);
    if (prefillTokens === 0 && decodeOnlyWins) return runNeo('inequality (5) holds: AP (NEO) schedule', rates);
    const ap = apOwn();
    // The mixed inequality reads the prefill attention of the AP candidate's first sub-batch.
    if (prefillTokens > 0 && apBeatsGpuOnlyMixed(rates, p.linear.at(nG + prefillTokens), tGatt + ap.batches[0]!.prefillAttnMs)) {
      if (decodeOnlyWins) return runNeo('inequality (mixed) holds: AP (NEO) schedule', rates);
      return run(ap, ap, { mode: ap.mode, reason: 'inequality (mixed) holds but (5) does not: AP, every overflowing prefill kept on the CPU for asynchronous overlap', rates });
    }
    if (cpuReady.length < this.ratio * gpuDecodes.length) {
      return run(ap, this.gpuOnlyOf(ap), { mode: 'gpu-only', reason: `AP not beneficial and ${cpuReady.length} CPU requests < ${this.ratio}× ${gpuDecodes.length} GPU requests: no CPU attention launched (§4.2)`, rates });
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
    const neo = neoOwn();
    if (!(est.tokensPerMs > neo.predicted.tokensPerMs)) {
      const perS = (x: number) => (x * 1000).toFixed(1);
      return runNeo(`AP not beneficial (N_G/N_C ≥ RHS of (6)) but NEO's schedule (${neo.mode}) is estimated faster than asynchronous overlap: ${perS(neo.predicted.tokensPerMs)} vs ${perS(est.tokensPerMs)} tokens/s`, rates);
    }
    const aoPlan: IterationPlan = { mode: 'async-overlap', batches: [ao], swapOut: ap.swapOut, swapIn: ap.swapIn, predicted: est, considered: [...neo.considered, est], skippedCpu: cpuReady.length - ao.cpuDecodes.length };
    return run(ap, aoPlan, { mode: 'async-overlap', reason: 'AP not beneficial (N_G/N_C ≥ RHS of (6)): asynchronous overlap', rates });
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
