// Shared pieces for policies: memory sizes, op placements with their predicted times, stage and
// plan assembly. Policies decide; these helpers only add up.

import type { LayerCostTable, OpTimes, OpWork, StepShape } from '../cost/types';
import { formatBytesPerElement, layerWeightBytes, weightBytes } from '../model/shape';
import type { Explanation } from './explanation';
import type { PlanContext } from './policy';
import {
  PLAN_VERSION, type KvPlacement, type LaneTimes, type LayerPlan, type MemoryUse, type OpPlan, type Plan, type PlanStage,
  type PolicyName, type Predicted, type SubBatch, type WeightResidency,
} from './types';

export const zeroLanes = (): LaneTimes => ({ cpu: 0, gpu: 0, h2d: 0, d2h: 0, nvme: 0 });

/** KV bytes of one layer at the end of generation, whole batch. */
export function kvBytesPerLayer(ctx: PlanContext): number {
  const m = ctx.model;
  return ctx.workload.batch * (ctx.workload.prompt + ctx.workload.gen) * 2 * m.nKvHeads * m.headDim * formatBytesPerElement(m.kvFormat);
}

/**
 * Decision: GPU workspace for activations. The prompt is processed in chunks of ≤ 512 tokens
 * (llama.cpp's default micro-batch) with tiled (flash) attention, so no full score matrix:
 * chunk tokens × (4·d + 2·n_ff) fp32 values, plus the logits of the batch.
 */
export function workspaceBytes(ctx: PlanContext): number {
  const m = ctx.model;
  const chunk = Math.min(512, ctx.workload.batch * ctx.workload.prompt);
  return chunk * (4 * m.nEmbd + 2 * m.nFf) * 4 + ctx.workload.batch * m.nVocab * 4;
}

export function headBytes(ctx: PlanContext): number { return weightBytes(ctx.model, 'output'); }
export function layerBytes(ctx: PlanContext): number { return layerWeightBytes(ctx.model); }

/** Predicted times of an op on a device; `contended` picks paper 000's CPU-under-transfer time. */
/**
 * `streamKv`: the op's KV lives in host memory and streams in (h2dKv), new K/V go back (d2h).
 * `kvToHost`: only the write-back (prefill of a layer whose KV is kept in host memory).
 */
export function opOn(t: OpTimes, device: 'cpu' | 'gpu', weights: WeightResidency | undefined, opts: { contended?: boolean; streamKv?: boolean; kvToHost?: boolean } = {}): OpPlan {
  const op: OpPlan = { name: t.name, kind: t.kind, device, predictedMs: {} };
  if (weights && t.kind !== 'scores' && t.kind !== 'wv' && t.kind !== 'softmax' && t.kind !== 'norm' && t.kind !== 'rope') op.weights = weights;
  if (device === 'cpu') {
    op.predictedMs.cpu = opts.contended ? (t.cpu ?? t.cpuSolo ?? 0) : (t.cpuSolo ?? t.cpu ?? 0);
  } else {
    op.predictedMs.gpu = t.gpu ?? 0;
    const weightH2d = Math.max(0, (t.h2d ?? 0) - (t.h2dKv ?? 0));
    let h2d = 0;
    if (weights === 'pinned-host') h2d += weightH2d;
    if (weights === 'nvme') op.predictedMs.s2d = t.s2d ?? 0;
    if (opts.streamKv && t.h2dKv) { h2d += t.h2dKv; op.predictedMs.h2dKv = t.h2dKv; }
    if (h2d > 0) op.predictedMs.h2d = h2d;
    if ((opts.streamKv || opts.kvToHost) && t.d2h) op.predictedMs.d2h = t.d2h;
  }
  return op;
}

/** Activation hand-off when op j runs on another device than op j-1 (latency + bytes over the link). */
export function handoffMs(ctx: PlanContext, work: OpWork[] | undefined, table: LayerCostTable, j: number): number {
  const w = work && work.length === table.ops.length && work[j]?.name === table.ops[j]?.name ? work[j] : undefined;
  const bytes = w ? w.actInBytes : 0;
  if (!ctx.hardware.link) return 0;
  return ctx.cost.transferMs(Math.max(bytes, 1), 'h2d');
}

/** Sum of lane times of a list of ops. */
export function laneSums(ops: OpPlan[]): LaneTimes {
  const s = zeroLanes();
  for (const o of ops) {
    s.cpu += o.predictedMs.cpu ?? 0;
    s.gpu += o.predictedMs.gpu ?? 0;
    s.h2d += o.predictedMs.h2d ?? 0;
    s.gpu += o.predictedMs.dc ?? 0; // decompression runs on the GPU
    s.d2h += o.predictedMs.d2h ?? 0;
    s.nvme += o.predictedMs.s2d ?? 0;
  }
  return s;
}

/**
 * Layer time when ops run one after another (data dependencies) and transfers stream ahead on
 * their own lanes (prefetch of the next layer): max(compute chain + hand-offs, each link lane).
 */
export function sequentialLayerMs(ctx: PlanContext, ops: OpPlan[], work: OpWork[] | undefined, table: LayerCostTable): number {
  let chain = 0;
  for (let j = 0; j < ops.length; j++) {
    const o = ops[j]!;
    chain += (o.predictedMs.cpu ?? 0) + (o.predictedMs.gpu ?? 0);
    if (j > 0 && ops[j - 1]!.device !== o.device) chain += handoffMs(ctx, work, table, j);
  }
  const lanes = laneSums(ops);
  return Math.max(chain, lanes.h2d, lanes.d2h, lanes.nvme);
}

