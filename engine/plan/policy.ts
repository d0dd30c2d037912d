// The Policy interface: one module per policy (engine/plan/<name>.ts), registered in
// engine/plan/registry.ts. Every policy turns the same PlanContext into the same Plan.

import type { HardwareProfile } from '../hardware/types';
import type { ModelShape } from '../model/shape';
import type { LayerCostTable, OpTimes, OpWork, StageCosts, StepShape, Workload } from '../cost/types';
import type { Plan, PolicyName } from './types';
import type { OnlineSimResult, SimTask } from '../sim/types';

/**
 * The cost model as policies see it (engine/cost/model.ts implements it). All times in ms.
 * When the user passes `--costs FILE`, `stage('decode')` returns the measured table instead.
 */
export interface CostModel {
  readonly model: ModelShape;
  readonly hardware: HardwareProfile;
  /** Work (FLOPs, bytes) of every op of one decoder layer for a step shape. */
  layerWork(step: StepShape): OpWork[];
  /** Times of every op of one layer on each lane (modelled, or measured for decode with --costs). */
  layerTimes(step: StepShape, stage: 'prefill' | 'decode'): LayerCostTable;
  /** Work + times + LM head + byte totals for a stage's step. */
  stage(stage: 'prefill' | 'decode', step: StepShape): StageCosts;
  /** Time of one op's work on one device; `contended`: while an h2d transfer runs (paper 000). */
  opMs(work: OpWork, device: 'cpu' | 'gpu', contended?: boolean): number;
  /** Time to move `bytes` over the link. `pinned` false = pageable. */
  transferMs(bytes: number, direction: 'h2d' | 'd2h', pinned?: boolean): number;
  /** LM head (+ final norm) times for `tokens` rows. */
  headTimes(tokens: number): OpTimes;
  /** True when decode costs come from a measured --costs table, not the model. */
  readonly measured: boolean;
  /** The modelled costs' source as plans report it ('model', or with a measured correction). */
  readonly source?: string;
  /** The measured correction applied to the profile's times (engine/cost/feedback.ts), if any. */
  readonly correction?: import('../cost/feedback').CostCorrection;
}

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
   * simulator builds a generic graph from the plan's op placement (engine/sim/graph.ts).
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
