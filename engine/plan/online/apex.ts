// apex: per-iteration choice among GPU-only, asymmetric pipelining (NEO) and asynchronous overlap
// (paper 004, APEX; digest 004). Inequality (5)/(6) decides whether pipelining beats GPU-only for
// the decode batch; when it does not, CPU attention runs asynchronously across the whole GPU
// iteration and its result is consumed by the same layer of the next iteration.

import type { Decision } from '../explanation';
import type { Policy } from '../policy';
import type { Plan } from '../types';
import { ApexScheduler } from '../apex/scheduler';
import type { SchedulerLimits } from '../neo/scheduler';
import type { OnlinePredictors } from '../neo/costs';
import { apRatioBound } from '../apex/condition';
import { onlineApplicable } from './neo';
import { onlineRun, planOnline } from './plan-online';

/** One function for the plan and the simulation, so they share one serving run (onlineRun). */
const makeScheduler = (limits: SchedulerLimits, predictors: OnlinePredictors): ApexScheduler => new ApexScheduler(limits, predictors);

export const policy: Policy = {
  name: 'apex',
  title: 'Per-iteration mode choice: GPU-only, asymmetric pipelining, or asynchronous CPU-GPU overlap',
  source: '004 (APEX)',
  applicable: (ctx) => onlineApplicable(ctx, 'APEX'),
  simulatesItself: true,
  simulateOnline: (_plan, ctx) => onlineRun(ctx, makeScheduler),
  plan(ctx): Plan {
    return planOnline(ctx, {
      policy: 'apex',
      makeScheduler,
      modeDecisions: (_it, s): Decision[] => {
        const d = (s as ApexScheduler).lastDecision;
        const r = d.rates;
        if (!r) return [{ id: 'apex-mode', chosen: d.mode, alternatives: [], binding: 'vram-capacity', reason: d.reason }];
        const ratio = r.gpuTokensPerMs / r.cpuTokensPerMs;
        const rhs = apRatioBound(r.linearMs, r.gpuAttnMs);
        return [{
          id: 'apex-mode',
          chosen: `${d.mode}: N_G/N_C = ${ratio.toFixed(2)} vs 2·T_glinear/T_gatt + 3 + T_gatt/T_glinear = ${rhs.toFixed(2)} (Eq. 6)`,
          alternatives: [],
          binding: ratio >= rhs ? 'cpu-memory-bandwidth' : 'gpu-compute',
          reason: d.reason,
        }];
      },
    });
  },
};
