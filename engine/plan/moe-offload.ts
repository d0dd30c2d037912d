// moe-offload: for mixture-of-experts models, attention, router, shared expert, KV cache and
// LM head of every layer stay on the GPU; the routed experts (most of the bytes, few of them
// used per token) live in host memory and run on the CPU — llama.cpp's `-ot exps=CPU` /
// `--cpu-moe` — except the experts that VRAM still holds, chosen hottest first.
//
// Decisions:
// - Which experts go to the GPU: the predicted decode time an expert saves on the GPU is
//   P(step reads it) × (its CPU time − its GPU time); the CPU and GPU times per expert are the
//   same for all experts of a model, so ranking by P(step reads it) = 1 − (1 − p_e)^T (p_e: the
//   per-token routing probability from --expert-stats, or k/E) is ranking by time saved. Ties
//   (uniform routing) go to the LAST layers first, whole layers at a time, so the placement is
//   `--n-cpu-moe N` in llama.cpp terms (experts of the first N layers on the CPU).
// - Experts of one layer split between devices run concurrently: the GPU part and the CPU part
//   of the step's tokens, each over its own experts (the simulator's 'split' op).
// - Prefill: the experts left in host memory either run on the CPU or are copied to the GPU for
//   the step (pageable h2d, as llama.cpp's CUDA backend does for batches ≥ 32 tokens); the
//   faster per layer is taken.
// - Host experts sit in pinned memory when the host's page-lock limit allows (prompt copies then
//   run at the pinned rate), else in pageable memory.
// - Not applicable without a GPU, for dense models, or when attention + router + shared expert
//   + KV of all layers + LM head do not fit in VRAM (then layer-split or other policies apply).

import { bindingOf } from './binding';
import type { Alternative } from './explanation';
import { layerActivation, readProbability } from '../cost/moe';
import type { OpTimes, OpWork } from '../cost/types';
import { expertBytes, layerWeightBytes, weightBytes } from '../model/shape';
import { headBytes, headOn, kvBytesPerLayer, makeLayer, makePlan, makeStage, memoryUse, opOn, sequentialLayerMs, workspaceBytes } from './build';
import type { Policy, PlanContext } from './policy';
import type { LayerPlan, OpPlan, PlanStage } from './types';

/** Per layer, which experts are resident in VRAM. */
export type ExpertPlacement = boolean[][];

export interface MoeBudget {
  /** VRAM for attention + router + shared expert + KV of all layers, LM head, workspace. */
  baseBytes: number;
  /** Bytes of one expert (gate + up + down). */
  expertBytes: number;
  /** Experts that fit in the VRAM left after the base. */
  gpuExperts: number;
}

/** Bytes of a layer without its routed experts (attention, norms, router, shared expert). */
export function nonExpertLayerBytes(ctx: PlanContext): number {
  return layerWeightBytes(ctx.model) - ctx.model.moe!.nExpert * expertBytes(ctx.model);
}

export function moeBudget(ctx: PlanContext): MoeBudget {
  const L = ctx.model.nLayers;
  const eb = expertBytes(ctx.model);
  const baseBytes = workspaceBytes(ctx) + L * (nonExpertLayerBytes(ctx) + kvBytesPerLayer(ctx)) + headBytes(ctx);
  const free = ctx.vramBytes - baseBytes;
  const gpuExperts = free > 0 ? Math.min(L * ctx.model.moe!.nExpert, Math.floor(free / eb)) : 0;
  return { baseBytes, expertBytes: eb, gpuExperts };
}

/** Tokens of one step of a stage (all sequences). */
function stepTokens(ctx: PlanContext, stage: 'prefill' | 'decode'): number {
  const s = stage === 'prefill' ? ctx.prefillStep : ctx.decodeStep;
  return s.batch * s.newTokens;
}

/**
 * The `count` experts with the highest probability of being read in a decode step (see the
 * Decision above); ties to later layers, then lower expert index.
 */
export function hottestExperts(ctx: PlanContext, count: number): ExpertPlacement {
  const moe = ctx.model.moe!;
  const L = ctx.model.nLayers;
  const T = stepTokens(ctx, 'decode');
  const all: { l: number; e: number; p: number }[] = [];
  for (let l = 0; l < L; l++) {
    const probs = layerActivation(moe, l);
    for (let e = 0; e < moe.nExpert; e++) all.push({ l, e, p: readProbability(probs[e]!, T) });
  }
  all.sort((a, b) => b.p - a.p || b.l - a.l || a.e - b.e);
  const placement: ExpertPlacement = Array.from({ length: L }, () => new Array<boolean>(moe.nExpert).fill(false));
  for (let i = 0; i < Math.min(count, all.length); i++) placement[all[i]!.l]![all[i]!.e] = true;
  return placement;
}

