// The per-iteration decider of the online policies (NEO, APEX and the baselines NEO compares
// against), as its two callers see it: the simulator (engine/plan/online/loop.ts) plays each decision on
// modelled costs, the runtime scheduler (engine/runtime/scheduler) executes it on the native
// model. Both build the decider here, so they run one implementation, never a copy.

import type { OnlinePredictors } from '../neo/costs';
import { NeoScheduler, type IterationMode, type IterationPlan, type OnlineQueues, type SchedulerLimits } from '../neo/scheduler';
import { ApexScheduler } from '../apex/scheduler';

export type { IterationMode, IterationPlan, OnlineQueues, SchedulerLimits };

/** One call per iteration: moves requests between the queues and returns the iteration's plan. */
export interface OnlineDecider {
  readonly limits: { nLayers: number };
  schedule(q: OnlineQueues): IterationPlan;
}

/**
 * 'neo' and 'apex' are the papers' schedulers; 'gpu-only' (SwiftLLM: overflowing KV swapped to
 * the host and back, no CPU attention) and 'offload-all' (FastDecode⁺: every decode attention on
 * the CPU) are NEO's baselines on the same queue management.
 */
export type DeciderKind = 'neo' | 'apex' | 'gpu-only' | 'offload-all';
export const DECIDER_KINDS: readonly DeciderKind[] = ['neo', 'apex', 'gpu-only', 'offload-all'];

export function makeDecider(kind: DeciderKind, limits: SchedulerLimits, predictors: OnlinePredictors): OnlineDecider {
  switch (kind) {
    case 'apex': return new ApexScheduler(limits, predictors);
    case 'neo': case 'gpu-only': case 'offload-all': return new NeoScheduler(kind, limits, predictors);
  }
}