export function majorityResidency(ops: OpPlan[]): WeightResidency {
  const count = new Map<WeightResidency, number>();
  for (const o of ops) if (o.weights) count.set(o.weights, (count.get(o.weights) ?? 0) + 1);
  let best: WeightResidency = 'host';
  let n = -1;
  for (const [k, v] of count) if (v > n) { best = k; n = v; }
  return best;
}

export function makeLayer(index: number, ops: OpPlan[], kv: KvPlacement, predictedMs: number): LayerPlan {
  return { index, ops, weights: majorityResidency(ops), kv, predictedMs };
}

export interface StageInput {
  name: 'prefill' | 'decode';
  step: StepShape;
  layers: LayerPlan[];
  head: OpPlan;
  overlap: string;
  subBatches?: SubBatch[];
  /** Step time; default Σ layer times + head. */
  stepMs?: number;
}

export function makeStage(s: StageInput): PlanStage {
  const perLane = zeroLanes();
  let sum = 0;
  // Op times are per sub-batch; weights cross once per layer (see OpPlan.predictedMs).
  const nb = Math.max(1, s.subBatches?.length ?? 1);
  for (const l of s.layers) {
    const ls = laneSums(l.ops);
    const kv = l.ops.reduce((a, o) => a + (o.predictedMs.h2dKv ?? 0), 0);
    perLane.cpu += nb * ls.cpu; perLane.gpu += nb * ls.gpu; perLane.h2d += ls.h2d + (nb - 1) * kv;
    perLane.d2h += nb * ls.d2h; perLane.nvme += ls.nvme;
    sum += l.predictedMs;
  }
  const hs = laneSums([s.head]);
  perLane.cpu += hs.cpu; perLane.gpu += hs.gpu; perLane.h2d += hs.h2d;
  const headMs = (s.head.predictedMs.cpu ?? 0) + Math.max(s.head.predictedMs.gpu ?? 0, s.head.predictedMs.h2d ?? 0);
  const stepMs = s.stepMs ?? sum + headMs;
  const stage: PlanStage = {
    name: s.name, batch: s.step.batch, newTokens: s.step.newTokens, context: s.step.context,
    layers: s.layers, head: s.head, overlap: s.overlap,
    predicted: { layerMs: s.layers.length ? sum / s.layers.length : 0, stepMs, perLane },
  };
  if (s.subBatches) stage.subBatches = s.subBatches;
  return stage;
}

/** Places the LM head on the GPU when `onGpu`, else the CPU. */
export function headOn(ctx: PlanContext, rows: number, onGpu: boolean, residency: WeightResidency = onGpu ? 'gpu' : 'host'): OpPlan {
  const t = ctx.cost.headTimes(rows);
  return opOn(t, onGpu ? 'gpu' : 'cpu', residency);
}

export interface MemoryInput { gpuBytes: number; pinnedBytes: number; hostBytes: number }

export function memoryUse(ctx: PlanContext, m: MemoryInput): MemoryUse {
  const cap = ctx.vramBytes;
  return {
    gpuBytes: m.gpuBytes, gpuCapacityBytes: cap, hostBytes: m.hostBytes, pinnedBytes: m.pinnedBytes,
    hostCapacityBytes: ctx.hostBytes,
    // A plan fits when VRAM, host memory and the host's page-lock limit (where known) all hold it.
    fits: m.gpuBytes <= cap + 1 && m.hostBytes + m.pinnedBytes <= ctx.hostBytes + 1
      && (ctx.hardware.memory.pinnedLimitBytes === undefined || m.pinnedBytes <= ctx.hardware.memory.pinnedLimitBytes + 1),
  };
}

export function predictedOf(ctx: PlanContext, prefill: PlanStage, decode: PlanStage): Predicted {
  const stepMs = decode.predicted.stepMs;
  return {
    layerMs: decode.predicted.layerMs,
    stepMs,
    tokensPerSecond: stepMs > 0 ? (ctx.workload.batch * 1000) / stepMs : 0,
    prefillMs: prefill.predicted.stepMs,
    totalMs: prefill.predicted.stepMs + ctx.workload.gen * stepMs,
    perLane: decode.predicted.perLane,
  };
}

export interface PlanInput {
  policy: PolicyName;
  prefill: PlanStage;
  decode: PlanStage;
  memory: MemoryUse;
  explanation: Explanation;
  details?: Record<string, unknown>;
  predicted?: Predicted;
}

export function makePlan(ctx: PlanContext, p: PlanInput): Plan {
  const plan: Plan = {
    version: PLAN_VERSION,
    policy: p.policy,
    chosenPolicy: p.policy,
    model: { name: ctx.model.name, family: ctx.model.family, nLayers: ctx.model.nLayers },
    hardware: { name: ctx.hardware.name, source: ctx.hardware.source.kind },
    workload: { ...ctx.workload },
    costSource: ctx.cost.measured ? ctx.cost.layerTimes(ctx.decodeStep, 'decode').source : ctx.cost.source ?? 'model',
    stages: { prefill: p.prefill, decode: p.decode },
    predicted: p.predicted ?? predictedOf(ctx, p.prefill, p.decode),
    memory: p.memory,
    explanation: p.explanation,
  };
  if (p.details) plan.details = p.details;
  return plan;
}

/** Every layer with the same op placement (copies with their own index). */
export function repeatLayers(n: number, build: (i: number) => LayerPlan): LayerPlan[] {
  const out: LayerPlan[] = [];
  for (let i = 0; i < n; i++) out.push(build(i));
  return out;
}
