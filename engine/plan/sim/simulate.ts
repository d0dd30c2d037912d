// Plays a plan on the simulator: one prefill step and one decode step at the planned context,
// then the offline workload total = prefill + gen × decode step.

import type { Policy, PlanContext } from '../policy';
import type { Plan } from '../types';
import { simulateTasks } from './engine';
import { stageTasks } from './graph';
import type { WorkloadSimResult } from '../sim-types';

export function simulatePlan(plan: Plan, ctx: PlanContext, policy?: Policy): WorkloadSimResult {
  const prefill = simulateTasks(stageTasks(ctx, plan.stages.prefill));
  const decodeTasks = policy?.simulate ? policy.simulate(plan, ctx) : stageTasks(ctx, plan.stages.decode);
  const decode = simulateTasks(decodeTasks);
  const L = Math.max(1, plan.stages.decode.layers.length);
  // Layer time: the span of the decode layers' events (the LM head excluded), per layer.
  let first = Infinity, last = 0;
  for (const e of decode.events) if (e.layer !== undefined) { first = Math.min(first, e.startMs); last = Math.max(last, e.endMs); }
  const layerSpan = last > first ? last - first : decode.totalMs;
  // Serving policies (NEO, APEX) simulate their decode iteration themselves (engine/plan/predict.ts):
  // their step is the time until every request of the batch has one more token.
  const own = policy?.simulatesItself === true;
  const stepMs = own ? plan.predicted.stepMs : decode.totalMs;
  const totalMs = prefill.totalMs + ctx.workload.gen * stepMs;
  return {
    prefillMs: prefill.totalMs,
    decodeStepMs: stepMs,
    layerMs: own ? plan.predicted.layerMs : layerSpan / L,
    totalMs,
    tokensPerSecond: stepMs > 0 ? (ctx.workload.batch * 1000) / stepMs : 0,
    prefill, decode,
  };
}
