// Which resource binds a plan: the busiest lane of the decode step, named by what limits that
// lane (bandwidth or compute), or VRAM capacity when the plan could not keep everything on the GPU.

import type { OpWork } from '../cost/types';
import type { PlanContext } from './policy';
import type { Lane, LaneTimes, PlanStage } from './types';
import type { Resource } from './explanation';

export function busiestLane(l: LaneTimes): Lane {
  let best: Lane = 'cpu';
  for (const k of ['gpu', 'h2d', 'd2h', 'nvme'] as Lane[]) if (l[k] > l[best]) best = k;
  return best;
}

/** Whether a device's share of this work is limited by memory traffic (vs arithmetic). */
function memoryBound(ctx: PlanContext, work: OpWork[], device: 'cpu' | 'gpu'): boolean {
  let bytes = 0;
  let flops = 0;
  for (const w of work) { bytes += w.weightBytes + w.kvReadBytes; flops += w.flops; }
  if (device === 'cpu') {
    const c = ctx.hardware.cpu;
    return bytes / (c.memory.readGBps * 1e9) > flops / (c.peakGflops * 0.5 * 1e9);
  }
  const g = ctx.hardware.gpu;
  if (!g) return true;
  return bytes / (g.memoryGBps * 1e9) > flops / (g.fp16Tflops * 1e12 * g.efficiency.gemm);
}

export function resourceOfLane(ctx: PlanContext, lane: Lane, stage: PlanStage): Resource {
  const step = { batch: stage.batch, newTokens: stage.newTokens, context: stage.context };
  const work = ctx.cost.layerWork(step);
  switch (lane) {
    case 'h2d': case 'd2h': return 'pcie-bandwidth';
    case 'nvme': return 'nvme-bandwidth';
    case 'cpu': return memoryBound(ctx, work, 'cpu') ? 'cpu-memory-bandwidth' : 'cpu-compute';
    case 'gpu': {
      const g = ctx.hardware.gpu;
      if (g && stage.predicted.perLane.gpu > 0) {
        const launches = stage.layers.reduce((n, l) => n + l.ops.filter((o) => o.device !== 'cpu').length, 0);
        if ((launches * g.launchOverheadUs) / 1e3 > 0.5 * stage.predicted.perLane.gpu) return 'launch-overhead';
      }
      return memoryBound(ctx, work, 'gpu') ? 'gpu-memory-bandwidth' : 'gpu-compute';
    }
  }
}

/**
 * The binding resource of a decode stage. `capacityLimited`: the policy left work off the GPU
 * because of VRAM; then VRAM capacity binds unless the GPU itself is the busiest lane.
 */
export function bindingOf(ctx: PlanContext, stage: PlanStage, capacityLimited: boolean): Resource {
  const lane = busiestLane(stage.predicted.perLane);
  if (capacityLimited && lane !== 'gpu') return 'vram-capacity';
  return resourceOfLane(ctx, lane, stage);
}