/** Placement with every expert on one device. */
export function uniformPlacement(ctx: PlanContext, onGpu: boolean): ExpertPlacement {
  return Array.from({ length: ctx.model.nLayers }, () => new Array<boolean>(ctx.model.moe!.nExpert).fill(onGpu));
}

/** A layer's expert work split by device: expected bytes read and FLOPs for T tokens. */
export interface ExpertSplit { cpu: OpWork; gpu: OpWork; gpuBytesShare: number; gpuTrafficShare: number; gpuCount: number }

export function expertSplit(ctx: PlanContext, base: OpWork, layer: number, onGpu: boolean[], tokens: number): ExpertSplit {
  const moe = ctx.model.moe!;
  const probs = layerActivation(moe, layer);
  const eb = expertBytes(ctx.model);
  const flopsPerChoice = base.flops / (tokens * moe.nExpertUsed);
  let cpuBytes = 0, gpuBytes = 0, cpuP = 0, gpuP = 0, gpuCount = 0;
  for (let e = 0; e < moe.nExpert; e++) {
    const read = readProbability(probs[e]!, tokens) * eb;
    if (onGpu[e]) { gpuBytes += read; gpuP += probs[e]!; gpuCount++; } else { cpuBytes += read; cpuP += probs[e]!; }
  }
  const part = (bytes: number, p: number): OpWork => ({ ...base, weightBytes: bytes, flops: flopsPerChoice * tokens * p, actInBytes: base.actInBytes, actOutBytes: base.actOutBytes });
  return { cpu: part(cpuBytes, cpuP), gpu: part(gpuBytes, gpuP), gpuBytesShare: gpuCount / moe.nExpert, gpuTrafficShare: moe.nExpertUsed > 0 ? gpuP / moe.nExpertUsed : 0, gpuCount };
}

/** The experts op of one layer as planned: its device(s), residency and predicted times. */
function expertsOp(ctx: PlanContext, t: OpTimes, base: OpWork, layer: number, onGpu: boolean[], stage: 'prefill' | 'decode', pinned: boolean): OpPlan {
  const host = pinned ? 'pinned-host' : 'host';
  const tokens = stepTokens(ctx, stage);
  const s = expertSplit(ctx, base, layer, onGpu, tokens);
  const cpuMs = s.cpu.weightBytes > 0 ? ctx.cost.opMs(s.cpu, 'cpu') : 0;
  const gpuMs = s.gpu.weightBytes > 0 ? ctx.cost.opMs(s.gpu, 'gpu') : 0;
  const op: OpPlan = { name: t.name, kind: t.kind, device: 'cpu', predictedMs: {}, experts: { onGpu: onGpu.flatMap((g, e) => (g ? [e] : [])), count: onGpu.length, gpuBytesShare: s.gpuBytesShare } };
  if (stage === 'prefill' && s.cpu.weightBytes > 0 && ctx.hardware.link) {
    // Copy the host experts to the GPU for the step when that beats computing them on the CPU.
    const streamH2d = ctx.cost.transferMs(s.cpu.weightBytes, 'h2d', pinned);
    const allGpuMs = ctx.cost.opMs({ ...base, weightBytes: s.cpu.weightBytes + s.gpu.weightBytes }, 'gpu');
    if (Math.max(streamH2d, allGpuMs) < Math.max(cpuMs, gpuMs)) {
      op.device = 'gpu'; op.weights = host; op.predictedMs = { gpu: allGpuMs, h2d: streamH2d };
      return op;
    }
  }
  if (s.gpuCount === 0) { op.device = 'cpu'; op.weights = host; op.predictedMs = { cpu: cpuMs }; }
  else if (s.gpuCount === onGpu.length) { op.device = 'gpu'; op.weights = 'gpu'; op.predictedMs = { gpu: gpuMs }; }
  else {
    op.device = 'split'; op.gpuFraction = s.gpuTrafficShare; op.weights = s.gpuBytesShare >= 0.5 ? 'gpu' : host;
    op.predictedMs = { cpu: cpuMs, gpu: gpuMs };
  }
  return op;
}

