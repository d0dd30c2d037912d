// The HTTP surface on loopback: OpenAI-compatible /v1/completions (streamed as server-sent events
// ending in [DONE]) and /v1/models, llama.cpp-compatible /infill, /health, and Prometheus
// /metrics — a thin layer over the
// runtime's one door (Scheduler.submit). A bearer token is required unless disabled; bodies are
// size-limited; every malformed request gets a 4xx JSON error naming the problem, never a crash.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { timingSafeEqual } from 'node:crypto';
import type { Scheduler, ServeRequest, ServeResult } from '../../runtime/scheduler/scheduler';
import { SchedulerError } from '../../runtime/scheduler/scheduler';
import { NonFiniteLogitsError } from '../../runtime/sampler';
import { parseChatRequest, parseCompletionRequest, parseInfillRequest, RequestError } from './openai';
import type { PromptBuilder } from '../../completion/prompt';
import { parseMessages, type ChatFormatter } from './chat';
import { fitInfill, indentCut, projectFields } from './infill';
import { Metrics } from './metrics';

export interface HttpServerOptions {
  scheduler: Scheduler;
  /** The model's id in /v1/models and responses. */
  modelId: string;
  /** Other names a request's `model` may use (the GGUF file's base name: ids with spaces are awkward in URLs and configs). */
  modelAliases?: string[];
  /** Renders /v1/chat/completions messages with the model's chat template. */
  chat: ChatFormatter;
  /** Access-Control-Allow-Origin for browser clients: '*', or a comma-separated list of origins; undefined: CORS off. */
  corsOrigin?: string;
  /** Required as `Authorization: Bearer <token>`; undefined: no authentication. */
  token: string | undefined;
  /** Largest request body accepted, bytes (default 1 MiB). */
  maxBodyBytes?: number;
  /** The executed split, for /metrics and /health (e.g. "GPU 9/24 layers · KV GPU 9/24"). */
  split: () => string;
  kvBytesInUse: () => number;
  /** FIM prompts of the served model, for /infill. */
  prompts: PromptBuilder;
  /** The loaded context: /infill cuts its inputs to fit it. */
  contextLength: number;
  /** /infill with cache_prompt reuses cached KV at shifted positions (llama-server's --cache-reuse); default off (exact). */
  cacheReuse?: boolean;
}

const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8' };

function send(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) { res.end(); return; }
  res.writeHead(status, JSON_HEADERS);
  res.end(JSON.stringify(body));
}

function sendError(res: ServerResponse, status: number, message: string, type: string): void {
  // The connection closes after an error: the rest of a refused body (or a body that was never
  // going to come, under a lying Content-Length) is not waited for.
  if (!res.headersSent) res.setHeader('connection', 'close');
  send(res, status, { error: { message, type, code: status } });
}

/**
 * A refused body of up to this many bytes is read to its end and dropped before the 413 is sent:
 * a server that answers and closes while the client is still writing makes most clients (Node's
 * fetch, requests) fail with EPIPE instead of reading the 413. Longer bodies, and bodies that stop
 * coming for DRAIN_IDLE_MS, get the 413 at once.
 */
const DRAIN_MAX_BYTES = 64 << 20;
const DRAIN_IDLE_MS = 5_000;

