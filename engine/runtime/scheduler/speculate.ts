// Prompt-lookup drafting: code repeats itself (names, argument lists, whole lines), so the
// tokens that followed the last occurrence of the sequence's current n-gram are a good guess of
// what comes next. The guess is only a draft: the runner verifies it in one multi-token step and
// keeps exactly the tokens greedy decoding would have produced.

export interface DraftOptions {
  /** Longest n-gram matched first; shorter ones are tried when it has no earlier occurrence. */
  maxNgram: number;
  minNgram: number;
}

export const DEFAULT_DRAFT: DraftOptions = { maxNgram: 3, minNgram: 2 };

/**
 * Up to `maxDraft` tokens that followed the most recent earlier occurrence of the last n tokens
 * of `history` (n from maxNgram down to minNgram), or [] when none occurs.
 */
export function findDraft(history: readonly number[], maxDraft: number, opts: DraftOptions = DEFAULT_DRAFT): number[] {
  const len = history.length;
  if (maxDraft <= 0) return [];
  for (let n = Math.min(opts.maxNgram, len - 1); n >= opts.minNgram; n--) {
    const keyStart = len - n;
    // Most recent occurrence first: nearby text predicts best.
    for (let i = keyStart - 1; i >= 0; i--) {
      let j = 0;
      while (j < n && history[i + j] === history[keyStart + j]) j++;
      if (j < n) continue;
      const from = i + n;
      const draft = history.slice(from, Math.min(from + maxDraft, len));
      if (draft.length > 0) return draft;
    }
  }
  return [];
}
