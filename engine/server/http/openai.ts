// Validation of OpenAI-style completion requests: every field checked for type and range, with
// an error that names the field.
import type { ServeRequest } from '../../runtime/scheduler/scheduler';

export class RequestError extends Error {
  constructor(readonly status: number, message: string, readonly type: string) {
    super(message);
  }
}

const bad = (msg: string): RequestError => new RequestError(400, msg, 'invalid_request_error');

function num(o: Record<string, unknown>, key: string, min: number, max: number, integer = false): number | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v)) throw bad(`'${key}' must be a number, got ${JSON.stringify(v)?.slice(0, 40)}`);
  if (integer && !Number.isInteger(v)) throw bad(`'${key}' must be an integer, got ${v}`);
  if (v < min || v > max) throw bad(`'${key}' must be in [${min}, ${max}], got ${v}`);
  return v;
}

/** Most tokens one request may ask for. */
export const MAX_TOKENS_LIMIT = 4096;

/** Most choices (`n`) one request may ask for: each is a sequence of its own in the batch. */
export const MAX_CHOICES = 8;

export interface CompletionRequest {
  request: ServeRequest;
  stream: boolean;
  /** Choices to generate from the same prompt. */
  n: number;
  /** Put the prompt before each choice's text. */
  echo: boolean;
  /** Text after the insertion point: the prompt becomes the model's fill-in-the-middle prompt. */
  suffix?: string;
  /** Alternatives per token in `logprobs` (0–5), or undefined for none. */
  logprobs?: number;
  /** Chat only: OpenAI's stream_options.include_usage. */
  includeUsage?: boolean;
}

/** `model` must name what is served (its id or an alias such as the file's base name) when given. */
export function checkModel(o: Record<string, unknown>, modelIds: readonly string[]): void {
  if (o.model !== undefined && o.model !== null && typeof o.model !== 'string') throw bad(`'model' must be a string`);
  if (typeof o.model === 'string' && o.model !== '' && !modelIds.includes(o.model)) {
    throw new RequestError(404, `model '${o.model.slice(0, 200)}' is not served here (GET /v1/models lists ${modelIds.map((m) => `'${m}'`).join(', ')})`, 'invalid_request_error');
  }
}

/** Sampling and stop fields shared by /v1/completions and /v1/chat/completions. */
function samplingOf(o: Record<string, unknown>, maxTokensKeys: string[]): Omit<ServeRequest, 'prompt'> {
  let maxTokens = 16;
  for (const k of maxTokensKeys) { const v = num(o, k, 0, MAX_TOKENS_LIMIT, true); if (v !== undefined) { maxTokens = v; break; } }
  const temperature = num(o, 'temperature', 0, 2) ?? 1;
  const topP = num(o, 'top_p', 0, 1);
  const topK = num(o, 'top_k', 0, 1 << 20, true);
  const minP = num(o, 'min_p', 0, 1);
  const seed = num(o, 'seed', 0, 2 ** 32 - 1, true);
  const repeatPenalty = num(o, 'repeat_penalty', 0.01, 100);
  for (const k of ['presence_penalty', 'frequency_penalty']) {
    const v = num(o, k, -2, 2);
    if (v !== undefined && v !== 0) throw bad(`'${k}' is not supported (only 0); use 'repeat_penalty'`);
  }
  let stop: string[] | undefined;
  if (typeof o.stop === 'string') stop = [o.stop];
  else if (Array.isArray(o.stop)) {
    if (o.stop.length > 16 || !o.stop.every((s) => typeof s === 'string' && s.length <= 256)) throw bad(`'stop' must be a string or up to 16 strings of at most 256 characters`);
    stop = o.stop as string[];
  } else if (o.stop !== undefined && o.stop !== null) throw bad(`'stop' must be a string or an array of strings`);
  if (o.stream !== undefined && o.stream !== null && typeof o.stream !== 'boolean') throw bad(`'stream' must be a boolean`);
  const priority = o.priority === 'background' ? 'background' : 'foreground';
  return {
    maxTokens, temperature, priority,
    ...(topP !== undefined ? { topP } : {}), ...(topK !== undefined ? { topK } : {}), ...(minP !== undefined ? { minP } : {}),
    ...(seed !== undefined ? { seed } : {}), ...(repeatPenalty !== undefined ? { repeatPenalty } : {}), ...(stop ? { stop } : {}),
  };
}

function boolField(o: Record<string, unknown>, key: string): boolean {
  const v = o[key];
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') throw bad(`'${key}' must be a boolean`);
  return v;
}

