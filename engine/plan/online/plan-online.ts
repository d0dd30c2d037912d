// Turns an online scheduler (NEO, APEX) into a Plan: a steady-state decode iteration at the
// workload's mid-generation context (which requests' KV and attention sit on the GPU vs the CPU,
// the sub-batches, the mode), the GPU prefill, and — for online workloads (rate given) — a short
// continuous-batching simulation for throughput and per-token latency.

import type { OpPlan, Plan, PlanStage, SubBatch as PlanSubBatch } from '../types';
import type { PlanContext } from '../policy';
import type { Decision, Resource } from '../explanation';
import type { OnlineSimResult } from '../sim-types';
import { bindingOf } from '../binding';
import { headOn, makeLayer, makePlan, makeStage, memoryUse, opOn, repeatLayers, sequentialLayerMs } from '../build';
import { kvBytesPerToken } from '../../model/shape';
import { executeIteration } from './execute';
import { runOnline } from './loop';
import { generateWorkload } from './workload';
import type { OnlinePredictors } from '../neo/costs';
import { neoGpuFixedBytes } from '../neo/from-cost-model';
import type { OnlineDecider } from './decider';
import { onlineSetup } from './setup';
import { type OnlineRequest, blocksFor, contextTokens, makeRequest } from '../neo/request';
import type { IterationPlan, OnlineQueues, SchedulerLimits } from '../neo/scheduler';

export interface OnlinePolicySpec {
  policy: 'neo' | 'apex';
  makeScheduler(limits: SchedulerLimits, predictors: OnlinePredictors): OnlineDecider;
  /** Policy-specific decisions about the steady-state iteration (e.g. APEX's inequality). */
  modeDecisions(it: IterationPlan, scheduler: OnlineDecider): Decision[];
}

/** `batch` requests mid-generation, GPU KV filled first (NEO §3.1), the rest on the CPU. */
export function steadyStateQueues(ctx: PlanContext, limits: SchedulerLimits): OnlineQueues {
  const w = ctx.workload;
  const q: OnlineQueues = { waiting: [], gpu: [], cpu: [] };
  let gpuBlocks = 0;
  const cap = Math.floor(limits.gpuKvTokens / 16);
  for (let i = 0; i < w.batch; i++) {
    const r: OnlineRequest = makeRequest(i, 0, w.prompt, w.gen);
    r.generated = Math.min(w.gen - 1, Math.floor(w.gen / 2));
    const b = blocksFor(contextTokens(r) + 1);
    if (gpuBlocks + b + q.gpu.length + 1 <= cap) { r.where = 'gpu'; q.gpu.push(r); gpuBlocks += b; } else { r.where = 'cpu'; q.cpu.push(r); }
  }
  return q;
}

const ATTN = new Set(['scores', 'softmax', 'wv']);

/** Runs already made per context and decider maker (the simulation is deterministic: seed 1). */
const runs = new WeakMap<PlanContext, Map<OnlinePolicySpec['makeScheduler'], OnlineSimResult>>();

/**
 * The serving simulation of an online workload (rate given): `requests` requests (default 64),
 * lengths ±10 % around prompt/gen, Poisson arrivals (seed 1), on the context's shared truth
 * costs. One run per question: plans (predicted.online), `auto` and `simulate` all report it —
 * `simulate` asks twice (the plan, then the simulation), so a run is kept per context and
 * `makeScheduler` (pass the same function to share it; each caller gets its own copy).
 */
export function onlineRun(ctx: PlanContext, makeScheduler: OnlinePolicySpec['makeScheduler']): OnlineSimResult {
  let byMaker = runs.get(ctx);
  if (!byMaker) { byMaker = new Map(); runs.set(ctx, byMaker); }
  let r = byMaker.get(makeScheduler);
  if (!r) { r = simulateServing(ctx, makeScheduler); byMaker.set(makeScheduler, r); }
  return structuredClone(r);
}

function simulateServing(ctx: PlanContext, makeScheduler: OnlinePolicySpec['makeScheduler']): OnlineSimResult {
  const w = ctx.workload;
  if (w.rate === undefined) throw new Error('online simulation needs a rate (workload rate=R requests/s)');
  const setup = onlineSetup(ctx);
  const count = w.requests ?? 64;
  const reqs = generateWorkload({ rate: w.rate, count, prompt: { kind: 'uniform-10pct', mean: w.prompt }, output: { kind: 'uniform-10pct', mean: w.gen }, seed: 1 });
  const r = runOnline(reqs, makeScheduler(setup.limits, setup.predictors), setup.truth);
  return {
    rate: w.rate, requests: count, throughputTokensPerS: r.throughputTokensPerS, perTokenLatencyMs: r.perTokenLatencyMs,
    meanIterationMs: r.iterations > 0 ? r.makespanMs / r.iterations : 0,
    extra: { modes: r.modes, iterations: r.iterations, makespanMs: r.makespanMs },
  };
}

