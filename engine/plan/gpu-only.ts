// gpu-only: every op on the GPU. Weights and KV stay in VRAM when they fit; otherwise the layers
// that do not fit stream their weights and KV from pinned host memory every step (FlexGen-style
// offloading with all compute on the GPU — paper 000's "GPU-only" baseline, digest 000 §4).

import { bindingOf } from './binding';
import type { Decision } from './explanation';
import { headBytes, headOn, kvBytesPerLayer, layerBytes, makeLayer, makePlan, makeStage, memoryUse, opOn, repeatLayers, sequentialLayerMs, workspaceBytes } from './build';
import type { Policy, PlanContext } from './policy';
import type { LayerPlan, Plan } from './types';
import type { OnlineSimResult } from './sim-types';
import { onlineApplicable } from './online/neo';
import { onlineRun } from './online/plan-online';
import { NeoScheduler } from './neo/scheduler';

/**
 * Online workloads (rate given): the GPU-only serving baseline of NEO and APEX (SwiftLLM: NEO's
 * engine with every request's KV and attention on the GPU, §5.1), on the same serving simulator
 * and costs as NEO/APEX. Needs the weights on the GPU, as they do.
 */
function gpuOnlyServing(ctx: PlanContext): OnlineSimResult | undefined {
  if (ctx.workload.rate === undefined || !onlineApplicable(ctx, 'GPU-only serving').ok) return undefined;
  return onlineRun(ctx, (limits, predictors) => new NeoScheduler('gpu-only', limits, predictors));
}

export interface GpuResidency { residentLayers: number; headOnGpu: boolean; gpuBytes: number; pinnedBytes: number }

/**
 * How many layers stay resident. Decision: streamed layers need two layer buffers (double
 * buffering: one computing, one loading) plus one layer of KV; the LM head stays resident when
 * it fits after those buffers (it is needed every step).
 */
export function gpuResidency(ctx: PlanContext): GpuResidency {
  const L = ctx.model.nLayers;
  const lw = layerBytes(ctx);
  const kv = kvBytesPerLayer(ctx);
  const ws = workspaceBytes(ctx);
  const hb = headBytes(ctx);
  const all = L * (lw + kv) + hb + ws;
  if (all <= ctx.vramBytes) return { residentLayers: L, headOnGpu: true, gpuBytes: all, pinnedBytes: 0 };
  const buffers = 2 * lw + 2 * kv;
  let free = ctx.vramBytes - ws - buffers;
  const headOnGpu = free >= hb;
  if (headOnGpu) free -= hb;
  const resident = Math.max(0, Math.min(L, Math.floor(free / (lw + kv))));
  const streamed = L - resident;
  return {
    residentLayers: resident, headOnGpu,
    gpuBytes: ws + buffers + resident * (lw + kv) + (headOnGpu ? hb : 0),
    pinnedBytes: streamed * (lw + kv) + (headOnGpu ? 0 : hb),
  };
}

/** All-GPU layers; the first `resident` keep weights in VRAM. `kvOnHost`: every layer's KV lives in host memory (KVPR). */
export function gpuStageLayers(ctx: PlanContext, stage: 'prefill' | 'decode', resident: number, kvOnHost = false): LayerPlan[] {
  const step = stage === 'prefill' ? ctx.prefillStep : ctx.decodeStep;
  const table = ctx.cost.layerTimes(step, stage);
  const work = ctx.cost.measured && stage === 'decode' ? undefined : ctx.cost.layerWork(step);
  const L = ctx.model.nLayers;
  const res = (i: number): boolean => i < resident;
  const residentOps = table.ops.map((t) => opOn(t, 'gpu', 'gpu', kvOnHost ? (stage === 'decode' ? { streamKv: true } : { kvToHost: true }) : {}));
  const streamedOps = table.ops.map((t) => opOn(t, 'gpu', 'pinned-host', stage === 'decode' ? { streamKv: true } : { kvToHost: true }));
  const msRes = sequentialLayerMs(ctx, residentOps, work, table);
  const msStr = sequentialLayerMs(ctx, streamedOps, work, table);
  return repeatLayers(L, (i) => res(i)
    ? makeLayer(i, residentOps, kvOnHost ? { device: 'cpu', ...(stage === 'decode' ? { streamed: true } : {}) } : { device: 'gpu' }, msRes)
    : makeLayer(i, streamedOps, stage === 'decode' ? { device: 'cpu', streamed: true } : { device: 'cpu' }, msStr));
}

