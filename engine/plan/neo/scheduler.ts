// NEO (paper 003) §3.2 + Appendix A: the load-aware scheduler, run once per iteration.
//   1 two empty sub-batches; 2 swap GPU decodes out/in to fit GPU KV, put them in batch-0;
//   3 FIFO prefills to GPU KV, else to CPU KV (swapped out layer-wise), until the activation
//     budget is used; 4 CPU decodes into batch-1 first, then batch-0, keeping
//     T_ca1 ≤ T_l0 and T_ca0 ≤ T_l1 + T_ga0 (skip a request that fits neither);
//   5 reduce CPU prefills; 6 compare the GPU-only schedule (batch-0 without CPU decodes) with
//     the two-batch one by estimated T_tr/x and keep the better.
// The same class runs the two baselines the paper compares against: 'gpu-only' (SwiftLLM: no
// CPU attention; overflowing KV is swapped to the host and back) and 'offload-all' (FastDecode⁺:
// NEO's pipeline and scheduler but every request's decode attention on the CPU).

import type { OnlinePredictors } from './costs';
import {
  type StageTimes, type SubBatch, addCpuDecode, addGpuDecode, addPrefill, cpuHidden, emptySubBatch, gpuOnlyLayerMs,
  copySubBatch, popCpuDecode, removeLastCpuPrefill, requestsIn, stageTimes, twoBatchLayerMs,
} from './batch';
import { type OnlineRequest, blocksFor, contextTokens } from './request';

export type NeoVariant = 'neo' | 'gpu-only' | 'offload-all';
export type IterationMode = 'gpu-only' | 'two-batch' | 'async-overlap';

export interface OnlineQueues {
  /** Prefilling wait queue, FIFO by arrival. */
  waiting: OnlineRequest[];
  /** GPU decoding run queue (KV in GPU memory), oldest first. */
  gpu: OnlineRequest[];
  /** CPU decoding run queue (KV in host memory). */
  cpu: OnlineRequest[];
}

export interface SchedulerLimits {
  nLayers: number;
  gpuKvTokens: number;
  cpuKvTokens: number;
  /** Activation budget: most rows (prompt tokens + decodes) in batch-0. */
  maxBatchTokens: number;
}

export interface ModeEstimate { mode: IterationMode; layerMs: number; iterationMs: number; requests: number; tokensPerMs: number }

export interface IterationPlan {
  mode: IterationMode;
  /** One sub-batch (gpu-only, async-overlap) or two (two-batch: [batch-0, batch-1]). */
  batches: SubBatch[];
  swapOut: OnlineRequest[];
  swapIn: OnlineRequest[];
  /** The schedulers' own estimate (from the profiled predictors). */
  predicted: ModeEstimate;
  /** Every schedule the step compared (step 6; APEX's mode choice), for the explanation. */
  considered: ModeEstimate[];
  stages?: StageTimes;
  /** CPU decodes skipped this iteration because they fit neither sub-batch. */
  skippedCpu: number;
}

/** Steps 1–4 of one iteration (NeoScheduler.form): the sub-batches before step 5's reduction. */
export interface FormedIteration {
  b0: SubBatch;
  b1: SubBatch;
  swapOut: OnlineRequest[];
  swapIn: OnlineRequest[];
  /** Wait-queue requests step 3 admitted (the first `admitted` of the queue). */
  admitted: number;
  /** CPU decodes step 4 could place in neither sub-batch (negative after the progress guarantee). */
  skipped: number;
  /** The CPU decodes step 4 considered (the CPU queue less the requests swapped out), in queue order. */
  cpuCandidates: OnlineRequest[];
}

function estimate(mode: IterationMode, layerMs: number, requests: number, nLayers: number, p: OnlinePredictors): ModeEstimate {
  const iterationMs = nLayers * layerMs + (requests > 0 ? p.head.at(requests) : 0);
  return { mode, layerMs, iterationMs, requests, tokensPerMs: iterationMs > 0 ? requests / iterationMs : 0 };
}

export class NeoScheduler {
  /** Blocks of GPU / CPU KV. */
  private readonly gpuBlocks: number;
  private readonly cpuBlocks: number;

  constructor(readonly variant: NeoVariant, readonly limits: SchedulerLimits, readonly predictors: OnlinePredictors) {
    for (const k of ['nLayers', 'gpuKvTokens', 'cpuKvTokens', 'maxBatchTokens'] as const) {
      const v = limits[k];
      if (!Number.isFinite(v) || v < 0) throw new Error(`NEO scheduler: limit ${k} must be a finite number ≥ 0, got ${v}`);
    }
    if (limits.maxBatchTokens < 1) throw new Error('NEO scheduler: maxBatchTokens must be ≥ 1');
    this.gpuBlocks = Math.floor(limits.gpuKvTokens / 16);
    this.cpuBlocks = Math.floor(limits.cpuKvTokens / 16);
  }

  private cpuUsedBlocks(q: OnlineQueues): number {
    let n = 0;
    for (const r of q.cpu) n += blocksFor(contextTokens(r) + 1);
    return n;
  }

