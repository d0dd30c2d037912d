// Messages between the LSP server and the planner worker thread (plan-worker.ts).
import type { PlanParams, SimulateParams } from '../../plan/api';

export type PlannerMethod = 'plan' | 'explain' | 'simulate';

export interface PlannerJob { id: number; method: PlannerMethod; params: PlanParams | SimulateParams }

export type PlannerReply =
  | { id: number; ok: true; result: unknown; ms: number }
  | { id: number; ok: false; message: string };
