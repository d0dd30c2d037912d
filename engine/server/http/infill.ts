// llama-server's /infill semantics that are not plain parsing: fitting a request into the
// context the way llama-server's format_infill does (never refusing it for size), n_indent's
// stop rule, and response_fields' flattened projection.
import type { PromptBuilder, CompletionPrompt } from '../../completion/prompt';
import type { InfillRequest } from './openai';

export interface FittedInfill {
  prompt: CompletionPrompt;
  /** Whether any input was cut to fit (llama-server's `truncated`). */
  truncated: boolean;
  /** Tokens of other files' context at the prompt's start (BOS included): ServeRequest.farContextEnd. */
  farContextEnd: number;
  /** The generation cap, lowered when the context cannot hold the whole n_predict. */
  maxTokens: number;
}

/**
 * The FIM prompt of an /infill request, cut to fit `contextLength` with room to generate: the text
 * before the cursor loses its start and the text after it its end, 3:1 of what the middle (text
 * typed on the cursor's line) leaves, and the extra-context chunks of other files take only what
 * is left after both (their oldest tokens go first). As llama-server: prefix from the top, suffix
 * from the bottom, extra chunks first; never refused for size.
 */
export function fitInfill(prompts: PromptBuilder, p: InfillRequest, contextLength: number): FittedInfill {
  const fim = prompts.fim!;
  const prefix = prompts.encodePart(p.prefix, fim.prefixSpace);
  const suffix = prompts.encodePart(p.suffix, fim.suffixSpace);
  const extraAll = prompts.encodeExtra(p.extra.map((e) => ({ name: e.filename, text: e.text })));
  let middle = prompts.encodePart(p.middle, false);
  // Room to generate: n_predict, but never more than a quarter of the context.
  const reserve = Math.min(p.maxTokens, Math.floor(contextLength / 4));
  const room = Math.max(0, contextLength - 1 - reserve - prompts.overheadTokens);
  let truncated = false;
  if (middle.length > Math.floor(room / 4)) { middle = middle.slice(middle.length - Math.floor(room / 4)); truncated = true; }
  const core = room - middle.length;
  let suffixTake = Math.min(suffix.length, core - Math.min(prefix.length, Math.ceil((3 * core) / 4)));
  const prefixTake = Math.min(prefix.length, core - suffixTake);
  suffixTake = Math.min(suffix.length, core - prefixTake);
  const extraTake = Math.max(0, Math.min(extraAll.length, core - prefixTake - suffixTake));
  if (prefixTake < prefix.length || suffixTake < suffix.length || extraTake < extraAll.length) truncated = true;
  const extra = extraAll.slice(extraAll.length - extraTake);
  const prompt = prompts.buildTokens(prefix.slice(prefix.length - prefixTake), suffix.slice(0, suffixTake), extra, middle);
  const bos = fim.addBos && prompts.tokenizer.bos !== undefined ? 1 : 0;
  return { prompt, truncated, farContextEnd: extra.length ? bos + extra.length : 0, maxTokens: Math.max(0, Math.min(p.maxTokens, contextLength - prompt.ids.length)) };
}

/**
 * Where n_indent cuts generated text: at the start of the first completed line after the first
 * that is indented less than `nIndent` whitespace characters (a line of whitespace only does not
 * count). Undefined while no such line has been seen.
 */
export function indentCut(text: string, nIndent: number): number | undefined {
  if (nIndent <= 0) return undefined;
  let at = text.indexOf('\n');
  while (at >= 0) {
    const start = at + 1;
    let i = start;
    while (i < text.length && (text[i] === ' ' || text[i] === '\t')) i++;
    if (i < text.length && text[i] !== '\n' && i - start < nIndent) return at;
    at = text.indexOf('\n', start);
  }
  return undefined;
}

/**
 * llama-server's response_fields: each path ("content", "timings/prompt_n") looked up in the
 * response, returned under the path itself as the key (llama.vim reads `timings/prompt_n`).
 * Paths that name nothing (llama.vim's [""] for warm-ups) are left out.
 */
export function projectFields(body: Record<string, unknown>, fields: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const path of fields) {
    let v: unknown = body;
    for (const part of path.split('/')) {
      if (typeof v !== 'object' || v === null || !(part in v)) { v = undefined; break; }
      v = (v as Record<string, unknown>)[part];
    }
    if (v !== undefined && path !== '') out[path] = v;
  }
  return out;
}