  /**
   * Step 2 (and the queue half of step 3's memory checks): GPU decodes that fit, newest swapped
   * out first, CPU requests swapped back in while GPU KV has room.
   * Decisions (digest 003 §6, NEED_SWAP_OUT / CAN_SWAP_IN undefined): a GPU request needs the
   * blocks of its context + 1 token; swap-in keeps one spare block per GPU request for growth;
   * no swap-in in an iteration that swapped out; 'offload-all' keeps nothing on the GPU.
   * Returns the GPU blocks in use after the moves.
   */
  manageGpuQueue(q: OnlineQueues, swapOut: OnlineRequest[], swapIn: OnlineRequest[]): number {
    let need = 0;
    for (const r of q.gpu) need += blocksFor(contextTokens(r) + 1);
    while (q.gpu.length > 0 && (need > this.gpuBlocks || this.variant === 'offload-all')) {
      const r = q.gpu.pop()!;
      need -= blocksFor(contextTokens(r) + 1);
      r.where = 'cpu';
      q.cpu.unshift(r);
      swapOut.push(r);
    }
    if (swapOut.length === 0 && this.variant !== 'offload-all') {
      while (q.cpu.length > 0) {
        const r = q.cpu[0]!;
        const b = blocksFor(contextTokens(r) + 1);
        if (need + b + q.gpu.length + 1 > this.gpuBlocks) break;
        q.cpu.shift();
        r.where = 'gpu';
        q.gpu.push(r);
        swapIn.push(r);
        need += b;
      }
    }
    return need;
  }

  /** One iteration's schedule; moves requests between queues as `update_queues` does. */
  schedule(q: OnlineQueues): IterationPlan {
    const formed = this.form(q);
    const plan = this.choose(formed, true);
    this.commit(q, plan, formed);
    return plan;
  }

  /**
   * Steps 1–4: the two sub-batches before step 5. Moves requests between the GPU and CPU run
   * queues (step 2's swaps) and nothing else: the admitted prefills stay in the wait queue until
   * `commit`. APEX forms once and chooses twice (NEO's step 5 with and without the reduction).
   */
  form(q: OnlineQueues): FormedIteration {
    const p = this.predictors;
    const swapOut: OnlineRequest[] = [];
    const swapIn: OnlineRequest[] = [];
    // 1.
    const b0 = emptySubBatch();
    const b1 = emptySubBatch();
    // 2.
    let gpuUsed = this.manageGpuQueue(q, swapOut, swapIn);
    for (const r of q.gpu) addGpuDecode(b0, r);
    // 3. FIFO prefills. Decisions (digest 003 §6): CAN_PREFILL_TO_GPU = the prompt's blocks (+1
    // token) fit in GPU KV next to the GPU decodes with one spare block per GPU request;
    // CAN_PREFILL_TO_CPU = they fit in CPU KV; the activation budget counts prompt tokens + GPU
    // decodes of batch-0 (the first prompt is always admitted, so an over-long prompt still runs).
    // Queue order: waiting FIFO by arrival; GPU queue oldest first (the newest is swapped out);
    // CPU queue: swapped-out requests in front, new CPU prefills at the back.
    let cpuUsed = this.cpuUsedBlocks(q);
    const spare = q.gpu.length + 1;
    let admitted = 0;
    for (const r of q.waiting) {
      if (b0.tokens + r.promptTokens > this.limits.maxBatchTokens && requestsIn(b0) > 0) break;
      const b = blocksFor(r.promptTokens + 1);
      if (this.variant !== 'offload-all' && gpuUsed + b + spare <= this.gpuBlocks) {
        addPrefill(b0, r, false, p);
        gpuUsed += b;
      } else if (this.variant !== 'gpu-only' && cpuUsed + b <= this.cpuBlocks) {
        addPrefill(b0, r, true, p);
        cpuUsed += b;
      } else {
        break;
      }
      admitted++;
    }
    // 4. CPU decodes: batch-1 first, then batch-0; skip when neither keeps the CPU hidden.
    // Requests prefilled to the CPU in step 3 join the CPU queue only after this iteration, so
    // they do not also decode in it.
    let skipped = 0;
    const cpuCandidates: OnlineRequest[] = [];
    if (this.variant !== 'gpu-only') {
      const moved = new Set(swapOut);
      for (const r of q.cpu) {
        if (moved.has(r)) continue; // its KV is still on the way to the host
        cpuCandidates.push(r);
        addCpuDecode(b1, r);
        if (cpuHidden(stageTimes(b0, b1, p))) continue;
        popCpuDecode(b1);
        addCpuDecode(b0, r);
        if (cpuHidden(stageTimes(b0, b1, p))) continue;
        popCpuDecode(b0);
        skipped++;
      }
      // Progress guarantee (decision): with nothing else to run, there is no GPU work to hide the
      // CPU behind and nothing that waits for it, so batch-0 takes every CPU decode, up to the
      // activation budget (at least one; before, only the first, which left the others idle for
      // as many iterations as the live runtime showed: seven requests served one at a time).
      // FastDecode⁺ ('offload-all') keeps the one-decode rule: the paper reproduction
      // (test/papers/003-neo.test.ts, Fig. 8b's collapse at long outputs) is calibrated on it.
      if (requestsIn(b0) + requestsIn(b1) === 0 && q.cpu.length > 0) {
        for (const r of q.cpu) {
          if (moved.has(r)) continue;
          if (b0.cpuDecodes.length > 0 && (this.variant === 'offload-all' || b0.tokens + 1 > this.limits.maxBatchTokens)) break;
          addCpuDecode(b0, r);
          skipped--;
        }
      }
    } else {
      const moved = new Set(swapOut);
      for (const r of q.cpu) if (!moved.has(r)) cpuCandidates.push(r);
    }
    return { b0, b1, swapOut, swapIn, admitted, skipped, cpuCandidates };
  }