/** One stage with the given expert placement; everything else on the GPU. */
export function moeStage(ctx: PlanContext, stage: 'prefill' | 'decode', placement: ExpertPlacement, pinned = false): PlanStage {
  const step = stage === 'prefill' ? ctx.prefillStep : ctx.decodeStep;
  const table = ctx.cost.layerTimes(step, stage);
  const work = ctx.cost.layerWork(step);
  const layers: LayerPlan[] = [];
  for (let l = 0; l < ctx.model.nLayers; l++) {
    const ops = table.ops.map((t, j) => t.kind === 'experts' ? expertsOp(ctx, t, work[j]!, l, placement[l]!, stage, pinned) : opOn(t, 'gpu', 'gpu'));
    layers.push(makeLayer(l, ops, { device: 'gpu' }, sequentialLayerMs(ctx, ops, work, table)));
  }
  const overlap = 'per layer: attention, router and shared expert on the GPU; routed experts split by residency, the GPU and CPU parts of a layer run concurrently';
  return makeStage({ name: stage, step, layers, head: headOn(ctx, ctx.workload.batch, true), overlap });
}

/** Layer ranges as text: [0,1,2,5] → '0–2, 5'. */
export function ranges(layers: number[]): string {
  const out: string[] = [];
  for (let i = 0; i < layers.length;) {
    let j = i;
    while (j + 1 < layers.length && layers[j + 1] === layers[j]! + 1) j++;
    out.push(i === j ? String(layers[i]) : `${layers[i]}–${layers[j]}`);
    i = j + 1;
  }
  return out.join(', ');
}

const MiB = 2 ** 20;
const GiB = 2 ** 30;