export function parseCompletionRequest(json: unknown, modelIds: readonly string[]): CompletionRequest {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw bad('request body must be a JSON object');
  const o = json as Record<string, unknown>;
  checkModel(o, modelIds);
  let prompt: string;
  if (typeof o.prompt === 'string') prompt = o.prompt;
  else if (Array.isArray(o.prompt) && o.prompt.length === 1 && typeof o.prompt[0] === 'string') prompt = o.prompt[0];
  else if (Array.isArray(o.prompt)) throw bad(`'prompt' must be a string or an array of one string (batched prompts: send one request each)`);
  else throw bad(`'prompt' is required and must be a string`);
  const n = num(o, 'n', 1, MAX_CHOICES, true) ?? 1;
  const bestOf = num(o, 'best_of', 1, MAX_CHOICES, true);
  if (bestOf !== undefined && bestOf !== n) throw bad(`'best_of' other than 'n' is not supported (it needs ranking by log-probability); got best_of ${bestOf}, n ${n}`);
  const logprobs = num(o, 'logprobs', 0, 5, true);
  if (o.suffix !== undefined && o.suffix !== null && typeof o.suffix !== 'string') throw bad(`'suffix' must be a string`);
  const suffix = typeof o.suffix === 'string' ? o.suffix : undefined;
  const echo = boolField(o, 'echo');
  if (echo && suffix !== undefined) throw bad(`'echo' and 'suffix' cannot be combined (the prompt is not the text before the completion in a fill-in-the-middle request)`);
  const request: ServeRequest = { prompt, ...samplingOf(o, ['max_tokens']), ...(logprobs !== undefined ? { logprobs } : {}) };
  return { request, stream: o.stream === true, n, echo, ...(suffix !== undefined ? { suffix } : {}), ...(logprobs !== undefined ? { logprobs } : {}) };
}

export interface ChatRequest {
  messages: unknown;
  request: Omit<ServeRequest, 'prompt'>;
  stream: boolean;
  n: number;
  /** Top alternatives per token (top_logprobs), when logprobs is true. */
  logprobs?: number;
  includeUsage: boolean;
}

/** /v1/chat/completions: the sampling fields of completions, `messages` checked by chat.ts. */
export function parseChatRequest(json: unknown, modelIds: readonly string[]): ChatRequest {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw bad('request body must be a JSON object');
  const o = json as Record<string, unknown>;
  checkModel(o, modelIds);
  const n = num(o, 'n', 1, MAX_CHOICES, true) ?? 1;
  const wantLogprobs = boolField(o, 'logprobs');
  const top = num(o, 'top_logprobs', 0, 20, true);
  if (top !== undefined && !wantLogprobs) throw bad(`'top_logprobs' needs 'logprobs': true`);
  for (const k of ['tools', 'functions', 'tool_choice', 'function_call']) {
    if (o[k] !== undefined && o[k] !== null && !(Array.isArray(o[k]) && (o[k] as unknown[]).length === 0) && o[k] !== 'none') throw bad(`'${k}' is not supported (no tool calling)`);
  }
  const fmt = o.response_format as { type?: unknown } | undefined;
  if (fmt !== undefined && fmt !== null && fmt.type !== 'text') throw bad(`'response_format' ${JSON.stringify(fmt.type)} is not supported (only "text")`);
  let includeUsage = false;
  if (o.stream_options !== undefined && o.stream_options !== null) {
    if (typeof o.stream_options !== 'object') throw bad(`'stream_options' must be an object`);
    includeUsage = (o.stream_options as { include_usage?: unknown }).include_usage === true;
  }
  const logprobs = wantLogprobs ? top ?? 0 : undefined;
  const request = { ...samplingOf(o, ['max_completion_tokens', 'max_tokens']), ...(logprobs !== undefined ? { logprobs } : {}) };
  // A chat answer is longer than a completion snippet: without a limit it runs to the end of turn (or the context).
  if (o.max_tokens === undefined && o.max_completion_tokens === undefined) request.maxTokens = MAX_TOKENS_LIMIT;
  return { messages: o.messages, request, stream: o.stream === true, n, ...(logprobs !== undefined ? { logprobs } : {}), includeUsage };
}

export interface InfillRequest {
  prefix: string;
  suffix: string;
  extra: { filename: string; text: string }[];
  /** Text already typed on the cursor's line: the start of the middle, after the FIM middle token (llama-server's `prompt`). */
  middle: string;
  maxTokens: number;
  temperature: number;
  topK?: number;
  topP?: number;
  minP?: number;
  seed?: number;
  stop?: string[];
  stream: boolean;
  /** Stop at a generated line indented less than this many whitespace characters (0: off). */
  nIndent: number;
  /** Prompt processing cap, ms: past it the request ends without generating (KV kept). */
  promptTimeLimitMs?: number;
  /** Generation cap, ms, from the end of prompt processing. */
  generateTimeLimitMs?: number;
  /** Reuse cached KV (llama-server's cache_prompt); default true. */
  cachePrompt: boolean;
  /** Paths ("content", "timings/prompt_n") of the response to return, flattened; undefined: all. */
  responseFields?: string[];
}

const SAMPLER_NAMES = new Set(['dry', 'top_k', 'typ_p', 'typical_p', 'top_p', 'min_p', 'xtc', 'temperature', 'infill', 'penalties', 'top_n_sigma']);

