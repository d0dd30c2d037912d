// layer-split: whole layers on the GPU (weights + their KV resident), the rest on the CPU —
// llama.cpp's -ngl, with the count chosen as `--fit` does: the most layers that fit in VRAM.
// llama.cpp offloads the *last* n layers (i_gpu_start = n_layer − n_gpu_layers); we do the same.

import { bindingOf } from './binding';
import type { Alternative } from './explanation';
import { headBytes, headOn, kvBytesPerLayer, layerBytes, makeLayer, makePlan, makeStage, memoryUse, opOn, repeatLayers, sequentialLayerMs, workspaceBytes } from './build';
import type { Policy, PlanContext } from './policy';
import type { LayerPlan, PlanStage } from './types';
import { weightBytes } from '../model/shape';

export interface LayerFit { gpuLayers: number; headOnGpu: boolean; gpuBytes: number }

/**
 * Most layers that fit: each GPU layer needs its weights and its KV for the whole workload;
 * one workspace is shared. Decision: the LM head (needed every step, as big as 2–4 layers for
 * 128k-vocab models) goes to the GPU only when every layer already fits, as llama.cpp does
 * (the output layer is offloaded only with -ngl > n_layer).
 */
export function fitLayers(ctx: PlanContext): LayerFit {
  const L = ctx.model.nLayers;
  const per = layerBytes(ctx) + kvBytesPerLayer(ctx);
  const ws = workspaceBytes(ctx);
  const free = ctx.vramBytes - ws;
  const n = Math.max(0, Math.min(L, Math.floor(free / per)));
  const headOnGpu = n === L && free - L * per >= headBytes(ctx);
  return { gpuLayers: n, headOnGpu, gpuBytes: n > 0 || headOnGpu ? ws + n * per + (headOnGpu ? headBytes(ctx) : 0) : 0 };
}

function layersFor(ctx: PlanContext, stage: 'prefill' | 'decode', gpuLayers: number): LayerPlan[] {
  const step = stage === 'prefill' ? ctx.prefillStep : ctx.decodeStep;
  const table = ctx.cost.layerTimes(step, stage);
  const work = ctx.cost.measured && stage === 'decode' ? undefined : ctx.cost.layerWork(step);
  const L = ctx.model.nLayers;
  const gpuOps = table.ops.map((t) => opOn(t, 'gpu', 'gpu'));
  const cpuOps = table.ops.map((t) => opOn(t, 'cpu', 'host'));
  const gpuMs = sequentialLayerMs(ctx, gpuOps, work, table);
  let cpuMs = sequentialLayerMs(ctx, cpuOps, work, table);
  let cpuLayerOps = cpuOps;
  // Decision: in prefill, a CPU layer's weights may be copied to the GPU for the big matmuls
  // (llama.cpp offloads large-batch ops of CPU layers, from pageable memory); take the faster.
  if (stage === 'prefill' && ctx.hardware.gpu) {
    const link = ctx.hardware.link!;
    const pageableFactor = link.h2dPinnedGBps / link.h2dPageableGBps;
    const streamOps = table.ops.map((t) => {
      const op = opOn(t, 'gpu', 'host');
      const weightH2d = Math.max(0, (t.h2d ?? 0) - (t.h2dKv ?? 0)) * pageableFactor;
      op.predictedMs = weightH2d > 0 ? { gpu: t.gpu ?? 0, h2d: weightH2d } : { gpu: t.gpu ?? 0 };
      if (t.d2h) op.predictedMs.d2h = t.d2h; // the new KV goes back to the CPU layer's host cache
      return op;
    });
    const streamMs = sequentialLayerMs(ctx, streamOps, work, table);
    if (streamMs < cpuMs) { cpuMs = streamMs; cpuLayerOps = streamOps; }
  }
  return repeatLayers(L, (i) => i >= L - gpuLayers
    ? makeLayer(i, gpuOps, { device: 'gpu' }, gpuMs)
    : makeLayer(i, cpuLayerOps, { device: 'cpu' }, cpuMs));
}

