// neo: asymmetric pipelining with load-aware per-iteration scheduling (paper 003, NEO, MLSys 2025;
// digest 003). All weights and linear ops stay on the GPU; the decode attention and KV of the
// requests that do not fit in GPU KV move to the CPU; each iteration two sub-batches overlap the
// GPU's linear ops with the CPU's attention, and the scheduler (engine/plan/neo/scheduler.ts)
// picks per iteration between that and GPU-only, from interpolated profiles.

import { sizeText } from '../predict';
import type { Policy, PlanContext } from '../policy';
import type { Plan } from '../types';
import { neoGpuFixedBytes } from '../neo/from-cost-model';
import { onlineRun, planOnline } from './plan-online';
import { NeoScheduler, type SchedulerLimits } from '../neo/scheduler';
import type { OnlinePredictors } from '../neo/costs';

/** NEO keeps every weight on the GPU (§6 "NEO implicitly assumes putting all model weights on the GPU"). */
export function onlineApplicable(ctx: PlanContext, name: string): { ok: boolean; reason: string } {
  if (!ctx.hardware.gpu || !ctx.hardware.link) return { ok: false, reason: 'no GPU in the hardware profile' };
  const fixed = neoGpuFixedBytes(ctx);
  if (fixed > ctx.vramBytes) {
    return { ok: false, reason: `${name} keeps all weights on the GPU: weights + workspace need ${sizeText(fixed)}, VRAM budget ${sizeText(ctx.vramBytes)}` };
  }
  return { ok: true, reason: `weights fit on the GPU; the KV that does not fit moves to the CPU with its decode attention` };
}

/** One function for the plan and the simulation, so they share one serving run (onlineRun). */
const makeScheduler = (limits: SchedulerLimits, predictors: OnlinePredictors): NeoScheduler => new NeoScheduler('neo', limits, predictors);

export const policy: Policy = {
  name: 'neo',
  title: 'Asymmetric pipelining: decode attention of GPU-KV-overflow requests on the CPU, load-aware per-iteration scheduling',
  source: '003 (NEO, MLSys 2025)',
  applicable: (ctx) => onlineApplicable(ctx, 'NEO'),
  simulatesItself: true,
  simulateOnline: (_plan, ctx) => onlineRun(ctx, makeScheduler),
  plan(ctx): Plan {
    return planOnline(ctx, {
      policy: 'neo',
      makeScheduler,
      modeDecisions: (it) => it.stages ? [{
        id: 'balance',
        chosen: `T_l0 ${it.stages.tl0.toFixed(3)} ≥ T_ca1 ${it.stages.tca1.toFixed(3)} ms; T_l1 + T_ga0 ${(it.stages.tl1 + it.stages.tga0).toFixed(3)} ≥ T_ca0 ${it.stages.tca0.toFixed(3)} ms`,
        alternatives: [],
        binding: it.skippedCpu > 0 ? 'cpu-memory-bandwidth' : 'gpu-compute',
        reason: 'NEO §3.2: CPU decodes are added to batch-1, then batch-0, only while the CPU stays hidden behind the GPU',
      }] : [],
    });
  },
};
