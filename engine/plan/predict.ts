// One number per question: the figures a plan reports (predicted.*) are the simulator's, for
// `--policy X`, for `auto` choosing X, for `simulate` and for what-ifs alike.
//
// Decision — which estimate is the truth: the discrete-event simulation of the plan
// (engine/plan/sim/simulate.ts). It plays every policy's placement on the same lanes with the same
// overlap rules, so figures compare across policies; a policy's own closed-form estimate (paper
// 000's L, LIA's Eq. 2, KVPR's Eq. 11) models only its own overlap and is kept beside it as
// details.analytic. Serving policies (NEO, APEX: Policy.simulatesItself) are the exception: the
// op graph cannot express their per-iteration sub-batches, so their iteration executor
// (engine/plan/online/execute.ts) — itself a simulation on the same per-op costs — gives the decode
// figures, and the op-graph simulation only the prefill.

import { simulatePlan } from './sim/simulate';
import type { WorkloadSimResult } from './sim-types';
import type { PlanContext, Policy } from './policy';
import type { Plan, Predicted } from './types';

/** The plan with its predicted figures replaced by the simulation's (the policy's own kept in details.analytic). */
export function withSimulatedPrediction(plan: Plan, ctx: PlanContext, policy: Policy): { plan: Plan; sim: WorkloadSimResult } {
  const sim = simulatePlan(plan, ctx, policy);
  const analytic = plan.predicted;
  const predicted: Predicted = {
    layerMs: sim.layerMs, stepMs: sim.decodeStepMs, tokensPerSecond: sim.tokensPerSecond, prefillMs: sim.prefillMs, totalMs: sim.totalMs,
    perLane: policy.simulatesItself ? analytic.perLane : sim.decode.busy,
    ...(analytic.online ? { online: analytic.online } : {}),
  };
  const out: Plan = { ...plan, predicted, details: { ...(plan.details ?? {}), analytic } };
  return { plan: out, sim };
}

/** Thrown by every policy's plan that does not fit in memory: the same message, with the numbers. */
export class PlanDoesNotFitError extends Error {}

/** Sizes in the unit that shows them (a tiny model's 0.9 MiB is not '0.00 GiB'). */
export function sizeText(b: number): string {
  if (b >= 2 ** 30) return `${(b / 2 ** 30).toFixed(2)} GiB`;
  if (b >= 2 ** 20) return `${(b / 2 ** 20).toFixed(1)} MiB`;
  return `${(b / 2 ** 10).toFixed(1)} KiB`;
}
const gib = sizeText;

/** '' when the plan fits, else what overflows: GPU, host, pinned — each with need and capacity. */
export function overflowOf(plan: Plan, pinnedLimitBytes?: number, gpuBudget?: { budgetBytes: number; reservedBytes: number }): string {
  const m = plan.memory;
  const parts: string[] = [];
  if (m.gpuBytes > m.gpuCapacityBytes + 1) {
    // The capacity is what is left of the budget after the reserve; say both, or '0.0 KiB' reads as a bug.
    const of = gpuBudget && gpuBudget.reservedBytes > 0
      ? ` left of the ${gib(gpuBudget.budgetBytes)} budget after ${gib(gpuBudget.reservedBytes)} reserved for the executor's workspace (activations, logits, converted activations, KV page slack)`
      : '';
    parts.push(`GPU needs ${gib(m.gpuBytes)} of ${gib(m.gpuCapacityBytes)}${of}`);
  }
  if (m.hostBytes + m.pinnedBytes > m.hostCapacityBytes + 1) parts.push(`host needs ${gib(m.hostBytes + m.pinnedBytes)}${m.pinnedBytes > 0 ? ` (pinned ${gib(m.pinnedBytes)})` : ''} of ${gib(m.hostCapacityBytes)}`);
  if (pinnedLimitBytes !== undefined && m.pinnedBytes > pinnedLimitBytes + 1) parts.push(`pinned host memory ${gib(m.pinnedBytes)} exceeds the limit ${gib(pinnedLimitBytes)}`);
  if (!parts.length && !m.fits) parts.push('memory does not fit');
  return parts.join('; ');
}

/** Refuses a plan that does not fit, the same way for every policy. */
export function refuseIfNotFitting(plan: Plan, ctx: PlanContext): void {
  if (plan.memory.fits) return;
  const gpu = ctx.hardware.gpu;
  const budget = gpu ? { budgetBytes: ctx.workload.vramBytes ?? gpu.memoryBytes, reservedBytes: gpu.reservedBytes } : undefined;
  throw new PlanDoesNotFitError(`policy ${plan.chosenPolicy} does not fit in memory: ${overflowOf(plan, ctx.hardware.memory.pinnedLimitBytes, budget)}`);
}
