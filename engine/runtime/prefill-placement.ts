// The plan's prefill placement for the executor (issue 21 item 1): the placement prompt steps run
// under and from how many rows a step is one — the cost model's crossover between the plan's two
// stages (engine/plan/stage-crossover.ts), within the rows a device step holds.
import type { ModelShape } from '../model/shape';
import type { HardwareProfile } from '../hardware/types';
import type { Workload } from '../cost/types';
import type { PlanParams } from '../plan/api';
import type { Plan } from '../plan/types';
import { prefillCrossover } from '../plan/stage-crossover';
import type { NativePrefillPlacement } from '../native/model';
import { nativeOpTable } from '../native/op-table';
import { splitSummary, type Lowered } from './lowering';

/**
 * The plan's prefill placement with the rows from which a step runs it: the cost model's
 * crossover (engine/plan/stage-crossover.ts) within the rows a device step holds. None when the
 * plan places both stages alike, or when no step that fits is predicted faster under it.
 */
export function prefillPlacement(params: PlanParams, plan: Plan, lowered: Lowered): { prefill?: NativePrefillPlacement; notes: string[] } {
  if (!lowered.prefill) return { notes: [] };
  const { model, hardware, workload } = params as { model: ModelShape; hardware: HardwareProfile; workload: Workload };
  if (typeof model !== 'object' || typeof hardware !== 'object' || typeof workload !== 'object') return { notes: [] };
  const maxRows = nativeOpTable().deviceStepRows;
  const c = prefillCrossover(model, hardware, workload, plan, maxRows);
  if (!c) return { notes: [`the plan places prompt steps otherwise, but no step of up to ${maxRows} rows is predicted faster under that placement: prompt steps run the decode placement`] };
  return {
    prefill: { placement: lowered.prefill, rows: c.rows },
    notes: [`prompt steps of ${c.rows} rows or more run the plan's prefill placement (${splitSummary(lowered.prefill)}; predicted ${c.prefillMs.toFixed(2)} ms per step at ${c.rows} rows against ${c.decodeMs.toFixed(2)} under the decode placement)`],
  };
}