export const policy: Policy = {
  name: 'gpu-only',
  title: 'All compute on the GPU; weights/KV that do not fit stream from pinned host memory',
  source: 'baseline (paper 000 "GPU-only", FlexGen-style streaming)',
  simulateOnline(_plan, ctx) {
    const r = gpuOnlyServing(ctx);
    if (!r) throw new Error(`gpu-only serving simulation: ${onlineApplicable(ctx, 'GPU-only serving').reason}`);
    return r;
  },
  applicable(ctx) {
    if (!ctx.hardware.gpu || !ctx.hardware.link) return { ok: false, reason: 'no GPU in the hardware profile' };
    const r = gpuResidency(ctx);
    return { ok: true, reason: r.residentLayers === ctx.model.nLayers ? 'model and KV fit in VRAM' : `${r.residentLayers}/${ctx.model.nLayers} layers fit; the rest stream over PCIe every step` };
  },
  plan(ctx): Plan {
    const r = gpuResidency(ctx);
    const L = ctx.model.nLayers;
    const prefill = makeStage({
      name: 'prefill', step: ctx.prefillStep, layers: gpuStageLayers(ctx, 'prefill', r.residentLayers),
      head: headOn(ctx, ctx.workload.batch, true, r.headOnGpu ? 'gpu' : 'pinned-host'),
      overlap: r.residentLayers < L ? 'weights of layer k+1 stream over h2d while layer k computes' : 'none needed: everything resident',
    });
    const decode = makeStage({
      name: 'decode', step: ctx.decodeStep, layers: gpuStageLayers(ctx, 'decode', r.residentLayers),
      head: headOn(ctx, ctx.workload.batch, true, r.headOnGpu ? 'gpu' : 'pinned-host'),
      overlap: r.residentLayers < L ? 'weights and KV of layer k+1 stream over h2d while layer k computes' : 'none needed: everything resident',
    });
    const capacityLimited = r.residentLayers < L;
    const decisions: Decision[] = [{
      id: 'residency',
      chosen: `${r.residentLayers}/${L} layers resident in VRAM${capacityLimited ? `, ${L - r.residentLayers} streamed` : ''}`,
      alternatives: [],
      binding: capacityLimited ? 'vram-capacity' : bindingOf(ctx, decode, false),
      reason: capacityLimited
        ? `weights + KV need ${(L * (layerBytes(ctx) + kvBytesPerLayer(ctx)) / 2 ** 30).toFixed(1)} GiB, VRAM budget ${(ctx.vramBytes / 2 ** 30).toFixed(1)} GiB`
        : 'everything fits',
    }];
    const serving = gpuOnlyServing(ctx);
    const plan = makePlan(ctx, {
      policy: 'gpu-only', prefill, decode,
      memory: memoryUse(ctx, { gpuBytes: r.gpuBytes, pinnedBytes: r.pinnedBytes, hostBytes: 0 }),
      explanation: {
        summary: capacityLimited
          ? `All ops on the GPU; ${L - r.residentLayers} of ${L} layers stream weights and KV over PCIe each step.`
          : 'Everything fits in VRAM: all ops on the GPU.',
        binding: bindingOf(ctx, decode, capacityLimited), decisions, whatIf: [],
      },
      details: { residentLayers: r.residentLayers, headOnGpu: r.headOnGpu },
    });
    if (serving) plan.predicted.online = { rate: serving.rate, throughputTokensPerS: serving.throughputTokensPerS, perTokenLatencyMs: serving.perTokenLatencyMs };
    return plan;
  },
};
