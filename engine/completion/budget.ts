// Which part of a document becomes the prompt of an inline completion: a token budget split
// between the text before the cursor (its end) and the text after it (its start), each cut on
// line boundaries that stay put while the user types, so consecutive keystrokes share a prompt
// prefix and the first completion in a big file costs the budget, not the context.

/** Default prompt budget in tokens (prefix + suffix + FIM tokens). */
export const DEFAULT_PROMPT_BUDGET = 1024;
/** Share of the budget for the text before the cursor (3:1 prefix:suffix). */
export const PREFIX_SHARE = 0.75;

export interface FittedContext {
  prefix: string;
  suffix: string;
}

/**
 * The prefix and suffix for a prompt of at most `budget` tokens, `overhead` of which are the
 * fixed tokens around them (BOS, FIM tokens); `countTokens` counts a part's tokens alone. The
 * suffix gets a quarter of what remains and gives what it leaves unused to the prefix, so a
 * cursor near the end of a file keeps more of the text before it.
 */
export function fitContext(before: string, after: string, budget: number, overhead: number,
  countTokens: (text: string) => number): FittedContext {
  const room = Math.max(0, Math.floor(budget) - overhead);
  const suffix = after.length === 0 ? '' : fitSuffix(after, Math.floor(room * (1 - PREFIX_SHARE)), countTokens);
  const suffixTokens = suffix.length === 0 ? 0 : countTokens(suffix);
  return { prefix: fitPrefix(before, room - suffixTokens, countTokens, 0), suffix };
}

/**
 * The longest start of `after` that fits `budget` tokens, ending at a line end (the text after
 * the cursor does not change while the user types at the cursor, so the cut stays put).
 */
export function fitSuffix(after: string, budget: number, countTokens: (text: string) => number): string {
  if (budget <= 0 || after.length === 0) return '';
  const lineEndBefore = (offset: number): number => {
    if (offset >= after.length) return after.length;
    const newline = after.lastIndexOf('\n', offset - 1);
    return newline > 0 ? newline + 1 : offset;
  };
  let end = lineEndBefore(Math.min(after.length, budget * MAX_CHARS_PER_TOKEN));
  for (let attempt = 0; attempt < 6 && end > 0; attempt++) {
    const candidate = after.slice(0, end);
    const tokens = countTokens(candidate);
    if (tokens <= budget) return candidate;
    const next = lineEndBefore(Math.floor((budget * 0.9) / (tokens / candidate.length)));
    end = next < end ? next : Math.floor(end / 2);
  }
  return keepStartWithinBytes(after, budget - 1);
}

/** Candidate windows start this many characters per token back from the cursor at most. */
const MAX_CHARS_PER_TOKEN = 16;

/**
 * The longest end of `before` whose tokens (BOS included, as `countTokens` counts them) fit
 * `budget`. The cut lies on a grid of absolute offsets, moved forward to the next line start
 * when one is near, so consecutive keystrokes get the same start and the engine can reuse its
 * KV cache for the shared prefix; the cut only moves when the text outgrows the budget.
 * Tokenizes at most a few times per call.
 */
export function fitPrefix(before: string, budget: number, countTokens: (text: string) => number, reserved = 2): string {
  if (budget <= 0 || budget < reserved || before.length === 0) return '';
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
  // Guaranteed to fit without tokenizing: every token covers at least one UTF-8 byte, plus
  // `reserved` (BOS and SentencePiece's dummy leading space when counted with the text).
  return keepEndWithinBytes(before, budget - Math.max(1, reserved));
}

/** The start of `text` that fits in `maxBytes` UTF-8 bytes, cut at a character boundary. */
export function keepStartWithinBytes(text: string, maxBytes: number): string {
  if (maxBytes <= 0) return '';
  if (text.length * 3 <= maxBytes) return text;
  let bytes = 0;
  let end = 0;
  while (end < text.length) {
    const code = text.charCodeAt(end);
    let width: number;
    let units = 1;
    if (code >= 0xd800 && code <= 0xdbff && end + 1 < text.length) {
      const low = text.charCodeAt(end + 1);
      if (low >= 0xdc00 && low <= 0xdfff) { width = 4; units = 2; } else { width = 3; }
    } else if (code < 0x80) width = 1;
    else if (code < 0x800) width = 2;
    else width = 3;
    if (bytes + width > maxBytes) break;
    bytes += width;
    end += units;
  }
  return text.slice(0, end);
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
