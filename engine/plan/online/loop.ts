// Continuous batching (iteration-level scheduling, Orca/vLLM style) for the online policies:
// requests arrive over time; every iteration the scheduler (NEO, APEX or a baseline) picks the
// batch and mode, the simulator plays it on the true costs, tokens are emitted, finished requests
// leave. Reports throughput and per-token latency as NEO §5.1 / APEX §5.3 define them.

import type { OnlineCosts } from '../neo/costs';
import type { IterationMode, IterationPlan, OnlineDecider, OnlineQueues } from './decider';
import type { OnlineRequest } from '../neo/request';
import { executeIteration } from './execute';

export interface OnlineRunOptions {
  /**
   * Stop with an error after this many iterations. Default: the most a run can take while every
   * iteration makes progress — each output token takes at most one iteration per layer
   * (asynchronous overlap advances a request one layer at a time) plus one, and each request
   * one more to be admitted. A fixed cap (50,000 before) called long serving runs "stuck":
   * APEX on its T4 preset, 500 requests of 800 tokens.
   */
  maxIterations?: number;
  /**
   * Most requests in the system at once (waiting for prefill or decoding); later arrivals queue
   * outside until one finishes. The runtime's slots (one KV sequence per request) are such a
   * bound; default: none.
   */
  maxRunning?: number;
  /** Called after every iteration (tracing, the timeline view). */
  onIteration?: (plan: IterationPlan, startMs: number, ms: number) => void;
}

export interface OnlineResult {
  requests: number;
  outputTokens: number;
  /** First arrival → last completion, ms. */
  makespanMs: number;
  /** Generated tokens per second over the makespan. */
  throughputTokensPerS: number;
  /** Mean over requests of (finish − arrival) / output tokens (NEO §5.1, APEX §5.3), ms. */
  perTokenLatencyMs: number;
  iterations: number;
  /** Iterations per mode (how often GPU-only, two-batch, asynchronous overlap ran). */
  modes: Record<IterationMode, number>;
  /** Busy ms per lane over the run. */
  busy: { gpu: number; cpu: number; pcie: number };
}

/** Runs the requests (copied; the input is not modified) to completion. */
export function runOnline(input: readonly OnlineRequest[], scheduler: OnlineDecider, costs: OnlineCosts, opt: OnlineRunOptions = {}): OnlineResult {
  if (input.length === 0) throw new Error('online run: no requests');
  const reqs = input.map((r) => ({ ...r, generated: 0, where: 'waiting' as const, aoLayer: 0, firstTokenMs: undefined, finishMs: undefined }))
    .sort((a, b) => a.arrivalMs - b.arrivalMs);
  const q: OnlineQueues = { waiting: [], gpu: [], cpu: [] };
  const maxIt = opt.maxIterations ?? reqs.reduce((n, r) => n + r.outputTokens, 0) * (scheduler.limits.nLayers + 1) + 2 * reqs.length;
  const modes: Record<IterationMode, number> = { 'gpu-only': 0, 'two-batch': 0, 'async-overlap': 0 };
  const busy = { gpu: 0, cpu: 0, pcie: 0 };
  let next = 0;
  let now = reqs[0]!.arrivalMs;
  let done = 0;
  let it = 0;
  let idle = 0;
  while (done < reqs.length) {
    const cap = opt.maxRunning ?? Infinity;
    while (next < reqs.length && reqs[next]!.arrivalMs <= now && q.waiting.length + q.gpu.length + q.cpu.length < cap) q.waiting.push(reqs[next++]!);
    if (q.waiting.length + q.gpu.length + q.cpu.length === 0) { now = Math.max(now, reqs[next]!.arrivalMs); continue; }
    if (++it > maxIt) throw new Error(`online run: more than ${maxIt} iterations (${done}/${reqs.length} requests done) — the scheduler makes no progress`);
    const plan = scheduler.schedule(q);
    const res = executeIteration(plan, costs);
    if (res.produced.length === 0 && res.aoAdvanced.length === 0) {
      // Nothing could run: wait for the next arrival, or fail if none will come.
      if (next < reqs.length && ++idle < 4) { now = Math.max(now, reqs[next]!.arrivalMs); continue; }
      const stuck = q.waiting[0] ?? q.gpu[0] ?? q.cpu[0];
      throw new Error(`online run: no request can be scheduled (first waiting: id ${stuck?.id}, ${stuck?.promptTokens} prompt tokens) — KV capacity or batch-token budget too small`);
    }
    idle = 0;
    opt.onIteration?.(plan, now, res.ms);
    modes[plan.mode]++;
    busy.gpu += res.gpuMs; busy.cpu += res.cpuMs; busy.pcie += res.pcieMs;
    now += res.ms;
    const finished = new Set<OnlineRequest>();
    const L = scheduler.limits.nLayers;
    for (const r of res.aoAdvanced) {
      if (++r.aoLayer >= L) { r.aoLayer = 0; res.produced.push(r); }
    }
    for (const r of res.produced) {
      r.generated++;
      r.aoLayer = 0; // a token finished, by whichever path: the next one starts at layer 0
      if (r.firstTokenMs === undefined) r.firstTokenMs = now;
      if (r.generated >= r.outputTokens) { r.finishMs = now; r.where = 'done'; finished.add(r); }
    }
    if (finished.size > 0) {
      done += finished.size;
      q.gpu = q.gpu.filter((r) => !finished.has(r));
      q.cpu = q.cpu.filter((r) => !finished.has(r));
    }
  }
  let outTok = 0, lat = 0, first = Infinity, last = 0;
  for (const r of reqs) {
    outTok += r.outputTokens;
    lat += (r.finishMs! - r.arrivalMs) / r.outputTokens;
    first = Math.min(first, r.arrivalMs);
    last = Math.max(last, r.finishMs!);
  }
  const makespan = last - first;
  return {
    requests: reqs.length, outputTokens: outTok, makespanMs: makespan, throughputTokensPerS: outTok / (makespan / 1e3),
    perTokenLatencyMs: lat / reqs.length, iterations: it, modes, busy,
  };
}