/**
 * llama-server's /infill body as llama.vscode and llama.vim send it: input_prefix, input_suffix,
 * input_extra [{filename, text, time}], prompt, n_predict, n_indent, top_k, top_p, min_p,
 * temperature, seed, stop, stream, samplers, cache_prompt, t_max_prompt_ms, t_max_predict_ms,
 * response_fields, id_slot, model. An empty prefix and suffix is a cache warm-up (their ring
 * updates send n_predict 0). Decision: temperature defaults to 0 (greedy), since a completion
 * should be the same for the same code; `samplers` is checked but Fulcrum applies top-k, top-p
 * and min-p in llama.cpp's default order when temperature > 0; id_slot is accepted and ignored
 * (Fulcrum picks the slot holding the longest shared prompt).
 */
export function parseInfillRequest(json: unknown, modelIds: readonly string[] = []): InfillRequest {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw bad('request body must be a JSON object');
  const o = json as Record<string, unknown>;
  if (modelIds.length) checkModel(o, modelIds);
  const str = (k: string): string => {
    const v = o[k];
    if (v === undefined || v === null) return '';
    if (typeof v !== 'string') throw bad(`'${k}' must be a string`);
    return v;
  };
  const prefix = str('input_prefix'), suffix = str('input_suffix'), middle = str('prompt');
  const extra: { filename: string; text: string }[] = [];
  if (o.input_extra !== undefined && o.input_extra !== null) {
    if (!Array.isArray(o.input_extra) || o.input_extra.length > 256) throw bad(`'input_extra' must be an array of at most 256 {filename, text} chunks`);
    for (const [i, c] of o.input_extra.entries()) {
      if (typeof c !== 'object' || c === null || typeof (c as { text?: unknown }).text !== 'string') throw bad(`'input_extra[${i}]' must be {filename, text} with text a string`);
      const fn = (c as { filename?: unknown }).filename;
      if (fn !== undefined && fn !== null && typeof fn !== 'string') throw bad(`'input_extra[${i}].filename' must be a string`);
      extra.push({ filename: typeof fn === 'string' ? fn : '', text: (c as { text: string }).text });
    }
  }
  const n = num(o, 'n_predict', -1, MAX_TOKENS_LIMIT, true);
  const temperature = num(o, 'temperature', 0, 2) ?? 0;
  const topK = num(o, 'top_k', 0, 1 << 20, true);
  const topP = num(o, 'top_p', 0, 1);
  const minP = num(o, 'min_p', 0, 1);
  const seed = num(o, 'seed', 0, 2 ** 32 - 1, true);
  const nIndent = num(o, 'n_indent', 0, 1024, true) ?? 0;
  const tPrompt = num(o, 't_max_prompt_ms', -1, 3_600_000, true);
  const tPredict = num(o, 't_max_predict_ms', -1, 3_600_000, true);
  num(o, 'id_slot', -1, 1 << 20, true);
  let stop: string[] | undefined;
  if (Array.isArray(o.stop)) {
    if (o.stop.length > 16 || !o.stop.every((x) => typeof x === 'string' && x.length <= 256)) throw bad(`'stop' must be up to 16 strings of at most 256 characters`);
    stop = (o.stop as string[]).filter((x) => x.length > 0);
  } else if (o.stop !== undefined && o.stop !== null) throw bad(`'stop' must be an array of strings`);
  if (o.stream !== undefined && o.stream !== null && typeof o.stream !== 'boolean') throw bad(`'stream' must be a boolean`);
  if (o.cache_prompt !== undefined && o.cache_prompt !== null && typeof o.cache_prompt !== 'boolean') throw bad(`'cache_prompt' must be a boolean`);
  if (o.samplers !== undefined && o.samplers !== null) {
    const list = typeof o.samplers === 'string' ? [] : o.samplers;
    if (!Array.isArray(list) || !list.every((x) => typeof x === 'string' && SAMPLER_NAMES.has(x))) {
      throw bad(`'samplers' must be a string of sampler letters or an array of sampler names (${[...SAMPLER_NAMES].join(', ')})`);
    }
  }
  let responseFields: string[] | undefined;
  if (o.response_fields !== undefined && o.response_fields !== null) {
    if (!Array.isArray(o.response_fields) || o.response_fields.length > 64 || !o.response_fields.every((x) => typeof x === 'string' && x.length <= 128)) {
      throw bad(`'response_fields' must be an array of at most 64 field paths such as "content" or "timings/prompt_n"`);
    }
    responseFields = o.response_fields as string[];
  }
  return {
    prefix, suffix, extra, middle, maxTokens: n === undefined || n < 0 ? 128 : n, temperature,
    ...(topK !== undefined ? { topK } : {}), ...(topP !== undefined ? { topP } : {}), ...(minP !== undefined ? { minP } : {}), ...(seed !== undefined ? { seed } : {}),
    ...(stop?.length ? { stop } : {}), stream: o.stream === true, nIndent,
    ...(tPrompt !== undefined && tPrompt > 0 ? { promptTimeLimitMs: tPrompt } : {}),
    ...(tPredict !== undefined && tPredict > 0 ? { generateTimeLimitMs: tPredict } : {}),
    cachePrompt: o.cache_prompt !== false,
    ...(responseFields ? { responseFields } : {}),
  };
}
