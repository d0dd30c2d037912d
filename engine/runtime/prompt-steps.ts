// How many prompt rows one forward step takes: the rule the scheduler's foreground prompts and the
// engine's own prefill (generate, logits) share. A prompt runs in steps so a cancellation is seen
// between them; small steps cost prompt speed, because every step streams all the weights once
// (0.5B Q8_0, 941 tokens, 2 threads, one process, three alternating rounds: 64-row steps 745 /
// 809 / 808 tok/s, 128 872 / 851 / 889, 256 900 / 854 / 929, 512 904 / 911 / 920). So the first
// step, before the prompt speed is known, is PROMPT_CHUNK rows, and later ones as many rows as
// fit the time budget at the speed measured, in whole PROMPT_CHUNKs, up to the native batch.

/** Rows of a prompt step before the prompt speed is known (and of prompt steps beside others). */
export const PROMPT_CHUNK = 64;
/** A prompt step alone takes about this long at most once the speed is known: the longest wait for a cancellation. */
export const SOLO_PROMPT_MS = 200;
/** Steps of at least this many prompt rows time the prompt speed (smaller ones cost more a row). */
export const TIMED_PROMPT_ROWS = 32;

/**
 * Rows of the next prompt step that fit `budgetMs` at `rowMs` a row: a multiple of PROMPT_CHUNK
 * (the device step's rows), at least PROMPT_CHUNK, at most `maxRows`.
 */
export function promptRowsFitting(budgetMs: number, rowMs: number, maxRows: number): number {
  const fit = rowMs > 0 ? Math.floor(budgetMs / rowMs / PROMPT_CHUNK) * PROMPT_CHUNK : maxRows;
  return Math.max(Math.min(PROMPT_CHUNK, maxRows), Math.min(maxRows, fit));
}

/** The measured time of a prompt row: a running mean over timed prompt steps. */
export class PromptSpeed {
  /** Milliseconds a prompt row took in the last timed steps, once any was timed. */
  rowMs: number | undefined;

  /** Folds in a prompt-only step of `rows` rows that took `ms` (steps under TIMED_PROMPT_ROWS are ignored). */
  observe(rows: number, ms: number): void {
    if (rows < TIMED_PROMPT_ROWS || !(ms > 0)) return;
    const rowMs = ms / rows;
    this.rowMs = this.rowMs === undefined ? rowMs : 0.5 * this.rowMs + 0.5 * rowMs;
  }

  /** Rows for the next prompt step alone: PROMPT_CHUNK until timed, then what fits `budgetMs`. */
  nextRows(budgetMs: number, maxRows: number): number {
    return this.rowMs === undefined ? Math.min(PROMPT_CHUNK, maxRows) : promptRowsFitting(budgetMs, this.rowMs, maxRows);
  }
}
