// auto: evaluates every applicable policy for the workload on the simulator and picks the best
// predicted; ties go to the simpler policy; records why (alternatives with their predicted costs
// and the reasons other policies did not apply).
//
// Decisions:
// - Ranking metric: offline workloads — simulated end-to-end time (prefill + gen × decode step);
//   online workloads (rate given) — mean per-token latency at the arrival rate: a policy's own
//   serving model (predicted.online.perTokenLatencyMs: NEO, APEX) where it has one; otherwise
//   static batches of `batch` requests: per-token latency = decode step + prefill / gen when the
//   plan's capacity (batch / step) covers the offered load (rate × gen tokens/s), else unbounded.
// - Tie: within 1 % of the best, the policy earlier in the registry (simpler) wins.
// - The returned plan is the chosen policy's plan with the same predicted figures `--policy X`
//   prints: the simulator's (engine/plan/predict.ts); the policy's analytic ones in details.analytic.
// - No plan that does not fit in memory is chosen; when none fits, auto refuses with the numbers.

import { PlanDoesNotFitError, overflowOf, withSimulatedPrediction } from './predict';
import { kvFormatConflict } from './kv-format';
import type { Alternative } from './explanation';
import type { Policy, PlanContext } from './policy';
import type { Plan } from './types';

export interface Evaluation {
  policy: Policy;
  plan?: Plan;
  applicable: boolean;
  reason: string;
  /** Lower is better: workload ms offline, per-token latency ms online. */
  score: number;
  simulated?: { prefillMs: number; stepMs: number; layerMs: number; totalMs: number; tokensPerSecond: number; perLane: Plan['predicted']['perLane'] };
  error?: string;
}

export function evaluatePolicies(ctx: PlanContext, candidates: Policy[]): Evaluation[] {
  const online = ctx.workload.rate !== undefined;
  return candidates.map((policy) => {
    const a = policy.applicable(ctx);
    if (!a.ok) return { policy, applicable: false, reason: a.reason, score: Infinity };
    try {
      const raw = policy.plan(ctx);
      // Checked on the placement, before simulating a plan that cannot run.
      const conflict = kvFormatConflict(raw, ctx);
      if (conflict) return { policy, applicable: false, reason: conflict, score: Infinity };
      const { plan, sim } = withSimulatedPrediction(raw, ctx, policy);
      const p = plan.predicted;
      const simulated = { prefillMs: sim.prefillMs, stepMs: p.stepMs, layerMs: p.layerMs, totalMs: p.totalMs, tokensPerSecond: p.tokensPerSecond, perLane: p.perLane };
      let score = sim.totalMs;
      if (online) score = onlineLatencyMs(plan, sim.decodeStepMs, sim.prefillMs, sim.tokensPerSecond, ctx);
      if (!plan.memory.fits) score = Infinity;
      return { policy, plan, applicable: true, reason: plan.memory.fits ? a.reason : `${a.reason}; but the plan does not fit in memory`, score, simulated };
    } catch (e) {
      return { policy, applicable: false, reason: `failed: ${(e as Error).message}`, score: Infinity, error: (e as Error).message };
    }
  });
}

/**
 * Best evaluation (lowest score, ties within 1 % to the earlier one). `ignoreFit`: rank plans that
 * do not fit in memory too (used only when none fits, so the user still sees the closest plan).
 */
/** Mean per-token latency (ms) of a plan at the workload's arrival rate (see the Decision above). */
export function onlineLatencyMs(plan: Plan, stepMs: number, prefillMs: number, tokensPerSecond: number, ctx: PlanContext): number {
  if (plan.predicted.online) return plan.predicted.online.perTokenLatencyMs;
  const demand = (ctx.workload.rate ?? 0) * ctx.workload.gen;
  if (tokensPerSecond < demand) return Infinity;
  return stepMs + prefillMs / ctx.workload.gen;
}

export function pickBest(evals: Evaluation[], ignoreFit = false): Evaluation | undefined {
  let best: Evaluation | undefined;
  for (const e0 of evals) {
    const e = ignoreFit && e0.plan && e0.simulated && !e0.plan.memory.fits ? { ...e0, score: rawScore(e0) } : e0;
    if (!e.applicable || !Number.isFinite(e.score)) continue;
    if (!best) { best = e; continue; }
    const tol = Math.abs(best.score) * 0.01;
    if (e.score < best.score - tol) best = e;
  }
  return best;
}

