// cpu-only: every op on the CPU, weights used in place from (pageable) host memory.

import { bindingOf } from './binding';
import { headOn, kvBytesPerLayer, layerBytes, headBytes, makeLayer, makePlan, makeStage, memoryUse, opOn, repeatLayers, sequentialLayerMs } from './build';
import type { Policy, PlanContext } from './policy';
import type { LayerPlan } from './types';
import { weightBytes } from '../model/shape';

function layers(ctx: PlanContext, stage: 'prefill' | 'decode'): LayerPlan[] {
  const step = stage === 'prefill' ? ctx.prefillStep : ctx.decodeStep;
  const table = ctx.cost.layerTimes(step, stage);
  const ops = table.ops.map((t) => opOn(t, 'cpu', 'host'));
  const ms = sequentialLayerMs(ctx, ops, undefined, table);
  return repeatLayers(ctx.model.nLayers, (i) => makeLayer(i, ops, { device: 'cpu' }, ms));
}

function hostBytes(ctx: PlanContext): number {
  return ctx.model.nLayers * (layerBytes(ctx) + kvBytesPerLayer(ctx)) + headBytes(ctx) + weightBytes(ctx.model, 'token_embd');
}

export const policy: Policy = {
  name: 'cpu-only',
  title: 'All ops on the CPU',
  source: 'baseline (llama.cpp -ngl 0, IPEX in LIA)',
  // Memory is not an applicability question: a plan that does not fit is refused the same way
  // for every policy, with the numbers (engine/plan/predict.ts).
  applicable() {
    return { ok: true, reason: 'every op can run on the CPU' };
  },
  plan(ctx) {
    const prefill = makeStage({ name: 'prefill', step: ctx.prefillStep, layers: layers(ctx, 'prefill'), head: headOn(ctx, ctx.workload.batch, false), overlap: 'none (one device)' });
    const decode = makeStage({ name: 'decode', step: ctx.decodeStep, layers: layers(ctx, 'decode'), head: headOn(ctx, ctx.workload.batch, false), overlap: 'none (one device)' });
    const binding = bindingOf(ctx, decode, false);
    return makePlan(ctx, {
      policy: 'cpu-only', prefill, decode,
      memory: memoryUse(ctx, { gpuBytes: 0, pinnedBytes: 0, hostBytes: hostBytes(ctx) }),
      explanation: {
        summary: ctx.hardware.gpu ? 'All ops on the CPU; the GPU is not used.' : 'No GPU: all ops on the CPU.',
        binding,
        decisions: [{ id: 'device', chosen: 'CPU for every op', alternatives: [], binding, reason: ctx.hardware.gpu ? 'policy forces the CPU' : 'no GPU in the profile' }],
        whatIf: [],
      },
    });
  },
};