  /**
   * Steps 5–6 over formed sub-batches. Pure: a reduction works on a copy of batch-0, so `formed`
   * can be chosen from again. `reduce` false skips step 5's reduction: APEX's AP candidate fills
   * the CPU queue with every request that overflows GPU KV (digest 004 §2: "the CPU-decode queue
   * is populated by GPU KV overflow"), since asynchronous overlap gives the CPU the whole
   * iteration, not NEO's windows.
   */
  choose(formed: FormedIteration, reduce: boolean): IterationPlan {
    const p = this.predictors;
    const L = this.limits.nLayers;
    const { b1, skipped } = formed;
    // 5. GPU-only candidate = batch-0 without the CPU decodes of step 4 (Appendix A: CPU prefills
    // stay — their KV goes to the host while the GPU computes them); reduce CPU prefills in both.
    const gpuOnly = emptySubBatch();
    for (const r of formed.b0.gpuDecodes) addGpuDecode(gpuOnly, r);
    for (const r of formed.b0.gpuPrefills) addPrefill(gpuOnly, r, false, p);
    for (const r of formed.b0.cpuPrefills) addPrefill(gpuOnly, r, true, p);
    // Decision (digest 003 §6, reduce_cpu_prefill order and trigger): newest first, and only while
    // the CPU is already saturated (some CPU decode was skipped in step 4) — more CPU requests
    // would only grow the backlog — and, for the two-batch schedule, the two inequalities still
    // hold without the prefill. While the CPU has spare capacity, CPU prefills stay so the CPU
    // decode queue fills (Maximizing GPU).
    const reducing = reduce && skipped > 0;
    const b0 = reducing && formed.b0.cpuPrefills.length > 0 ? copySubBatch(formed.b0) : formed.b0;
    while (b0.cpuPrefills.length > 0 && reducing) {
      const r = removeLastCpuPrefill(b0, p)!;
      if (!cpuHidden(stageTimes(b0, b1, p))) { addPrefill(b0, r, true, p); break; }
    }
    if (reducing) while (gpuOnly.cpuPrefills.length > 0) removeLastCpuPrefill(gpuOnly, p);
    // 6. Compare by estimated T_tr/x (x = sequences producing a token this iteration).
    const considered: ModeEstimate[] = [];
    const gpuEst = estimate('gpu-only', gpuOnlyLayerMs(gpuOnly, p), requestsIn(gpuOnly), L, p);
    let chosen: { est: ModeEstimate; batches: SubBatch[]; stages?: StageTimes };
    if (this.variant === 'gpu-only') {
      chosen = { est: gpuEst, batches: [gpuOnly] };
      considered.push(gpuEst);
    } else {
      const st = stageTimes(b0, b1, p);
      const twoEst = estimate('two-batch', twoBatchLayerMs(st), requestsIn(b0) + requestsIn(b1), L, p);
      considered.push(gpuEst, twoEst);
      // Without CPU decodes the two schedules are the same work: call it GPU-only. FastDecode⁺
      // never falls back.
      const noCpuDecodes = b0.cpuDecodes.length === 0 && b1.cpuDecodes.length === 0;
      const useGpuOnly = this.variant === 'neo' && (noCpuDecodes || gpuEst.tokensPerMs > twoEst.tokensPerMs);
      chosen = useGpuOnly ? { est: gpuEst, batches: [gpuOnly] } : { est: twoEst, batches: b1.tokens > 0 ? [b0, b1] : [b0], stages: st };
    }
    return {
      mode: chosen.est.mode, batches: chosen.batches, swapOut: formed.swapOut, swapIn: formed.swapIn, predicted: chosen.est, considered,
      stages: chosen.stages, skippedCpu: Math.max(0, skipped),
    };
  }

  /** update_queues: the plan's admitted prefills leave the wait queue for the GPU or CPU run queue. */
  commit(q: OnlineQueues, plan: IterationPlan, formed: FormedIteration): void {
    const run = plan.batches[0]!;
    const taken = new Set<OnlineRequest>([...run.gpuPrefills, ...run.cpuPrefills]);
    if (taken.size > 0 || formed.admitted > 0) {
      q.waiting = q.waiting.filter((r) => !taken.has(r));
      for (const r of run.gpuPrefills) { r.where = 'gpu'; q.gpu.push(r); }
      for (const r of run.cpuPrefills) { r.where = 'cpu'; q.cpu.push(r); }
    }
  }
}