export const policy: Policy = {
  name: 'moe-offload',
  title: 'MoE: attention, router, shared expert and KV on the GPU; routed experts in host memory on the CPU, the hottest in VRAM',
  source: 'llama.cpp -ot exps=CPU / --n-cpu-moe',
  applicable(ctx) {
    if (!ctx.model.moe) return { ok: false, reason: 'dense model (no routed experts)' };
    if (!ctx.hardware.gpu) return { ok: false, reason: 'no GPU in the hardware profile' };
    if (ctx.cost.measured) return { ok: false, reason: 'a measured --costs table has no per-expert costs' };
    const b = moeBudget(ctx);
    if (b.baseBytes > ctx.vramBytes) return { ok: false, reason: `attention, router, shared expert and KV of all layers plus the LM head need ${(b.baseBytes / GiB).toFixed(2)} GiB, VRAM budget ${(ctx.vramBytes / GiB).toFixed(2)} GiB` };
    return { ok: true, reason: `${b.gpuExperts} of ${ctx.model.nLayers * ctx.model.moe.nExpert} experts fit in VRAM beside attention and KV` };
  },
  plan(ctx) {
    const moe = ctx.model.moe!;
    const L = ctx.model.nLayers;
    const E = moe.nExpert;
    const b = moeBudget(ctx);
    const placement = hottestExperts(ctx, b.gpuExperts);
    const hostExpertBytes = (L * E - b.gpuExperts) * b.expertBytes;
    const limit = ctx.hardware.memory.pinnedLimitBytes;
    const pinned = ctx.hardware.link !== undefined && (limit === undefined || hostExpertBytes <= limit);
    const prefill = moeStage(ctx, 'prefill', placement, pinned);
    const decode = moeStage(ctx, 'decode', placement, pinned);
    const perLayerGpu = placement.map((row) => row.filter(Boolean).length);
    const hostLayers = perLayerGpu.flatMap((n, l) => (n === 0 ? [l] : []));
    const gpuLayers = perLayerGpu.flatMap((n, l) => (n === E ? [l] : []));
    const partial = perLayerGpu.flatMap((n, l) => (n > 0 && n < E ? [l] : []));
    const routing = moe.activation ? `measured routing frequencies (${moe.activationSource ?? 'expert stats'})` : `uniform routing (k/E = ${moe.nExpertUsed}/${E} per token; no --expert-stats given)`;

    // Figures for the explanation: one layer's experts on each device in a decode step.
    const T = stepTokens(ctx, 'decode');
    const step = ctx.decodeStep;
    const work = ctx.cost.layerWork(step);
    const ew = work.find((w) => w.kind === 'experts')!;
    const allCpu = expertSplit(ctx, ew, hostLayers[0] ?? 0, new Array<boolean>(E).fill(false), T);
    const cpuLayerMs = ctx.cost.opMs(allCpu.cpu, 'cpu');
    const gpuLayerMs = ctx.cost.opMs(allCpu.cpu, 'gpu');
    const distinct = allCpu.cpu.weightBytes / b.expertBytes;

    const stepOf = (p: ExpertPlacement): number => moeStage(ctx, 'decode', p, pinned).predicted.stepMs;
    const alternatives: Alternative[] = [
      { label: 'all experts in host memory (-ot exps=CPU)', predictedMs: stepOf(uniformPlacement(ctx, false)), metric: 'stepMs', note: b.gpuExperts > 0 ? 'fits, slower: VRAM left unused' : 'chosen' },
      { label: `${b.gpuExperts} hottest experts in VRAM`, predictedMs: decode.predicted.stepMs, metric: 'stepMs', note: 'chosen' },
      { label: 'all experts in VRAM', predictedMs: stepOf(uniformPlacement(ctx, true)), metric: 'stepMs', note: b.gpuExperts >= L * E ? 'chosen' : 'does not fit in VRAM' },
    ];
    if (b.gpuExperts === 0) alternatives.splice(1, 1);
    if (b.gpuExperts >= L * E) alternatives.splice(0, 2);

    const where: string[] = [];
    if (hostLayers.length) where.push(`experts of layers ${ranges(hostLayers)} stay in host memory`);
    if (partial.length) {
      const counts = partial.map((l) => perLayerGpu[l]!);
      const lo = Math.min(...counts), hi = Math.max(...counts);
      const n = partial.length <= 4 ? counts.join(', ') : lo === hi ? String(lo) : `${lo}–${hi}`;
      where.push(`layer${partial.length > 1 ? 's' : ''} ${ranges(partial)}: ${n} of ${E} experts${partial.length > 4 ? ' each' : ''} in VRAM${moe.activation ? ' (the hottest)' : ''}`);
    }
    if (gpuLayers.length) where.push(`experts of layers ${ranges(gpuLayers)} in VRAM`);
    const reason = `each layer's ${E} experts take ${(E * b.expertBytes / MiB).toFixed(0)} MiB (${(b.expertBytes / MiB).toFixed(2)} MiB each); attention, router${moe.sharedFf ? ', shared expert' : ''} and KV of all ${L} layers, the LM head and the workspace take ${(b.baseBytes / GiB).toFixed(2)} GiB of the ${(ctx.vramBytes / GiB).toFixed(2)} GiB VRAM budget, leaving room for ${b.gpuExperts} experts. `
      + `A decode step of ${T} token${T > 1 ? 's' : ''} reads ${distinct.toFixed(1)} distinct experts per layer (${(allCpu.cpu.weightBytes / MiB).toFixed(1)} MiB): ${cpuLayerMs.toFixed(3)} ms on the CPU vs ${gpuLayerMs.toFixed(3)} ms on the GPU, so the experts most likely to be read go to VRAM first (${routing})`;

    const binding = bindingOf(ctx, decode, b.gpuExperts < L * E);
    const hostBytes = (pinned ? 0 : hostExpertBytes) + weightBytes(ctx.model, 'token_embd');
    const gpuBytes = b.baseBytes + b.gpuExperts * b.expertBytes;
    return makePlan(ctx, {
      policy: 'moe-offload', prefill, decode,
      memory: memoryUse(ctx, { gpuBytes, pinnedBytes: pinned ? hostExpertBytes : 0, hostBytes }),
      explanation: {
        summary: `Attention, router${moe.sharedFf ? ', shared expert' : ''}, KV cache and LM head of all ${L} layers on the GPU; ${where.join('; ')} (${b.gpuExperts} of ${L * E} experts in VRAM, ${((b.gpuExperts / (L * E)) * 100).toFixed(0)} %). Host experts run on the CPU in decode${prefill.layers.some((l) => l.ops.some((o) => o.kind === 'experts' && o.weights !== 'gpu' && o.device === 'gpu')) ? ' and are copied to the GPU for the prompt' : ''}; they live in ${pinned ? 'pinned' : 'pageable'} host memory. Routing: ${routing}.`,
        binding,
        decisions: [{ id: 'moe-experts', chosen: where.join('; '), alternatives, binding: b.gpuExperts < L * E ? 'vram-capacity' : binding, reason }],
        whatIf: [],
      },
      details: {
        experts: {
          perLayerGpu, gpuExperts: b.gpuExperts, totalExperts: L * E, expertBytes: b.expertBytes,
          routing: moe.activation ? moe.activationSource ?? 'measured' : 'uniform',
          // llama.cpp's --n-cpu-moe N when the host layers are exactly the first N.
          ...(hostLayers.length + partial.length > 0 && [...hostLayers, ...partial].sort((x, y) => x - y).every((l, i) => l === i) ? { nCpuMoe: hostLayers.length + partial.length } : {}),
        },
      },
    });
  },
};
