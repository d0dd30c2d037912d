// Re-planning when the workload leaves the plan's assumptions (issue 21): a plan is made for a
// workload (batch, prompt, gen); when a running request grows past the KV the plan's placement
// holds and the device refuses a KV page, the engine plans again for the longer context (same
// policy, hardware and device budget), moves to the new placement and rebuilds the request's KV
// there, instead of dropping to the CPU. The new plan may keep some layers' KV in host memory,
// stream it, or recompute a longer prefix (KVPR follows the context). A device that is lost, or
// a context the budget cannot hold under any plan, still falls back to the CPU.
// A step that carries more sequences than the plan's batch re-plans the same way (for at least
// twice the batch, at most the engine's sequences) before it runs; the running requests rebuild
// their KV under the new placement, as after a refusal.
import type { Workload } from '../cost/types';
import type { PlanParams } from '../plan/api';
import { planRequest } from '../plan/api';
import type { Plan } from '../plan/types';
import type { NativePlacement } from '../native/model';
import { lowerPlan } from './lowering';
import { prefillPlacement } from './prefill-placement';
import type { NativePrefillPlacement } from '../native/model';

/** One re-planning decision, as the log, the trace and the status bar show it. */
export interface ReplanEvent {
  /** What left the plan's assumptions: the context (a refused KV page) or the batch. */
  trigger: 'context' | 'batch';
  /** Why, in words: the device's refusal, or the batch against the plan's. */
  reason: string;
  /**
   * When, in ns of the monotonic clock the native trace's op times use (steady_clock, which is
   * process.hrtime's clock on Linux, macOS and Windows), so the trace can place it among the ops.
   */
  atNs: number;
  /** KV positions held when it happened. */
  atPosition: number;
  /** The split before and after (e.g. 'GPU 5/5 layers · KV GPU' → 'GPU 5/5 layers · KV host · streamed'). */
  fromSplit: string;
  toSplit: string;
  /** The workload the new plan is made for. */
  workload: Workload;
}

/** Whether a device error is a refused allocation (re-plannable) rather than a lost device. */
export function isMemoryRefusal(message: string): boolean {
  return /cannot allocate/i.test(message) && !/device lost/i.test(message);
}

/**
 * The workload for a context that has reached `needed` positions: at least twice the context the
 * old plan assumed (so a growing request re-plans O(log n) times), at least `needed` plus a page,
 * at most the engine's context.
 */
export function grownWorkload(old: Workload, needed: number, contextLength: number): Workload | undefined {
  const oldContext = old.prompt + old.gen;
  const context = Math.min(contextLength, Math.max(2 * oldContext, needed + 64));
  if (context <= oldContext) return undefined;  // nothing larger to plan for
  const gen = Math.min(old.gen, Math.max(1, context - 1));
  return { ...old, prompt: Math.max(1, context - gen), gen };
}

/** Now on the native trace's clock (ns). */
export function monotonicNs(): number {
  return Number(process.hrtime.bigint());
}

/**
 * The workload for a step of `sequences` sequences when the plan assumed fewer: at least twice
 * the planned batch (a growing batch re-plans O(log n) times), at most the engine's sequences;
 * undefined when the plan already covers it.
 */
export function grownBatch(old: Workload, sequences: number, maxSequences: number): Workload | undefined {
  if (sequences <= old.batch) return undefined;
  const batch = Math.min(Math.max(maxSequences, sequences), Math.max(2 * old.batch, sequences));
  return { ...old, batch };
}

/**
 * Thrown into the scheduler's step (before anything ran) after a re-plan for a larger batch moved
 * the placement: every sequence's KV went with it, so the running requests rebuild theirs and go
 * on, exactly as after a device refusal.
 */
export class BatchReplanned extends Error {
  constructor(readonly event: ReplanEvent) {
    super(`re-planned: ${event.reason}`);
    this.name = 'BatchReplanned';
  }
}

export interface Replanned {
  plan: Plan;
  /** null: the new plan keeps everything on the CPU. */
  placement: NativePlacement | null;
  /** The new plan's prefill placement, when it has one that pays (execution.ts prefillPlacement). */
  prefill?: NativePrefillPlacement;
  split: string;
  notes: string[];
  params: PlanParams;
}

/**
 * The plan for the grown workload, lowered. Decision: when the engine's policy has no plan for the
 * longer context (gpu-only when the KV no longer fits beside the weights, split-points and KVPR
 * when their streaming no longer fits), `auto` plans it instead, noted; undefined when neither does.
 */
export function replanFor(params: PlanParams, workload: Workload, nLayers: number): Replanned | undefined {
  const attempt = (policy: string): { plan: Plan; params: PlanParams } | undefined => {
    const next = { ...params, workload, policy };
    try {
      return { plan: planRequest(next), params: next };
    } catch {
      return undefined;
    }
  };
  const own = attempt(params.policy ?? 'auto');
  const made = own ?? (params.policy && params.policy !== 'auto' ? attempt('auto') : undefined);
  if (!made) return undefined;
  const notes = own ? [] : [`policy ${params.policy} has no plan for a context of ${workload.prompt + workload.gen} positions at this budget; re-planned with auto`];
  const lowered = lowerPlan(made.plan, nLayers);
  if (!lowered.usesDevice) return { plan: made.plan, placement: null, split: 'CPU only (re-planned)', notes: [...notes, ...lowered.notes], params: made.params };
  const prefill = prefillPlacement(made.params, made.plan, lowered);
  return { plan: made.plan, placement: lowered.placement, ...(prefill.prefill ? { prefill: prefill.prefill } : {}), split: lowered.splitSummary, notes: [...notes, ...lowered.notes, ...prefill.notes], params: made.params };
}
