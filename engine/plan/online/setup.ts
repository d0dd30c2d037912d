// What an online decider plans with, from a planning context's cost model: the costs, the
// simulator's "truth" tabulated from them, the decider's grid-profiled predictors and its limits.
// Computed once per context and shared by NEO and APEX (auto plans both on the same context), by
// the simulator and by the runtime scheduler that executes the decisions.

import type { PlanContext } from '../policy';
import { type OnlineCosts, type OnlinePredictors, profilePredictors } from '../neo/costs';
import { costModelOnlineCosts, tabulatedCosts } from '../neo/from-cost-model';
import type { SchedulerLimits } from '../neo/scheduler';

export interface OnlineSetup { costs: OnlineCosts; truth: OnlineCosts; predictors: OnlinePredictors; limits: SchedulerLimits }

const setups = new WeakMap<PlanContext, OnlineSetup>();

/**
 * Decision: the truth is the cost model tabulated at 4 points per octave; the deciders'
 * predictors are a 2-per-octave grid profile of that truth, as NEO profiles a real machine.
 */
export function onlineSetup(ctx: PlanContext): OnlineSetup {
  const hit = setups.get(ctx);
  if (hit) return hit;
  const costs = costModelOnlineCosts(ctx);
  const truth = tabulatedCosts(costs, 4);
  const s: OnlineSetup = {
    costs, truth,
    predictors: profilePredictors(truth),
    limits: { nLayers: costs.nLayers, gpuKvTokens: costs.gpuKvTokens, cpuKvTokens: costs.cpuKvTokens, maxBatchTokens: costs.maxBatchTokens },
  };
  setups.set(ctx, s);
  return s;
}