export function planOnline(ctx: PlanContext, spec: OnlinePolicySpec): Plan {
  const w = ctx.workload;
  const L = ctx.model.nLayers;
  const setup = onlineSetup(ctx);
  const sched = spec.makeScheduler(setup.limits, setup.predictors);
  const q = steadyStateQueues(ctx, setup.limits);
  const gpuReqs = q.gpu.length;
  const cpuReqs = q.cpu.length;
  const it = sched.schedule(q);
  const res = executeIteration(it, setup.truth);
  let onGpu = 0, onCpu = 0;
  for (const b of it.batches) { onGpu += b.gpuDecodes.length; onCpu += b.cpuDecodes.length; }
  const gpuFraction = onGpu + onCpu > 0 ? onGpu / (onGpu + onCpu) : 1;
  const headMs = setup.truth.headMs(Math.max(1, res.produced.length));
  const layerMs = Math.max(0, (res.ms - headMs) / L);
  // Decode layer: linear ops on the GPU; attention split by requests between GPU and CPU.
  const table = ctx.cost.layerTimes(ctx.decodeStep, 'decode');
  const decOps: OpPlan[] = table.ops.map((t) => {
    if (!ATTN.has(t.kind) || onCpu === 0) return opOn(t, 'gpu', 'gpu');
    if (onGpu === 0) return opOn(t, 'cpu', undefined);
    const op: OpPlan = { name: t.name, kind: t.kind, device: 'split', gpuFraction, predictedMs: { gpu: (t.gpu ?? 0) * gpuFraction, cpu: (t.cpuSolo ?? t.cpu ?? 0) * (1 - gpuFraction) } };
    return op;
  });
  let gpuKvTok = 0, cpuKvTok = 0;
  for (const r of q.gpu) gpuKvTok += contextTokens(r);
  for (const r of q.cpu) cpuKvTok += contextTokens(r);
  const kvSplit = cpuKvTok === 0 ? { device: 'gpu' as const } : gpuKvTok === 0 ? { device: 'cpu' as const } : { device: 'split' as const, gpuFraction: gpuKvTok / (gpuKvTok + cpuKvTok) };
  const subBatches: PlanSubBatch[] = it.batches.map((b, i) => ({
    id: i, size: b.gpuPrefills.length + b.cpuPrefills.length + b.gpuDecodes.length + b.cpuDecodes.length,
    role: it.mode === 'async-overlap'
      ? `unified batch: ${b.gpuDecodes.length} GPU decodes + ${b.cpuDecodes.length} CPU decodes (one layer each, results used next iteration)`
      : i === 0 ? `${b.gpuPrefills.length + b.cpuPrefills.length} prefills + ${b.gpuDecodes.length} GPU decodes + ${b.cpuDecodes.length} CPU decodes`
        : `${b.cpuDecodes.length} CPU decodes (CPU attention overlaps batch-0's linear ops)`,
  }));
  const decode: PlanStage = makeStage({
    name: 'decode', step: ctx.decodeStep,
    layers: repeatLayers(L, (i) => makeLayer(i, decOps, kvSplit, layerMs)),
    head: headOn(ctx, w.batch, true), stepMs: res.ms,
    overlap: it.mode === 'two-batch'
      ? 'asymmetric pipelining: batch-0 linear ops overlap batch-1 CPU attention; batch-1 linear + batch-0 GPU attention overlap batch-0 CPU attention'
      : it.mode === 'async-overlap' ? 'asynchronous overlap: CPU attention of layer i spans the whole GPU iteration; synced before layer i of the next iteration' : 'GPU only this iteration',
    subBatches,
  });
  // Prefill: all on the GPU (NEO §1: prefill stays on the GPU); KV of requests beyond the GPU KV
  // capacity streams to the host layer by layer, overlapped.
  const preTable = ctx.cost.layerTimes(ctx.prefillStep, 'prefill');
  const preWork = ctx.cost.layerWork(ctx.prefillStep);
  const preOps = preTable.ops.map((t) => opOn(t, 'gpu', 'gpu'));
  const preLayer = sequentialLayerMs(ctx, preOps, preWork.length === preTable.ops.length ? preWork : undefined, preTable);
  const overflowFrac = w.batch > 0 ? cpuReqs / w.batch : 0;
  const swapMs = overflowFrac > 0 ? ctx.cost.transferMs(overflowFrac * w.batch * w.prompt * setup.costs.kvBytesPerTokenLayer, 'd2h') : 0;
  const prefill: PlanStage = makeStage({
    name: 'prefill', step: ctx.prefillStep,
    layers: repeatLayers(L, (i) => makeLayer(i, preOps, overflowFrac > 0 ? { device: 'split', gpuFraction: 1 - overflowFrac } : { device: 'gpu' }, Math.max(preLayer, swapMs))),
    head: headOn(ctx, w.batch, true),
    overlap: overflowFrac > 0 ? 'layer-wise KV swap-out of CPU requests overlaps the next layer\'s prefill' : 'none needed',
  });
  const produced = res.produced.length + res.aoAdvanced.length / L;
  // Decision: the decode step is the time until every request of the batch has one more token,
  // as for every other policy (tokens/s = batch / step). One iteration serves `produced` of them
  // (the scheduler may leave CPU decodes waiting, and an asynchronous-overlap request advances
  // one layer per iteration), so the step is that many iterations: iteration × batch / produced.
  const iterationsPerStep = produced > 0 ? w.batch / produced : Infinity;
  const stepMs = res.ms * iterationsPerStep;
  const tokensPerSecond = stepMs > 0 && Number.isFinite(stepMs) ? (w.batch * 1000) / stepMs : 0;
  const predicted: Plan['predicted'] = {
    layerMs: layerMs * iterationsPerStep, stepMs, tokensPerSecond, prefillMs: prefill.predicted.stepMs,
    totalMs: prefill.predicted.stepMs + w.gen * stepMs,
    perLane: { cpu: res.cpuMs, gpu: res.gpuMs, h2d: res.pcieMs / 2, d2h: res.pcieMs / 2, nvme: 0 },
  };
  const notes: string[] = [];
  if (w.rate !== undefined) {
    // Decision: a bounded simulation (workload `requests`, default 64; ±10 % lengths, seed 1),
    // the same run `plan`, `auto` and `simulate` report.
    try {
      const r = onlineRun(ctx, spec.makeScheduler);
      predicted.online = { rate: w.rate, throughputTokensPerS: r.throughputTokensPerS, perTokenLatencyMs: r.perTokenLatencyMs };
    } catch (e) {
      notes.push(`online simulation not available: ${(e as Error).message}`);
    }
  }
  const kvTok = kvBytesPerToken(ctx.model);
  const capacityLimited = cpuReqs > 0;
  const cpuBound = it.skippedCpu > 0;
  const binding: Resource = cpuBound ? 'cpu-memory-bandwidth' : capacityLimited ? 'vram-capacity' : bindingOf(ctx, decode, false);
  const decisions: Decision[] = [
    {
      id: 'kv-split', chosen: `${gpuReqs} requests' KV on the GPU, ${cpuReqs} on the CPU (GPU filled first)`, alternatives: [],
      binding: capacityLimited ? 'vram-capacity' : 'gpu-memory-bandwidth',
      reason: `GPU KV holds ${setup.limits.gpuKvTokens} tokens after weights and workspace; each request needs ${w.prompt + w.gen} at the end`,
    },
    {
      id: 'mode', chosen: `${it.mode}: ${onGpu} GPU decodes, ${onCpu} CPU decodes${it.skippedCpu ? `, ${it.skippedCpu} CPU decodes wait (CPU would not stay hidden)` : ''}`,
      alternatives: it.considered.map((c) => ({ label: c.mode, predictedMs: c.iterationMs, metric: 'stepMs' as const, note: `${(c.tokensPerMs * 1000).toFixed(1)} tokens/s estimated${c.mode === it.mode ? ' (chosen)' : ''}` })),
      binding, reason: 'highest estimated tokens per iteration time (T_tr / x) from the interpolated profiles',
    },
    ...spec.modeDecisions(it, sched),
  ];
  return makePlan(ctx, {
    policy: spec.policy, prefill, decode, predicted,
    memory: memoryUse(ctx, {
      gpuBytes: neoGpuFixedBytes(ctx) + Math.min(gpuKvTok, setup.limits.gpuKvTokens) * kvTok,
      pinnedBytes: 0,
      hostBytes: cpuKvTok * kvTok,
    }),
    explanation: {
      summary: `${spec.policy.toUpperCase()}: ${it.mode} — ${onGpu} requests attend on the GPU, ${onCpu} on the CPU${produced < w.batch ? ` (an iteration serves ${+produced.toFixed(2)} of the ${w.batch} requests, so a step for all of them is ${iterationsPerStep.toFixed(2)} iterations)` : ''}; ${tokensPerSecond.toFixed(1)} tokens/s at the mid-generation context.${notes.length ? ' ' + notes.join(' ') : ''}`,
      binding, decisions, whatIf: [],
    },
    details: {
      mode: it.mode, gpuRequests: gpuReqs, cpuRequests: cpuReqs, gpuKvTokens: setup.limits.gpuKvTokens, cpuKvTokens: setup.limits.cpuKvTokens,
      skippedCpuDecodes: it.skippedCpu, iterationMs: res.ms, servedPerIteration: produced, stages: it.stages, predictors: 'grid-profiled cost model, linear interpolation (2 points per octave)',
    },
  });
}
