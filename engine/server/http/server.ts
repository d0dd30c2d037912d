// The HTTP surface on loopback: OpenAI-compatible /v1/completions (streamed as server-sent events
// ending in [DONE]) and /v1/models, llama.cpp-compatible /infill, /health, and Prometheus
// /metrics — a thin layer over the
// runtime's one door (Scheduler.submit). A bearer token is required unless disabled; bodies are
// size-limited; every malformed request gets a 4xx JSON error naming the problem, never a crash.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { timingSafeEqual } from 'node:crypto';
import type { Scheduler, ServeRequest } from '../../runtime/scheduler/scheduler';
import { SchedulerError } from '../../runtime/scheduler/scheduler';
import { parseCompletionRequest, parseInfillRequest, RequestError } from './openai';
import type { PromptBuilder } from '../../runtime/completion/prompt';
import { Metrics } from './metrics';

export interface HttpServerOptions {
  scheduler: Scheduler;
  /** The model's id in /v1/models and responses. */
  modelId: string;
  /** Required as `Authorization: Bearer <token>`; undefined: no authentication. */
  token: string | undefined;
  /** Largest request body accepted, bytes (default 1 MiB). */
  maxBodyBytes?: number;
  /** The executed split, for /metrics and /health (e.g. "GPU 9/24 layers · KV GPU 9/24"). */
  split: () => string;
  kvBytesInUse: () => number;
  /** FIM prompts of the served model, for /infill. */
  prompts: PromptBuilder;
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

/** The body as UTF-8 text, refusing more than `limit` bytes (413) and invalid UTF-8 (400). */
function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > limit) {
      reject(new RequestError(413, `request body of ${declared} bytes exceeds the limit of ${limit} bytes`, 'request_too_large'));
      req.resume();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    req.on('data', (c: Buffer) => {
      if (failed) return;
      size += c.length;
      if (size > limit) {
        failed = true;
        reject(new RequestError(413, `request body exceeds the limit of ${limit} bytes`, 'request_too_large'));
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => {
      if (failed) return;
      try {
        resolve(new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks)));
      } catch {
        reject(new RequestError(400, 'request body is not valid UTF-8', 'invalid_request_error'));
      }
    });
    req.on('error', (e) => { if (!failed) { failed = true; reject(e); } });
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

function authorized(req: IncomingMessage, token: string | undefined): boolean {
  if (token === undefined) return true;
  const h = req.headers.authorization;
  if (typeof h !== 'string' || !h.startsWith('Bearer ')) return false;
  const given = Buffer.from(h.slice(7));
  const want = Buffer.from(token);
  return given.length === want.length && timingSafeEqual(given, want);
}

export function createHttpServer(opts: HttpServerOptions): { server: Server; metrics: Metrics } {
  const limit = opts.maxBodyBytes ?? 1 << 20;
  const metrics = new Metrics();
  let nextId = 1;

  const completions = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const parsed = parseCompletionRequest(await readJson(req, limit), opts.modelId);
    const ac = new AbortController();
    // The client went away: its request leaves the batch within one step.
    res.on('close', () => { if (!res.writableFinished) ac.abort(); });
    const request: ServeRequest = { ...parsed.request, signal: ac.signal };
    const started = performance.now();
    const stream = submit(opts.scheduler, request);
    metrics.requestStarted();
    const id = `cmpl-${Date.now().toString(36)}-${nextId++}`;
    const created = Math.floor(Date.now() / 1000);
    const finishReason = (r: string): string => (r === 'eos' || r === 'stop' ? 'stop' : r === 'cancelled' ? 'cancelled' : 'length');
    try {
      if (parsed.stream) {
        res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
        for await (const piece of stream) {
          res.write(`data: ${JSON.stringify({ id, object: 'text_completion', created, model: opts.modelId, choices: [{ text: piece, index: 0, logprobs: null, finish_reason: null }] })}\n\n`);
        }
        const r = await stream.result;
        res.write(`data: ${JSON.stringify({ id, object: 'text_completion', created, model: opts.modelId, choices: [{ text: '', index: 0, logprobs: null, finish_reason: finishReason(r.stopReason) }], usage: { prompt_tokens: r.promptTokens, completion_tokens: r.generatedTokens, total_tokens: r.promptTokens + r.generatedTokens } })}\n\n`);
        res.end('data: [DONE]\n\n');
        metrics.requestEnded(r, performance.now() - started, 'ok');
      } else {
        const r = await stream.result;
        send(res, 200, {
          id, object: 'text_completion', created, model: opts.modelId,
          choices: [{ text: r.text, index: 0, logprobs: null, finish_reason: finishReason(r.stopReason) }],
          usage: { prompt_tokens: r.promptTokens, completion_tokens: r.generatedTokens, total_tokens: r.promptTokens + r.generatedTokens },
        });
        metrics.requestEnded(r, performance.now() - started, 'ok');
      }
    } catch (e) {
      metrics.requestEnded(undefined, performance.now() - started, 'error');
      if (res.headersSent) { res.end(); return; }
      throw new RequestError(500, `generation failed: ${(e as Error).message}`, 'server_error');
    }
  };

  // llama.cpp's /infill: input_prefix / input_suffix (/ input_extra) as the model's FIM prompt.
  const infill = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const p = parseInfillRequest(await readJson(req, limit));
    if (!opts.prompts.fim) {
      throw new RequestError(501, `${opts.modelId} has no fill-in-the-middle tokens in its vocabulary, so /infill cannot build a prompt; use /v1/completions with the text before the cursor`, 'not_implemented');
    }
    const extra = opts.prompts.encodeExtra(p.extra.map((e) => ({ name: e.filename, text: e.text })));
    const prompt = opts.prompts.build(p.prefix, p.suffix, extra);
    const ac = new AbortController();
    res.on('close', () => { if (!res.writableFinished) ac.abort(); });
    const stream = submit(opts.scheduler, { prompt: prompt.ids, maxTokens: p.maxTokens, temperature: p.temperature, ...(p.stop ? { stop: p.stop } : {}), stopIds: prompt.stopIds, signal: ac.signal, priority: 'foreground' });
    const started = performance.now();
    metrics.requestStarted();
    const final = (r: Awaited<typeof stream.result>) => ({
      content: '', stop: true, model: opts.modelId, tokens_predicted: r.generatedTokens, tokens_evaluated: r.promptTokens - r.reusedTokens,
      tokens_cached: r.reusedTokens, stopped_eos: r.stopReason === 'eos', stopped_limit: r.stopReason === 'length' || r.stopReason === 'context', stopped_word: r.stopReason === 'stop',
      timings: { prompt_n: r.promptTokens, predicted_n: r.generatedTokens, predicted_ms: r.totalMs - r.firstTokenMs, prompt_ms: r.firstTokenMs },
    });
    try {
      if (p.stream) {
        res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
        for await (const piece of stream) res.write(`data: ${JSON.stringify({ content: piece, stop: false })}\n\n`);
        const r = await stream.result;
        res.end(`data: ${JSON.stringify(final(r))}\n\n`);
        metrics.requestEnded(r, performance.now() - started, 'ok');
      } else {
        const r = await stream.result;
        send(res, 200, { ...final(r), content: r.text });
        metrics.requestEnded(r, performance.now() - started, 'ok');
      }
    } catch (e) {
      metrics.requestEnded(undefined, performance.now() - started, 'error');
      if (res.headersSent) { res.end(); return; }
      throw new RequestError(500, `generation failed: ${(e as Error).message}`, 'server_error');
    }
  };

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const route = `${req.method} ${url.pathname}`;
    const handle = async (): Promise<void> => {
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
          send(res, 200, { object: 'list', data: [{ id: opts.modelId, object: 'model', created: 0, owned_by: 'fulcrum' }] });
          return;
        case 'GET /metrics':
          res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
          res.end(metrics.render(opts.scheduler.stats, opts.split(), opts.kvBytesInUse()));
          return;
        case 'POST /v1/completions':
          await completions(req, res);
          return;
        case 'POST /infill':
          await infill(req, res);
          return;
        default:
          if (['/health', '/v1/models', '/metrics', '/v1/completions', '/infill'].includes(url.pathname)) {
            throw new RequestError(405, `${req.method} is not allowed on ${url.pathname}`, 'invalid_request_error');
          }
          throw new RequestError(404, `no such endpoint: ${url.pathname} (endpoints: /v1/completions, /infill, /v1/models, /health, /metrics)`, 'invalid_request_error');
      }
    };
    handle().catch((e: unknown) => {
      if (e instanceof RequestError) sendError(res, e.status, e.message, e.type);
      else sendError(res, 500, `internal error: ${(e as Error)?.message ?? String(e)}`, 'server_error');
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
