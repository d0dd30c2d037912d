// Measured next to predicted for the loaded model: a short traced run through the scheduler (a
// prompt, then a few decode steps), averaged per layer and plan op, with the plan of what runs
// (the executed placement's plan, or this machine's CPU-only plan when the model runs on the
// CPU) and the simulator's step of that plan beside the measured ones in one Chrome trace.
import { readGguf } from '../model/gguf/index';
import { shapeFromGguf } from '../model/shape';
import type { HardwareProfile } from '../hardware/types';
import { planRequest, simulateRequest, type PlanParams } from '../plan/api';
import type { Plan } from '../plan/types';
import type { TraceEvent } from '../plan/sim-types';
import { benchTokens } from './bench';
import { cpuForThreads } from './devices';
import type { Engine } from './engine';
import { PROMPT_CHUNK } from './prompt-steps';
import { nativeOpTable } from '../native/op-table';
import { joinPlanOps, measuredChromeTrace, stepBreakdown, type MeasuredPlanOp } from './trace';

/**
 * Measured ms per plan op of one decode step (the plan's op names; ops matched by layer index).
 * A fused kernel (one native op over several plan ops, e.g. Attention = Scores + Softmax + WV)
 * is one entry with `covers`: measured as a whole, shown as one cell spanning its plan ops.
 */
export interface MeasuredOps {
  source: string;
  layers: { index: number; ops: MeasuredPlanOp[] }[];
  headMs?: number;
}

type ChromeTraceJson = { traceEvents: TraceEvent[]; displayTimeUnit: 'ms'; otherData: Record<string, unknown> };

export interface MeasureResult {
  plan: Plan;
  measured: MeasuredOps;
  /** The simulator's trace of `plan`, and the measured decode step of median length (Chrome trace JSON). */
  predictedTrace: ChromeTraceJson;
  measuredTrace: ChromeTraceJson;
  /** Measured and predicted decode step, ms. */
  decodeStepMs: number;
  predictedStepMs: number;
}

export async function measureRun(engine: Engine, opts: { promptTokens?: number; decodeSteps?: number; signal?: AbortSignal; hardware: () => Promise<HardwareProfile> }): Promise<MeasureResult> {
  const promptTokens = opts.promptTokens ?? 64;
  const decodeSteps = opts.decodeSteps ?? 8;
  const ex = engine.execution;
  const hp = engine.hparams;
  // The plan of what runs: the executed placement's, else this machine's CPU-only plan.
  let params: PlanParams;
  if (ex.planParams && ex.plan) {
    params = { ...ex.planParams, policy: ex.plan.chosenPolicy };
  } else {
    const profile = await opts.hardware();
    params = {
      model: { ...shapeFromGguf(readGguf(engine.summary.path)), kvFormat: engine.summary.kvFormat },
      hardware: { ...profile, cpu: cpuForThreads(profile.cpu, engine.threads) },
      workload: { batch: 1, prompt: promptTokens, gen: decodeSteps },
      policy: 'cpu-only',
    };
  }
  const plan = planRequest(params);
  // Background priority: an editor completion that arrives meanwhile goes first (its steps are
  // then part of the trace; the averages are over this request's decode steps).
  engine.setTracing(true);
  let trace;
  try {
    const stream = engine.scheduler().submit({
      prompt: benchTokens(promptTokens, hp.nVocab), maxTokens: decodeSteps + 1, temperature: 0, priority: 'background',
      onlyStopIds: true, stopIds: new Set(), ...(opts.signal ? { signal: opts.signal } : {}),
    });
    const r = await stream.result;
    if (r.stopReason === 'cancelled') throw new Error('measurement cancelled');
    trace = engine.takeTrace();
  } finally {
    engine.setTracing(false);
  }
  const steps = [...new Set(trace.events.map((e) => e.step))].sort((a, b) => a - b);
  // Prompt steps: a background prompt runs in steps of PROMPT_CHUNK rows (the scheduler sizes only
  // foreground prompts by their speed), and on a device in steps of at most deviceStepRows.
  const prefill = Math.ceil(promptTokens / Math.min(PROMPT_CHUNK, nativeOpTable().deviceStepRows));
  // The first decode step warms caches after the prompt; the rest are averaged.
  const decode = steps.slice(prefill + 1);
  const b = stepBreakdown(trace, decode.length ? decode : steps.slice(prefill), hp.nLayers);
  const table = nativeOpTable().planOps;
  const layers = plan.stages.decode.layers.map((l) => ({
    index: l.index,
    ops: joinPlanOps(l.ops.map((o) => o.name), b.opMs[l.index] ?? {}, table),
  }));
  const head = b.opMs[hp.nLayers] ?? {};
  const measured: MeasuredOps = {
    source: `runtime: ${decode.length || steps.length - prefill} decode steps after a ${promptTokens}-token prompt, ${new Date().toISOString().slice(0, 19).replace('T', ' ')}`,
    layers,
    headMs: (head['LM head'] ?? 0) + (head.embed ?? 0),
  };
  // The timeline compares one step with one step: the measured decode step of median length,
  // its times from its own start, so it lines up under the simulated step.
  const decodeIds = decode.length ? decode : steps.slice(prefill);
  const lengths = decodeIds.map((id) => {
    const ev = trace.events.filter((e) => e.step === id);
    return { id, ms: Math.max(...ev.map((e) => e.endMs)) - Math.min(...ev.map((e) => e.startMs)) };
  }).sort((x, y) => x.ms - y.ms);
  const median = lengths[Math.floor(lengths.length / 2)]?.id ?? steps[steps.length - 1]!;
  const stepEvents = trace.events.filter((e) => e.step === median);
  const t0 = Math.min(...stepEvents.map((e) => e.startMs));
  const oneStep = { ops: trace.ops, listStarts: trace.listStarts, events: stepEvents.map((e) => ({ ...e, startMs: e.startMs - t0, endMs: e.endMs - t0 })) };
  const measuredTrace = measuredChromeTrace(oneStep, () => `measured decode step (median of ${decodeIds.length})`, { policy: plan.chosenPolicy, split: ex.split, device: ex.device });
  const predictedTrace = simulateRequest({ ...params, trace: true }).trace! as ChromeTraceJson;
  return { plan, measured, predictedTrace, measuredTrace, decodeStepMs: b.stepMs, predictedStepMs: plan.predicted.stepMs };
}
