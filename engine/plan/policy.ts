// The Policy interface: one module per policy (engine/plan/<name>.ts; the online policies NEO and
// APEX in engine/plan/online/, above the schedulers they drive), registered in
// engine/plan/registry.ts. Every policy turns the same PlanContext into the same Plan.

import type { HardwareProfile } from '../hardware/types';
import type { ModelShape } from '../model/shape';
import type { StepShape, Workload } from '../cost/types';
import type { Plan, PolicyName } from './types';
import type { OnlineSimResult, SimTask } from './sim-types';

/**
 * The cost model as policies see it (engine/cost/model.ts implements it). All times in ms.
 * When the user passes `--costs FILE`, `stage('decode')` returns the measured table instead.
 */
import type { CostModel } from '../cost/model';
export type { CostModel };

export interface PlanContext {
  model: ModelShape;
  hardware: HardwareProfile;
  workload: Workload;
  cost: CostModel;
  /** Step shapes the stages are planned at (see engine/plan/context.ts for the decision). */
  prefillStep: StepShape;
  decodeStep: StepShape;
  /** VRAM the plan may use (workload.vramBytes or the GPU's memory minus reserved), 0 without GPU. */
  vramBytes: number;
  /** Host memory the plan may use. */
  hostBytes: number;
}

export interface Applicability {
  ok: boolean;
  /** Why it applies or not, in words (shown by `auto` and `explain`). */
  reason: string;
}

export interface Policy {
  name: PolicyName;
  /** One line: what the policy does and where it comes from. */
  title: string;
  /** Paper id ('000'…'004') or a practice ('llama.cpp --fit'). */
  source: string;
  applicable(ctx: PlanContext): Applicability;
  plan(ctx: PlanContext): Plan;
  /**
   * Optional: the simulator task graph of one decode step for this plan. Without it the
   * simulator builds a generic graph from the plan's op placement (engine/plan/sim/graph.ts).
   */
  simulate?(plan: Plan, ctx: PlanContext): SimTask[];
  /** Optional: serving simulation for online workloads (ctx.workload.rate set) — NEO, APEX, gpu-only. */
  simulateOnline?(plan: Plan, ctx: PlanContext): OnlineSimResult;
  /**
   * True when the plan's decode figures come from the policy's own iteration simulation (NEO,
   * APEX), which the generic op graph cannot express; see engine/plan/predict.ts.
   */
  simulatesItself?: boolean;
}
