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

export function parseCompletionRequest(json: unknown, modelId: string): { request: ServeRequest; stream: boolean } {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw bad('request body must be a JSON object');
  const o = json as Record<string, unknown>;
  if (o.model !== undefined && o.model !== null && typeof o.model !== 'string') throw bad(`'model' must be a string`);
  if (typeof o.model === 'string' && o.model !== '' && o.model !== modelId) {
    throw new RequestError(404, `model '${o.model.slice(0, 200)}' is not served here (GET /v1/models lists '${modelId}')`, 'invalid_request_error');
  }
  let prompt: string;
  if (typeof o.prompt === 'string') prompt = o.prompt;
  else if (Array.isArray(o.prompt) && o.prompt.length === 1 && typeof o.prompt[0] === 'string') prompt = o.prompt[0];
  else if (Array.isArray(o.prompt)) throw bad(`'prompt' must be a string or an array of one string (batched prompts: send one request each)`);
  else throw bad(`'prompt' is required and must be a string`);
  const n = num(o, 'n', 1, 1, true);
  void n;
  const maxTokens = num(o, 'max_tokens', 0, MAX_TOKENS_LIMIT, true) ?? 16;
  const temperature = num(o, 'temperature', 0, 2) ?? 1;
  const topP = num(o, 'top_p', 0, 1);
  const topK = num(o, 'top_k', 0, 1 << 20, true);
  const minP = num(o, 'min_p', 0, 1);
  const seed = num(o, 'seed', 0, 2 ** 32 - 1, true);
  const repeatPenalty = num(o, 'repeat_penalty', 0.01, 100);
  let stop: string[] | undefined;
  if (typeof o.stop === 'string') stop = [o.stop];
  else if (Array.isArray(o.stop)) {
    if (o.stop.length > 16 || !o.stop.every((s) => typeof s === 'string' && s.length <= 256)) throw bad(`'stop' must be a string or up to 16 strings of at most 256 characters`);
    stop = o.stop as string[];
  } else if (o.stop !== undefined && o.stop !== null) throw bad(`'stop' must be a string or an array of strings`);
  if (o.stream !== undefined && o.stream !== null && typeof o.stream !== 'boolean') throw bad(`'stream' must be a boolean`);
  const priority = o.priority === 'background' ? 'background' : 'foreground';
  const request: ServeRequest = {
    prompt, maxTokens, temperature, priority,
    ...(topP !== undefined ? { topP } : {}), ...(topK !== undefined ? { topK } : {}), ...(minP !== undefined ? { minP } : {}),
    ...(seed !== undefined ? { seed } : {}), ...(repeatPenalty !== undefined ? { repeatPenalty } : {}), ...(stop ? { stop } : {}),
  };
  return { request, stream: o.stream === true };
}

export interface InfillRequest {
  prefix: string;
  suffix: string;
  extra: { filename: string; text: string }[];
  maxTokens: number;
  temperature: number;
  stop?: string[];
  stream: boolean;
}

/**
 * llama.cpp's /infill body: input_prefix, input_suffix, input_extra [{filename, text}], n_predict,
 * temperature, stop, stream. Decision: temperature defaults to 0 (greedy), since a completion
 * should be the same for the same code; n_predict -1 or absent means 128.
 */
export function parseInfillRequest(json: unknown): InfillRequest {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw bad('request body must be a JSON object');
  const o = json as Record<string, unknown>;
  const str = (k: string): string => {
    const v = o[k];
    if (v === undefined || v === null) return '';
    if (typeof v !== 'string') throw bad(`'${k}' must be a string`);
    return v;
  };
  const prefix = str('input_prefix'), suffix = str('input_suffix');
  if (prefix === '' && suffix === '') throw bad(`'input_prefix' or 'input_suffix' is required`);
  const extra: { filename: string; text: string }[] = [];
  if (o.input_extra !== undefined && o.input_extra !== null) {
    if (!Array.isArray(o.input_extra) || o.input_extra.length > 64) throw bad(`'input_extra' must be an array of at most 64 {filename, text} chunks`);
    for (const [i, c] of o.input_extra.entries()) {
      if (typeof c !== 'object' || c === null || typeof (c as { text?: unknown }).text !== 'string') throw bad(`'input_extra[${i}]' must be {filename, text} with text a string`);
      const fn = (c as { filename?: unknown }).filename;
      extra.push({ filename: typeof fn === 'string' ? fn : '', text: (c as { text: string }).text });
    }
  }
  const n = num(o, 'n_predict', -1, MAX_TOKENS_LIMIT, true);
  const temperature = num(o, 'temperature', 0, 2) ?? 0;
  let stop: string[] | undefined;
  if (Array.isArray(o.stop)) {
    if (o.stop.length > 16 || !o.stop.every((x) => typeof x === 'string' && x.length <= 256)) throw bad(`'stop' must be up to 16 strings of at most 256 characters`);
    stop = o.stop as string[];
  } else if (o.stop !== undefined && o.stop !== null) throw bad(`'stop' must be an array of strings`);
  if (o.stream !== undefined && o.stream !== null && typeof o.stream !== 'boolean') throw bad(`'stream' must be a boolean`);
  return { prefix, suffix, extra, maxTokens: n === undefined || n < 0 ? 128 : n, temperature, ...(stop ? { stop } : {}), stream: o.stream === true };
}
