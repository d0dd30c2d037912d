// Which part of a document becomes the prompt of an inline completion: the end of the text
// before the cursor that fits the model's context, cut where it stays put while the user types.

/** Candidate windows start this many characters per token back from the cursor at most. */
const MAX_CHARS_PER_TOKEN = 16;

/**
 * The longest end of `before` whose tokens (BOS included, as `countTokens` counts them) fit
 * `budget`. The cut lies on a grid of absolute offsets, moved forward to the next line start
 * when one is near, so consecutive keystrokes get the same start and the engine can reuse its
 * KV cache for the shared prefix; the cut only moves when the text outgrows the budget.
 * Tokenizes at most a few times per call.
 */
export function fitPrefix(before: string, budget: number, countTokens: (text: string) => number): string {
  if (budget <= 1) return '';
  const grid = Math.max(32, Math.ceil(budget / 4));
  const snap = (offset: number): number => {
    const aligned = Math.min(before.length, Math.ceil(Math.max(0, offset) / grid) * grid);
    if (aligned === 0) return 0;
    const newline = before.indexOf('\n', aligned - 1);
    return newline !== -1 && newline < aligned + grid ? newline + 1 : aligned;
  };
  let start = snap(before.length - budget * MAX_CHARS_PER_TOKEN);
  for (let attempt = 0; attempt < 6 && start < before.length; attempt++) {
    const candidate = before.slice(start);
    const tokens = countTokens(candidate);
    if (tokens <= budget) return candidate;
    // Jump by the measured density, aiming a little under the budget so the cut stays put for
    // a while; always move forward.
    const tokensPerChar = tokens / candidate.length;
    const next = snap(before.length - Math.floor((budget * 0.9) / tokensPerChar));
    start = next > start ? next : snap(start + grid);
  }
  // Guaranteed to fit without tokenizing: every token covers at least one UTF-8 byte, plus BOS
  // and SentencePiece's dummy leading space.
  return keepEndWithinBytes(before, budget - 2);
}

/**
 * The end of `text` that fits in `maxBytes` UTF-8 bytes, cut at a character boundary (never
 * inside a surrogate pair).
 */
export function keepEndWithinBytes(text: string, maxBytes: number): string {
  if (maxBytes <= 0) return '';
  // Fast path: a UTF-16 unit is at most 3 UTF-8 bytes, so short strings need no counting.
  if (text.length * 3 <= maxBytes) return text;
  let bytes = 0;
  let start = text.length;
  while (start > 0) {
    const code = text.charCodeAt(start - 1);
    let width: number;
    let units = 1;
    if (code >= 0xdc00 && code <= 0xdfff && start >= 2) {
      const high = text.charCodeAt(start - 2);
      if (high >= 0xd800 && high <= 0xdbff) { width = 4; units = 2; } else { width = 3; }
    } else if (code < 0x80) width = 1;
    else if (code < 0x800) width = 2;
    else width = 3;
    if (bytes + width > maxBytes) break;
    bytes += width;
    start -= units;
  }
  return text.slice(start);
}
