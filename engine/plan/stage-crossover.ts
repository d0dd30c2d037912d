// From how many rows a step should run under the plan's prefill placement instead of its decode
// placement (issue 21: a plan carries both; the executor picks per step by its rows). The cost
// model prices both stages' decisions — each op on the device the stage gives it, with its
// weights where the stage keeps them — at steps of 1, 2, 4 … `maxRows` rows, and the threshold is
// the fewest rows at which the prefill placement is predicted faster. Undefined when it never is
// within the rows a step can hold.
import type { ModelShape } from '../model/shape';
import type { HardwareProfile } from '../hardware/types';
import type { LayerCostTable, OpTimes, OpWork, Workload } from '../cost/types';
import { makeContext } from './context';
import { opOn, sequentialLayerMs } from './build';
import type { PlanContext } from './policy';
import type { OpPlan, Plan, PlanStage } from './types';

/** The stage's decisions for one op, priced at another step's times. */
function repriced(ctx: PlanContext, op: OpPlan, t: OpTimes): OpPlan {
  if (op.device === 'cpu') return opOn(t, 'cpu', op.weights);
  if (op.device === 'gpu') {
    const o = opOn(t, 'gpu', op.weights);
    // Weights the stage streams from pageable host memory cross the link on every step.
    if (op.weights === 'host' && ctx.hardware.link) {
      const link = ctx.hardware.link;
      const weightH2d = Math.max(0, (t.h2d ?? 0) - (t.h2dKv ?? 0)) * (link.h2dPinnedGBps / Math.max(1e-9, link.h2dPageableGBps));
      if (weightH2d > 0) o.predictedMs.h2d = (o.predictedMs.h2d ?? 0) + weightH2d;
    }
    return o;
  }
  // Split ops: the faster side's time (a split never does worse than its better side).
  const cpu = opOn(t, 'cpu', op.weights), gpu = opOn(t, 'gpu', op.weights);
  return (cpu.predictedMs.cpu ?? 0) <= (gpu.predictedMs.gpu ?? 0) + (gpu.predictedMs.h2d ?? 0) ? cpu : gpu;
}

/** One step shape's op times, shared by both stages' pricing. */
interface StepCosts { table: LayerCostTable; work: OpWork[]; byName: Map<string, OpTimes> }

function stepCosts(ctx: PlanContext, rows: number, context: number): StepCosts {
  const step = { batch: 1, newTokens: rows, context };
  const table = ctx.cost.layerTimes(step, rows > 1 ? 'prefill' : 'decode');
  return { table, work: ctx.cost.layerWork(step), byName: new Map(table.ops.map((t) => [t.name, t])) };
}

/** Predicted time of one step (op times `c`) under `stage`'s decisions. */
export function stageStepMs(ctx: PlanContext, stage: PlanStage, c: StepCosts): number {
  const { table, work, byName } = c;
  let ms = 0;
  for (const layer of stage.layers) {
    const ops = layer.ops.map((o) => { const t = byName.get(o.name); return t ? repriced(ctx, o, t) : o; });
    ms += sequentialLayerMs(ctx, ops, work, table);
  }
  const head = ctx.cost.headTimes(1);
  const h = repriced(ctx, stage.head, head);
  return ms + (h.predictedMs.cpu ?? 0) + (h.predictedMs.gpu ?? 0) + (h.predictedMs.h2d ?? 0);
}

export interface Crossover {
  /** Steps of at least this many rows run the prefill placement. */
  rows: number;
  /** Predicted ms per step under the decode and the prefill placement at `rows`. */
  decodeMs: number;
  prefillMs: number;
}

export function prefillCrossover(model: ModelShape, hardware: HardwareProfile, workload: Workload, plan: Plan, maxRows: number): Crossover | undefined {
  const ctx = makeContext(model, hardware, workload);
  const context = Math.max(0, Math.floor(workload.prompt / 2));
  for (let rows = 1; rows <= maxRows; rows *= 2) {
    const costs = stepCosts(ctx, rows, context);
    const decodeMs = stageStepMs(ctx, plan.stages.decode, costs);
    const prefillMs = stageStepMs(ctx, plan.stages.prefill, costs);
    if (prefillMs < decodeMs) return { rows, decodeMs, prefillMs };
  }
  return undefined;
}