function stages(ctx: PlanContext, fit: LayerFit): { prefill: PlanStage; decode: PlanStage } {
  const overlap = 'none: layers run in order, activations cross once between the CPU and GPU parts';
  return {
    prefill: makeStage({ name: 'prefill', step: ctx.prefillStep, layers: layersFor(ctx, 'prefill', fit.gpuLayers), head: headOn(ctx, ctx.workload.batch, fit.headOnGpu), overlap }),
    decode: makeStage({ name: 'decode', step: ctx.decodeStep, layers: layersFor(ctx, 'decode', fit.gpuLayers), head: headOn(ctx, ctx.workload.batch, fit.headOnGpu), overlap }),
  };
}

export const policy: Policy = {
  name: 'layer-split',
  title: 'The most whole layers that fit on the GPU, the rest on the CPU',
  source: 'llama.cpp -ngl / --fit',
  applicable(ctx) {
    if (!ctx.hardware.gpu) return { ok: false, reason: 'no GPU in the hardware profile' };
    const f = fitLayers(ctx);
    return { ok: true, reason: `${f.gpuLayers}/${ctx.model.nLayers} layers fit in VRAM` };
  },
  plan(ctx) {
    const fit = fitLayers(ctx);
    const L = ctx.model.nLayers;
    const { prefill, decode } = stages(ctx, fit);
    // Alternatives: a few fewer / more layers (more is what VRAM forbids).
    const alternatives: Alternative[] = [];
    for (const n of [0, Math.floor(fit.gpuLayers / 2), fit.gpuLayers, Math.min(L, fit.gpuLayers + 4)]) {
      if (alternatives.some((a) => a.label.startsWith(`${n} `))) continue;
      const d = n === fit.gpuLayers ? decode : stages(ctx, { gpuLayers: n, headOnGpu: n === L && fit.headOnGpu, gpuBytes: 0 }).decode;
      alternatives.push({
        label: `${n} layers on GPU`, predictedMs: d.predicted.stepMs, metric: 'stepMs',
        note: n === fit.gpuLayers ? 'chosen' : n > fit.gpuLayers ? 'does not fit in VRAM' : 'fits, slower',
      });
    }
    const capacityLimited = fit.gpuLayers < L;
    const binding = bindingOf(ctx, decode, capacityLimited);
    const hostBytes = (L - fit.gpuLayers) * (layerBytes(ctx) + kvBytesPerLayer(ctx)) + (fit.headOnGpu ? 0 : headBytes(ctx)) + weightBytes(ctx.model, 'token_embd');
    return makePlan(ctx, {
      policy: 'layer-split', prefill, decode,
      memory: memoryUse(ctx, { gpuBytes: fit.gpuBytes, pinnedBytes: 0, hostBytes }),
      explanation: {
        summary: `${fit.gpuLayers} of ${L} layers on the GPU (the last ones, as llama.cpp offloads), ${L - fit.gpuLayers} on the CPU; LM head on the ${fit.headOnGpu ? 'GPU' : 'CPU'}.`,
        binding,
        decisions: [{
          id: 'layers-on-gpu', chosen: `${fit.gpuLayers} layers on GPU`, alternatives,
          binding: capacityLimited ? 'vram-capacity' : binding,
          reason: `each layer needs ${((layerBytes(ctx) + kvBytesPerLayer(ctx)) / 2 ** 20).toFixed(0)} MiB (weights + KV); VRAM budget ${(ctx.vramBytes / 2 ** 30).toFixed(2)} GiB after a ${(workspaceBytes(ctx) / 2 ** 20).toFixed(0)} MiB workspace`,
        }],
        whatIf: [],
      },
      details: { gpuLayers: fit.gpuLayers, headOnGpu: fit.headOnGpu },
    });
  },
};
