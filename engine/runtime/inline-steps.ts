// Where a short step runs: on the JS thread ("inline", the native model's synchronous eval) or on
// a libuv worker thread (evalAsync). The worker costs a hop there and back per step: the worker's
// wake-up, the logits staged on the worker and copied into the caller's array on the JS thread,
// and the JS thread's wake-up. On the 2-vCPU Zen 3 host that measured 3 % of a 0.5B decode token
// (same process, alternating blocks of 12 steps, paired ratios inline/worker: 1.029 at 2 threads,
// 1.035 at 1 thread; the session before 1.031-1.051), and the same on every short step.
//
// An inline step holds the event loop for its whole length, so it is only taken when the last
// short step took at most `budgetMs`, and the loop gets one turn (setImmediate) before each inline
// step: sockets, timers and cancellations are served between steps, never held up by more than
// about one budget. A prompt chunk (more than INLINE_MAX_ROWS rows) always goes to the worker,
// and so does the first short step (nothing measured yet) and every step after one that ran
// over the budget (a larger model, a device, a long context).
import type { NativeModel } from '../native/model';
import { withOverrides } from './model-overrides';

/**
 * The longest a short step may last and still run inline, in ms. Long enough for the small
 * completion models on two threads (0.5B: 11-16 ms a token; 1.3B Q4_0 2 threads: ~30 ms runs on
 * the worker), short enough that a request waiting on the event loop waits at most about this.
 */
export const INLINE_STEP_BUDGET_MS = 25;
/** Steps of more rows than this (prompt chunks) always run on the worker thread. */
export const INLINE_MAX_ROWS = 16;

export interface InlineStepStats {
  /** Evaluations run inline (on the JS thread). */
  inline: number;
  /** Evaluations run on the worker thread. */
  worker: number;
  /** Wall time of the last short evaluation (ms), what decides the next one. */
  lastShortMs: number | undefined;
}

export interface InlineSteps {
  /** The budget in ms (0: every step on the worker). */
  budgetMs: number;
  readonly stats: InlineStepStats;
}

/** Why `budgetMs` is not a budget (a caller checks before it creates the model), or undefined. */
export function inlineBudgetError(budgetMs: number | undefined): string | undefined {
  return budgetMs === undefined || budgetMs >= 0 ? undefined : `inline step budget must be a non-negative number of ms, got ${budgetMs}`;
}

/** One turn of the event loop: I/O callbacks and timers due now run first. */
const turnOfEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * `model` with evalAsync and evalBatchAsync that run short steps inline (see the file comment).
 * Everything else passes through; `inlineSteps` reads and sets the budget and counts the choices.
 */
export function withInlineSteps(model: NativeModel, budgetMs = INLINE_STEP_BUDGET_MS): NativeModel & { inlineSteps: InlineSteps } {
  const bad = inlineBudgetError(budgetMs);
  if (bad) throw new RangeError(bad);
  const stats: InlineStepStats = { inline: 0, worker: 0, lastShortMs: undefined };
  const control: InlineSteps = { budgetMs, stats };
  const inlineFor = (rows: number): boolean => rows <= INLINE_MAX_ROWS && stats.lastShortMs !== undefined && stats.lastShortMs <= control.budgetMs;

  // Times one evaluation; a short one's wall time decides the next short step.
  async function timed<T>(rows: number, inline: boolean, run: () => T | Promise<T>): Promise<T> {
    if (inline) await turnOfEventLoop();
    const t0 = performance.now();
    try {
      return await run();
    } finally {
      if (rows <= INLINE_MAX_ROWS) stats.lastShortMs = performance.now() - t0;
      if (inline) stats.inline++;
      else stats.worker++;
    }
  }

  const evalAsync: NativeModel['evalAsync'] = (tokens, pos, all, out) => {
    const inline = inlineFor(tokens.length);
    return timed(tokens.length, inline, () => (inline ? model.eval(tokens, pos, all, out) : model.evalAsync(tokens, pos, all, out)));
  };
  const evalBatchAsync: NativeModel['evalBatchAsync'] = (inputs, all, outs) => {
    const rows = inputs.reduce((n, i) => n + i.tokens.length, 0);
    const inline = inlineFor(rows);
    return timed(rows, inline, () => (inline ? model.evalBatch(inputs, all, outs) : model.evalBatchAsync(inputs, all, outs)));
  };
  return withOverrides(model, { evalAsync, evalBatchAsync, inlineSteps: control });
}