/** The body as UTF-8 text, refusing more than `limit` bytes (413) and invalid UTF-8 (400). */
function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    const chunks: Buffer[] = [];
    let size = 0;
    let refused: RequestError | undefined;  // over the limit: the rest is drained, then this
    let settled = false;
    let idle: NodeJS.Timeout | undefined;
    const settle = (e?: Error, body?: string): void => {
      if (settled) return;
      settled = true;
      if (idle) clearTimeout(idle);
      if (e) reject(e);
      else resolve(body!);
    };
    const drainOrRefuse = (e: RequestError, expected: number): void => {
      refused = e;
      if (expected > DRAIN_MAX_BYTES) { settle(e); req.resume(); return; }
      idle = setTimeout(() => settle(e), DRAIN_IDLE_MS);
    };
    if (Number.isFinite(declared) && declared > limit) {
      drainOrRefuse(new RequestError(413, `request body of ${declared} bytes exceeds the limit of ${limit} bytes`, 'request_too_large'), declared);
      req.resume();
    }
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (refused) {
        if (idle) idle.refresh();
        if (size > DRAIN_MAX_BYTES) settle(refused);
        return;
      }
      if (size > limit) {
        chunks.length = 0;
        drainOrRefuse(new RequestError(413, `request body exceeds the limit of ${limit} bytes`, 'request_too_large'), Number.isFinite(declared) ? declared : size);
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => {
      if (refused) { settle(refused); return; }
      try {
        settle(undefined, new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks)));
      } catch {
        settle(new RequestError(400, 'request body is not valid UTF-8', 'invalid_request_error'));
      }
    });
    // The client went away mid-body: nothing will be answered, but the request must settle.
    req.on('close', () => settle(refused ?? new RequestError(400, 'the request body ended early (the client closed the connection)', 'invalid_request_error')));
    req.on('error', (e) => settle(e));
  });
}

async function readJson(req: IncomingMessage, limit: number): Promise<unknown> {
  const body = await readBody(req, limit);
  try {
    return JSON.parse(body);
  } catch (e) {
    throw new RequestError(400, `request body is not JSON: ${(e as Error).message}`, 'invalid_request_error');
  }
}

/** Hands a request to the scheduler; a refusal becomes 503 (queue full, shutting down) or 400. */
function submit(scheduler: Scheduler, request: ServeRequest): ReturnType<Scheduler['submit']> {
  try {
    return scheduler.submit(request);
  } catch (e) {
    if (e instanceof SchedulerError) throw new RequestError(e.code === 'queue_full' || e.code === 'closed' ? 503 : 400, e.message, e.code);
    throw new RequestError(400, (e as Error).message, 'invalid_request_error');
  }
}

/** `Authorization: Bearer <token>`; the scheme is case-insensitive (RFC 9110 §11.1), the token is not. */
function authorized(req: IncomingMessage, token: string | undefined): boolean {
  if (token === undefined) return true;
  const h = req.headers.authorization;
  const m = typeof h === 'string' ? /^bearer[ \t]+(\S+)[ \t]*$/i.exec(h) : null;
  if (!m) return false;
  const given = Buffer.from(m[1]!);
  const want = Buffer.from(token);
  return given.length === want.length && timingSafeEqual(given, want);
}

/** OpenAI's finish_reason values for why a choice ended. */
export function finishReason(r: ServeResult['stopReason']): 'stop' | 'length' {
  // A completion rule (end of line, scope) and a stop string end the text where it should end;
  // the token limit, the context and the time limit cut it short.
  return r === 'eos' || r === 'stop' || r === 'rule' ? 'stop' : 'length';
}

/** The server stopped (shutdown or model swap) while a stream ran: an error event OpenAI's clients raise, not a made-up finish_reason. */
const SHUTDOWN_EVENT = `data: ${JSON.stringify({ error: { message: 'the server stopped before this completion ended (shutdown or model change); retry', type: 'server_shutdown', code: 503 } })}\n\n`;

/** Requests whose answers count in /metrics' requests_total, by outcome. */
const COUNTED_PATHS = new Set(['/v1/completions', '/v1/chat/completions', '/infill', '/completion', '/completions']);

