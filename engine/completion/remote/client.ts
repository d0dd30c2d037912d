// Completions on a remote server (issue 27 item 3, the client part): llama-server's /infill,
// an OpenAI-compatible /v1/completions, or another Fulcrum (which serves both). The engine, not
// the thin extension, talks to the endpoint, with the caller's cancellation and a time limit.
//
// Decision: kind 'auto' tries /infill first (FIM with the suffix, what llama-server and Fulcrum
// serve) and falls back to /v1/completions when the server answers 404/405; the result is
// remembered per client so later requests go straight to the working path.

export type RemoteKind = 'auto' | 'infill' | 'openai';

export interface RemoteEndpointConfig {
  /** Base URL, e.g. http://gpu-box:8080 (a trailing /v1 or / is accepted). */
  url: string;
  kind?: RemoteKind;
  /** Bearer token (Fulcrum's --token, llama-server's --api-key, an OpenAI key). */
  token?: string;
  /** Per-request limit, ms (default 5000). */
  timeoutMs?: number;
}

export interface RemoteCompletionRequest {
  prefix: string;
  suffix: string;
  maxTokens: number;
  signal?: AbortSignal;
}

export interface RemoteCompletion {
  text: string;
  /** Which API answered. */
  kind: 'infill' | 'openai';
  ms: number;
  /** llama-server's timings, when the server sends them (llama-server and Fulcrum's /infill do). */
  timings?: { promptTokens: number; promptMs: number; generatedTokens: number; generateMs: number };
}

function timingsOf(r: unknown): RemoteCompletion['timings'] {
  const t = (r as { timings?: Record<string, unknown> }).timings;
  if (!t || typeof t !== 'object') return undefined;
  const n = (k: string): number | undefined => (typeof t[k] === 'number' && Number.isFinite(t[k]) ? t[k] as number : undefined);
  const [pn, pm, gn, gm] = [n('prompt_n'), n('prompt_ms'), n('predicted_n'), n('predicted_ms')];
  return pn !== undefined && pm !== undefined && gn !== undefined && gm !== undefined ? { promptTokens: pn, promptMs: pm, generatedTokens: gn, generateMs: gm } : undefined;
}

export class RemoteEndpointError extends Error {
  constructor(message: string, readonly status?: number) { super(message); }
}

function baseOf(url: string): URL {
  let u: URL;
  try { u = new URL(url); } catch { throw new RemoteEndpointError(`fulcrum.completions.endpoint '${url}': not a URL`); }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new RemoteEndpointError(`fulcrum.completions.endpoint '${url}': only http and https are supported`);
  u.pathname = u.pathname.replace(/\/+$/, '').replace(/\/v1$/, '');
  return u;
}

export class RemoteCompletionClient {
  private readonly base: URL;
  private resolved: 'infill' | 'openai' | undefined;
  constructor(private readonly config: RemoteEndpointConfig) {
    this.base = baseOf(config.url);
    if (config.kind && config.kind !== 'auto') this.resolved = config.kind;
  }

  /** Where completions run, for the status bar and log. */
  describe(): string { return `${this.base.host}${this.resolved ? ` (${this.resolved === 'infill' ? '/infill' : '/v1/completions'})` : ''}`; }

  async complete(req: RemoteCompletionRequest): Promise<RemoteCompletion> {
    const t0 = performance.now();
    if (this.resolved !== 'openai') {
      const r = await this.post('/infill', { input_prefix: req.prefix, input_suffix: req.suffix, n_predict: req.maxTokens, temperature: 0, cache_prompt: true }, req.signal, this.resolved === undefined);
      if (r !== undefined) {
        this.resolved = 'infill';
        const content = (r as { content?: unknown }).content;
        if (typeof content !== 'string') throw new RemoteEndpointError(`${this.base.host}/infill: the answer has no 'content' string`);
        const timings = timingsOf(r);
        return { text: content, kind: 'infill', ms: performance.now() - t0, ...(timings ? { timings } : {}) };
      }
    }
    const r = await this.post('/v1/completions', { prompt: req.prefix, suffix: req.suffix, max_tokens: req.maxTokens, temperature: 0 }, req.signal, false);
    this.resolved = 'openai';
    const text = (r as { choices?: { text?: unknown }[] }).choices?.[0]?.text;
    if (typeof text !== 'string') throw new RemoteEndpointError(`${this.base.host}/v1/completions: the answer has no choices[0].text string`);
    return { text, kind: 'openai', ms: performance.now() - t0 };
  }

  /** POSTs JSON; undefined when `missingOk` and the path does not exist (404/405). */
  private async post(path: string, body: unknown, signal: AbortSignal | undefined, missingOk: boolean): Promise<unknown> {
    const timeoutMs = this.config.timeoutMs ?? 5000;
    const timeout = AbortSignal.timeout(timeoutMs);
    const any = signal ? AbortSignal.any([signal, timeout]) : timeout;
    const url = new URL(path, this.base);
    let res: Response;
    try {
      res = await fetch(url, {
        method: 'POST', signal: any, body: JSON.stringify(body),
        headers: { 'content-type': 'application/json', ...(this.config.token ? { authorization: `Bearer ${this.config.token}` } : {}) },
      });
    } catch (e) {
      if (signal?.aborted) throw signal.reason instanceof Error ? signal.reason : new DOMException('cancelled', 'AbortError');
      if (timeout.aborted) throw new RemoteEndpointError(`${url.host}${path}: no answer within ${timeoutMs} ms`);
      throw new RemoteEndpointError(`${url.host}${path}: ${(e as Error).cause instanceof Error ? ((e as Error).cause as Error).message : (e as Error).message}`);
    }
    if (missingOk && (res.status === 404 || res.status === 405)) { await res.body?.cancel(); return undefined; }
    const text = await res.text();
    if (!res.ok) throw new RemoteEndpointError(`${url.host}${path}: HTTP ${res.status}${res.status === 401 ? ' (check fulcrum.completions.token)' : ''}: ${text.slice(0, 200)}`, res.status);
    try { return JSON.parse(text); } catch { throw new RemoteEndpointError(`${url.host}${path}: the answer is not JSON: ${text.slice(0, 100)}`); }
  }
}
