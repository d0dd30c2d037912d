// Quality rules for code completions, applied while tokens arrive (to stop early) and to the
// final text:
// - single line when the cursor is mid-line (text after it on the line);
// - stop at a generated line that repeats the document's next line, or the line before it;
// - stay within the indentation scope of the cursor's block (a line indented less than the
//   cursor's line ends the completion, as does a sibling after a blank line);
// - trailing whitespace trimmed from every line and from the end;
// - nothing that only re-types the text after the cursor.

export interface CursorContext {
  /** Text of the cursor's line before the cursor. */
  linePrefix: string;
  /** Text of the cursor's line after the cursor. */
  lineSuffix: string;
  /** The document after the cursor's line (only its first few lines are looked at). */
  after: string;
}

/** The cursor context of a document split at the cursor. */
export function cursorContext(before: string, after: string): CursorContext {
  const lineStart = before.lastIndexOf('\n') + 1;
  const lineEnd = after.indexOf('\n');
  return {
    linePrefix: before.slice(lineStart),
    lineSuffix: lineEnd < 0 ? after : after.slice(0, lineEnd),
    after: lineEnd < 0 ? '' : after.slice(lineEnd + 1, lineEnd + 1 + 4096),
  };
}

export function isMidLine(ctx: CursorContext): boolean {
  return ctx.lineSuffix.trim().length > 0;
}

function indentOf(line: string): number {
  return line.length - line.trimStart().length;
}

function firstNonBlankLine(text: string): string | undefined {
  for (const line of text.split('\n')) if (line.trim().length > 0) return line;
  return undefined;
}

/**
 * The completion `raw` cut by the rules: the number of characters of `raw` to keep (before
 * trimming). Lines are judged only once complete (a newline after them) unless `final`.
 */
function keptLength(raw: string, ctx: CursorContext, final: boolean): number {
  const firstBreak = raw.indexOf('\n');
  if (isMidLine(ctx)) return firstBreak < 0 ? raw.length : firstBreak;
  if (firstBreak < 0) return raw.length;
  const nextDocLine = firstNonBlankLine(ctx.after)?.trim();
  const cursorLine = ctx.linePrefix + raw.slice(0, firstBreak);
  // A block opened on the cursor's line may go deeper; nothing may go shallower than that line.
  const scope = cursorLine.trim().length > 0 ? indentOf(cursorLine) : ctx.linePrefix.length;
  let previous = cursorLine.trim();
  let sawBlank = false;
  let at = firstBreak + 1;
  while (at <= raw.length) {
    const end = raw.indexOf('\n', at);
    if (end < 0 && !final) break; // the last line is still being generated
    const line = raw.slice(at, end < 0 ? raw.length : end);
    const body = line.trim();
    if (body.length === 0) {
      sawBlank = true;
    } else {
      const indent = indentOf(line);
      const cut = at - 1; // before the newline that starts this line
      if (indent < scope) return cut;
      if (sawBlank && indent <= scope && scope === 0) return cut;
      if (nextDocLine !== undefined && body === nextDocLine) return cut;
      if (body === previous) return cut;
      previous = body;
      sawBlank = false;
    }
    if (end < 0) break;
    at = end + 1;
  }
  return raw.length;
}

/** For the runner: true once the text generated so far already ends the completion. */
export function stopRule(ctx: CursorContext): (text: string) => boolean {
  return (text) => keptLength(text, ctx, false) < text.length;
}

/** The completion to show for the model's raw output, or '' when nothing is worth showing. */
export function applyRules(raw: string, ctx: CursorContext): string {
  let text = raw.slice(0, keptLength(raw, ctx, true));
  text = text.split('\n').map((line) => line.trimEnd()).join('\n').trimEnd();
  // The rest of the cursor's line re-typed at the end of a single-line completion: drop it.
  const tail = ctx.lineSuffix.trim();
  if (tail.length > 0 && !text.includes('\n') && text.endsWith(tail)) text = text.slice(0, text.length - tail.length).trimEnd();
  if (text.trim().length === 0) return '';
  // Only re-types what follows the cursor.
  const following = (ctx.lineSuffix + '\n' + ctx.after).trimStart();
  if (following.startsWith(text.trimStart())) return '';
  return text;
}