function rawScore(e: Evaluation): number {
  return e.simulated ? e.simulated.totalMs : Infinity;
}

export function makeAutoPolicy(candidates: () => Policy[]): Policy {
  return {
    name: 'auto',
    title: 'Evaluate every applicable policy on the simulator and pick the best predicted',
    source: 'Fulcrum',
    applicable() { return { ok: true, reason: 'always' }; },
    plan(ctx: PlanContext): Plan {
      const evals = evaluatePolicies(ctx, candidates());
      const best = pickBest(evals);
      // A plan that does not fit is refused, by auto as by every policy (engine/plan/predict.ts),
      // with each candidate's numbers.
      if (!best && evals.some((e) => e.plan && !e.plan.memory.fits)) {
        throw new PlanDoesNotFitError(`auto: no policy's plan fits, every one does not fit in memory: ${evals.map((e) => `${e.policy.name}: ${e.plan ? overflowOf(e.plan, ctx.hardware.memory.pinnedLimitBytes) || 'fits' : e.reason}`).join('; ')}`);
      }
      if (!best || !best.plan || !best.simulated) {
        throw new Error(`auto: no policy can run this workload: ${evals.map((e) => `${e.policy.name}: ${e.reason}`).join('; ')}`);
      }
      const online = ctx.workload.rate !== undefined;
      const alternatives: Alternative[] = evals.map((e) => e.simulated
        ? {
          label: e.policy.name,
          predictedMs: online ? e.score : e.simulated.totalMs,
          metric: 'stepMs' as const,
          note: e.policy === best!.policy ? 'chosen' : !e.plan?.memory.fits ? 'does not fit in memory'
            : online ? (Number.isFinite(e.score) ? `per-token latency at ${ctx.workload.rate}/s` : 'cannot keep up with the arrival rate')
              : `${(e.simulated.totalMs / best.simulated!.totalMs).toFixed(2)}× the chosen time (decode ${e.simulated.tokensPerSecond.toFixed(1)} tok/s)`,
        }
        : { label: e.policy.name, predictedMs: Infinity, metric: 'stepMs' as const, note: `not applicable: ${e.reason}` });
      // The chosen policy's plan exactly as `--policy X` reports it (same simulated figures).
      const plan: Plan = structuredClone(best.plan);
      plan.policy = 'auto';
      plan.chosenPolicy = best.policy.name;
      const s = best.simulated;
      const chosen = best;
      const runnerUp = evals.filter((e) => e.policy !== chosen.policy && e.simulated && Number.isFinite(e.score)).sort((a, b) => a.score - b.score)[0];
      plan.explanation = {
        ...plan.explanation,
        summary: `auto chose ${best.policy.name}: ${online ? `${best.score.toFixed(1)} ms per token at ${ctx.workload.rate} requests/s` : `${(s.totalMs / 1000).toFixed(2)} s for the workload, ${s.tokensPerSecond.toFixed(1)} tok/s decode`}${runnerUp ? ` (next: ${runnerUp.policy.name}, ${online ? `${runnerUp.score.toFixed(1)} ms per token` : `${(runnerUp.score / best.score).toFixed(2)}× slower`})` : ''}. ${plan.explanation.summary}`,
        decisions: [{
          id: 'policy', chosen: best.policy.name, alternatives, binding: plan.explanation.binding,
          reason: `lowest ${online ? 'predicted mean per-token latency at the arrival rate (serving model where the policy has one, else static batches that must keep up with rate × gen tokens/s)' : 'simulated end-to-end time (prefill + gen × decode step)'}; ties within 1 % go to the simpler policy`,
        }, ...plan.explanation.decisions],
      };
      plan.details = { ...(plan.details ?? {}), evaluated: evals.map((e) => ({ policy: e.policy.name, applicable: e.applicable, reason: e.reason, ...(e.simulated ? { simulated: e.simulated } : {}) })) };
      return plan;
    },
  };
}
