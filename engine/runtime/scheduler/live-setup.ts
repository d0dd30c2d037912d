// Builds the live decider for an engine whose plan is NEO's or APEX's: the decider of
// engine/plan/online (the simulator's), from the plan's own cost model (the plan's parameters
// resolved again: same model, hardware, workload, correction), with the limits the executor
// really has.
import { resolve, type PlanParams } from '../../plan/api';
import { DECIDER_KINDS, makeDecider, type DeciderKind, type SchedulerLimits } from '../../plan/online/decider';
import { onlineSetup } from '../../plan/online/setup';
import type { NativeDeviceStats } from '../../native/model';
import { LiveDecider, type IterationRecord, type KvMover } from './online';

export interface LiveDeciderOptions {
  /** The decider to run (default: the plan's policy). 'gpu-only' and 'offload-all' are NEO's baselines on the same placement. */
  kind?: DeciderKind;
  /** Limits to use instead of the cost model's (a smaller device KV budget, to exercise swaps). */
  limits?: Partial<SchedulerLimits>;
  onIteration?: (rec: IterationRecord) => void;
}

/** What the executor has: its device's free memory, the KV page and the layers whose KV is per sequence. */
export interface ExecutorKv {
  device: NativeDeviceStats | null;
  /** Bytes of one token's K and V over the layers placed by sequence. */
  kvBytesPerToken: number;
  pageTokens: number;
  maxSequences: number;
  /** Rows one step carries at most (the scheduler's activation budget). */
  stepRows: number;
}

export function isDeciderKind(x: string): x is DeciderKind {
  return (DECIDER_KINDS as readonly string[]).includes(x);
}

/**
 * Decisions: the device KV budget is the smaller of the cost model's (VRAM − weights − workspace)
 * and what the device has free once the placement is loaded, in whole KV pages less one page per
 * sequence (a sequence's last page is partly empty), so the decider never admits or swaps in more
 * than the device can hold; the activation budget (maxBatchTokens) is the scheduler's rows per step.
 */
export function liveDecider(kv: KvMover, params: PlanParams, policy: string, exec: ExecutorKv, opt: LiveDeciderOptions = {}): LiveDecider {
  const kind = opt.kind ?? policy;
  if (!isDeciderKind(kind)) throw new Error(`no online decider for policy '${kind}' (one of ${DECIDER_KINDS.join(', ')})`);
  const { ctx } = resolve(params);
  const setup = onlineSetup(ctx);
  let gpuKvTokens = setup.limits.gpuKvTokens;
  if (exec.device) {
    const pageBytes = exec.kvBytesPerToken * exec.pageTokens;
    const pages = Math.floor(Math.max(0, exec.device.capacityBytes - exec.device.bytesInUse) / pageBytes) - exec.maxSequences;
    gpuKvTokens = Math.min(gpuKvTokens, Math.max(0, pages) * exec.pageTokens);
  }
  const limits: SchedulerLimits = { ...setup.limits, gpuKvTokens, maxBatchTokens: exec.stepRows, ...opt.limits };
  return new LiveDecider(kind, makeDecider(kind, limits, setup.predictors), kv, limits, opt.onIteration);
}