export function createHttpServer(opts: HttpServerOptions): { server: Server; metrics: Metrics } {
  const limit = opts.maxBodyBytes ?? 1 << 20;
  const metrics = new Metrics();
  const modelIds = [opts.modelId, ...(opts.modelAliases ?? []).filter((a) => a && a !== opts.modelId)];
  const chat = opts.chat;
  let nextId = 1;

  /** Submits `n` copies of `request` (seeds offset per choice so sampled choices differ) and aborts them all when the client goes away. */
  const submitChoices = (req: IncomingMessage, res: ServerResponse, request: ServeRequest, n: number) => {
    const ac = new AbortController();
    // The client went away: its requests leave the batch within one step.
    res.on('close', () => { if (!res.writableFinished) ac.abort(); });
    const streams: ReturnType<Scheduler['submit']>[] = [];
    try {
      for (let i = 0; i < n; i++) {
        streams.push(submit(opts.scheduler, { ...request, ...(request.seed !== undefined ? { seed: (request.seed + i) >>> 0 } : {}), signal: ac.signal }));
      }
    } catch (e) {
      ac.abort();
      throw e;
    }
    return { streams, clientGone: () => ac.signal.aborted };
  };

  /** Streams every choice's pieces as they come, tagged with the choice's index, through `write`. */
  const pumpChoices = async (streams: ReturnType<Scheduler['submit']>[], write: (index: number, piece: string) => void): Promise<ServeResult[]> => {
    await Promise.all(streams.map(async (s, index) => { for await (const piece of s) write(index, piece); }));
    return Promise.all(streams.map((s) => s.result));
  };

  const usageOf = (results: ServeResult[]) => {
    const prompt = results[0]?.promptTokens ?? 0, completion = results.reduce((a, r) => a + r.generatedTokens, 0);
    return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion, prompt_tokens_details: { cached_tokens: results[0]?.reusedTokens ?? 0 } };
  };

  /** A result's log-probabilities in the legacy completions shape (tokens, token_logprobs, top_logprobs, text_offset). */
  const completionLogprobs = (r: ServeResult, startOffset: number) => {
    const lps = r.logprobs ?? [];
    const text = (id: number) => opts.prompts.tokenizer.decode([id]);
    let offset = startOffset;
    const textOffset: number[] = [];
    const tokens = lps.map((t) => { const s = text(t.id); textOffset.push(offset); offset += s.length; return s; });
    return {
      tokens, token_logprobs: lps.map((t) => t.logprob), text_offset: textOffset,
      top_logprobs: lps.map((t) => Object.fromEntries(t.top.map((a) => [text(a.id), a.logprob]))),
    };
  };

  const chatLogprobs = (r: ServeResult) => {
    const text = (id: number) => opts.prompts.tokenizer.decode([id]);
    const bytes = (s: string) => [...Buffer.from(s, 'utf8')];
    return { content: (r.logprobs ?? []).map((t) => ({ token: text(t.id), logprob: t.logprob, bytes: bytes(text(t.id)), top_logprobs: t.top.map((a) => ({ token: text(a.id), logprob: a.logprob, bytes: bytes(text(a.id)) })) })) };
  };

  const startStream = (res: ServerResponse) => {
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
  };

  /** A stream whose requests ended 'cancelled' without the client leaving: the server stopped. */
  const stoppedByServer = (results: ServeResult[], clientGone: boolean) => !clientGone && results.some((r) => r.stopReason === 'cancelled');

  /** A non-streamed answer's results, observed; 503 when the server stopped them (the client did not). */
  const settled = async (streams: ReturnType<Scheduler['submit']>[], clientGone: () => boolean): Promise<ServeResult[]> => {
    const results = await Promise.all(streams.map((s) => s.result));
    if (stoppedByServer(results, clientGone())) throw new RequestError(503, 'the server stopped before this completion ended (shutdown or model change); retry', 'server_shutdown');
    for (const r of results) metrics.observe(r);
    return results;
  };

  const completions = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const parsed = parseCompletionRequest(await readJson(req, limit), modelIds);
    let request = parsed.request;
    if (parsed.suffix !== undefined) {
      // OpenAI's `suffix`: the prompt is the text before the insertion point, the suffix after it.
      if (!opts.prompts.fim) throw new RequestError(400, `'suffix' needs a model with fill-in-the-middle tokens; ${opts.modelId} has none`, 'invalid_request_error');
      const fim = opts.prompts.build(request.prompt as string, parsed.suffix, []);
      request = { ...request, prompt: fim.ids, stopIds: fim.stopIds };
    }
    const { streams, clientGone } = submitChoices(req, res, request, parsed.n);
    const id = `cmpl-${Date.now().toString(36)}-${nextId++}`;
    const created = Math.floor(Date.now() / 1000);
    const echo = parsed.echo ? (request.prompt as string) : '';
    const chunkData = (index: number, text: string, finish: string | null, extra: Record<string, unknown> = {}): Record<string, unknown> =>
      ({ id, object: 'text_completion', created, model: opts.modelId, choices: [{ text, index, logprobs: null, finish_reason: finish, ...extra }] });
    const chunk = (index: number, text: string, finish: string | null) => `data: ${JSON.stringify(chunkData(index, text, finish))}\n\n`;
    if (parsed.stream) {
      startStream(res);
      if (echo) for (let i = 0; i < streams.length; i++) res.write(chunk(i, echo, null));
      const results = await pumpChoices(streams, (index, piece) => res.write(chunk(index, piece, null)));
      if (stoppedByServer(results, clientGone())) { res.end(SHUTDOWN_EVENT); return; }
      // Each choice ends with its finish_reason (and log-probabilities); the last such chunk carries the usage, as before n existed.
      results.forEach((r, index) => {
        const data = chunkData(index, '', finishReason(r.stopReason), parsed.logprobs !== undefined ? { logprobs: completionLogprobs(r, echo.length) } : {});
        if (index === results.length - 1) data.usage = usageOf(results);
        res.write(`data: ${JSON.stringify(data)}\n\n`);
      });
      res.end('data: [DONE]\n\n');
      for (const r of results) metrics.observe(r);
    } else {
      const results = await settled(streams, clientGone);
      send(res, 200, {
        id, object: 'text_completion', created, model: opts.modelId,
        choices: results.map((r, index) => ({ text: echo + r.text, index, logprobs: parsed.logprobs !== undefined ? completionLogprobs(r, echo.length) : null, finish_reason: finishReason(r.stopReason) })),
        usage: usageOf(results),
      });
    }
  };

  const chatCompletions = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const parsed = parseChatRequest(await readJson(req, limit), modelIds);
    const messages = parseMessages(parsed.messages);
    const prompt = chat.render(messages);
    const stopStrings = chat.stopStrings();
    const request: ServeRequest = {
      ...parsed.request, prompt, stopIds: chat.stopIds(),
      ...(stopStrings.length || parsed.request.stop ? { stop: [...(parsed.request.stop ?? []), ...stopStrings] } : {}),
    };
    const { streams, clientGone } = submitChoices(req, res, request, parsed.n);
    const id = `chatcmpl-${Date.now().toString(36)}-${nextId++}`;
    const created = Math.floor(Date.now() / 1000);
    const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
      `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: opts.modelId, system_fingerprint: 'fulcrum', choices, ...extra })}\n\n`;
    if (parsed.stream) {
      startStream(res);
      for (let i = 0; i < streams.length; i++) res.write(chunk([{ index: i, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }]));
      const results = await pumpChoices(streams, (index, piece) => res.write(chunk([{ index, delta: { content: piece }, logprobs: null, finish_reason: null }])));
      if (stoppedByServer(results, clientGone())) { res.end(SHUTDOWN_EVENT); return; }
      res.write(chunk(results.map((r, index) => ({ index, delta: {}, logprobs: parsed.logprobs !== undefined ? chatLogprobs(r) : null, finish_reason: finishReason(r.stopReason) }))));
      if (parsed.includeUsage) res.write(chunk([], { usage: usageOf(results) }));
      res.end('data: [DONE]\n\n');
      for (const r of results) metrics.observe(r);
    } else {
      const results = await settled(streams, clientGone);
      send(res, 200, {
        id, object: 'chat.completion', created, model: opts.modelId, system_fingerprint: 'fulcrum',
        choices: results.map((r, index) => ({ index, message: { role: 'assistant', content: r.text }, logprobs: parsed.logprobs !== undefined ? chatLogprobs(r) : null, finish_reason: finishReason(r.stopReason) })),
        usage: usageOf(results),
      });
    }
  };

  // llama.cpp's /infill as llama.vscode and llama.vim send it (engine/server/http/infill.ts).
  const infill = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const p = parseInfillRequest(await readJson(req, limit), modelIds);
    if (!opts.prompts.fim) {
      throw new RequestError(501, `${opts.modelId} has no fill-in-the-middle tokens in its vocabulary, so /infill cannot build a prompt; use /v1/completions with the text before the cursor`, 'not_implemented');
    }
    const fitted = fitInfill(opts.prompts, p, opts.contextLength);
    const request: ServeRequest = {
      prompt: fitted.prompt.ids, maxTokens: fitted.maxTokens, temperature: p.temperature, stopIds: fitted.prompt.stopIds, onlyStopIds: true, priority: 'foreground',
      ...(p.topK !== undefined ? { topK: p.topK } : {}), ...(p.topP !== undefined ? { topP: p.topP } : {}), ...(p.minP !== undefined ? { minP: p.minP } : {}), ...(p.seed !== undefined ? { seed: p.seed } : {}),
      ...(p.stop ? { stop: p.stop } : {}),
      ...(p.promptTimeLimitMs !== undefined ? { promptTimeLimitMs: p.promptTimeLimitMs } : {}),
      ...(p.generateTimeLimitMs !== undefined ? { generateTimeLimitMs: p.generateTimeLimitMs } : {}),
      ...(p.nIndent > 0 ? { shouldStop: (text: string) => indentCut(text, p.nIndent) !== undefined } : {}),
      ...(opts.cacheReuse && p.cachePrompt ? { reuseShiftedKv: true, farContextEnd: fitted.farContextEnd } : {}),
    };
    const { streams, clientGone } = submitChoices(req, res, request, 1);
    const stream = streams[0]!;
    const cut = (text: string) => { const at = indentCut(text, p.nIndent); return at === undefined ? text : text.slice(0, at); };
    const final = (r: ServeResult, content: string) => {
      const evaluated = r.promptTokens - r.reusedTokens;
      const body: Record<string, unknown> = {
        content, stop: true, model: opts.modelId, tokens_predicted: r.generatedTokens, tokens_evaluated: r.promptTokens, tokens_cached: r.reusedTokens,
        truncated: fitted.truncated, stopped_eos: r.stopReason === 'eos', stopped_limit: r.stopReason === 'length' || r.stopReason === 'context' || r.stopReason === 'time',
        stopped_word: r.stopReason === 'stop', stop_type: r.stopReason === 'eos' ? 'eos' : r.stopReason === 'stop' || r.stopReason === 'rule' ? 'word' : 'limit',
        timings: {
          prompt_n: evaluated, prompt_ms: r.promptMs, prompt_per_token_ms: evaluated ? r.promptMs / evaluated : 0, prompt_per_second: r.promptMs > 0 ? (evaluated * 1000) / r.promptMs : 0,
          predicted_n: r.generatedTokens, predicted_ms: r.generateMs, predicted_per_token_ms: r.generatedTokens ? r.generateMs / r.generatedTokens : 0,
          predicted_per_second: r.generateMs > 0 ? (r.generatedTokens * 1000) / r.generateMs : 0,
        },
      };
      return p.responseFields ? projectFields(body, p.responseFields) : body;
    };
    if (p.stream) {
      startStream(res);
      for await (const piece of stream) res.write(`data: ${JSON.stringify({ content: piece, stop: false })}\n\n`);
      const r = await stream.result;
      if (stoppedByServer([r], clientGone())) { res.end(SHUTDOWN_EVENT); return; }
      res.end(`data: ${JSON.stringify(final(r, ''))}\n\n`);
      metrics.observe(r);
    } else {
      const r = (await settled([stream], clientGone))[0]!;
      send(res, 200, final(r, cut(r.text)));
    }
  };

  /** CORS headers when a CORS origin is configured (off by default: no browser page may call the API). */
  const cors = (req: IncomingMessage, res: ServerResponse): void => {
    if (!opts.corsOrigin) return;
    const origin = req.headers.origin;
    const allow = opts.corsOrigin === '*' ? '*' : typeof origin === 'string' && opts.corsOrigin.split(',').map((o) => o.trim()).includes(origin) ? origin : undefined;
    if (!allow) return;
    res.setHeader('access-control-allow-origin', allow);
    if (allow !== '*') res.setHeader('vary', 'Origin');
  };

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const route = `${req.method} ${url.pathname}`;
    const started = performance.now();
    if (COUNTED_PATHS.has(url.pathname) && req.method === 'POST') {
      // Every answer counts once, by what happened: a client that left before the end is 'cancelled', any 4xx/5xx an 'error'.
      res.once('close', () => {
        const outcome = !res.writableFinished ? 'cancelled' : res.statusCode >= 400 ? 'error' : 'ok';
        metrics.count(outcome, performance.now() - started);
      });
    }
    cors(req, res);
    const handle = async (): Promise<void> => {
      if (req.method === 'OPTIONS') {
        // A CORS preflight carries no credentials (Fetch standard), so it is answered before the token check.
        res.setHeader('allow', 'GET, POST, OPTIONS');
        if (opts.corsOrigin && res.hasHeader('access-control-allow-origin')) {
          res.setHeader('access-control-allow-methods', 'GET, POST, OPTIONS');
          res.setHeader('access-control-allow-headers', 'authorization, content-type');
          res.setHeader('access-control-max-age', '600');
        }
        res.writeHead(204);
        res.end();
        return;
      }
      // Decision: /health answers without a token (liveness probes carry none), like llama.cpp's.
      if (route === 'GET /health') {
        send(res, 200, { status: 'ok', model: opts.modelId, split: opts.split(), running: opts.scheduler.stats.running, queued: opts.scheduler.stats.queued });
        return;
      }
      if (!authorized(req, opts.token)) {
        res.setHeader('www-authenticate', 'Bearer');
        throw new RequestError(401, 'missing or wrong bearer token (Authorization: Bearer <token>; `fulcrum serve --http` prints it at start)', 'authentication_error');
      }
      switch (route) {
        case 'GET /v1/models':
          send(res, 200, { object: 'list', data: modelIds.map((id) => ({ id, object: 'model', created: 0, owned_by: 'fulcrum' })) });
          return;
        case 'GET /metrics':
          res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
          res.end(metrics.render(opts.scheduler.stats, opts.split(), opts.kvBytesInUse(), opts.scheduler.onlineStats));
          return;
        case 'POST /v1/completions':
          await completions(req, res);
          return;
        case 'POST /v1/chat/completions':
          await chatCompletions(req, res);
          return;
        case 'POST /infill':
          await infill(req, res);
          return;
        default:
          if (['/health', '/v1/models', '/metrics', '/v1/completions', '/v1/chat/completions', '/infill'].includes(url.pathname)) {
            throw new RequestError(405, `${req.method} is not allowed on ${url.pathname}`, 'invalid_request_error');
          }
          throw new RequestError(404, `no such endpoint: ${url.pathname} (endpoints: /v1/completions, /v1/chat/completions, /infill, /v1/models, /health, /metrics)`, 'invalid_request_error');
      }
    };
    handle().catch((e: unknown) => {
      if (res.headersSent) { res.end(); return; }
      if (e instanceof RequestError) sendError(res, e.status, e.message, e.type);
      else if (e instanceof NonFiniteLogitsError) sendError(res, 500, e.message, 'model_error');
      else sendError(res, 500, `generation failed: ${(e as Error)?.message ?? String(e)}`, 'server_error');
      req.resume();
      res.once('finish', () => req.socket.destroySoon());
    });
  });
  // Slow or stalled clients cannot hold a connection forever.
  server.headersTimeout = 10_000;
  server.requestTimeout = 60_000;
  server.keepAliveTimeout = 5_000;
  return { server, metrics };
}

/** Names a request may use for the served model: its id and the GGUF file's base name without `.gguf`. */
export function modelAliasesOf(modelPath: string): string[] {
  const base = modelPath.split(/[\\/]/).pop() ?? modelPath;
  return [base.replace(/\.gguf$/i, '')];
}
