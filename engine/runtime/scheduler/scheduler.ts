// Iteration-level scheduling (continuous batching): requests join and leave between steps.
// Every step carries, for each running request, either its next prompt chunk or its last
// sampled token, in one native multi-sequence evaluation (evalBatch): the matmuls are shared,
// each sequence attends over its own KV. The one door is `submit(request)`, a stream of text
// pieces ending in a result; the HTTP server (and any other surface) uses only it.
//
// Decisions where the issue is silent:
// - Slots: one KV sequence per running request (`maxSequences` at load). A request waits in the
//   queue when every slot is busy; the queue has a bound, beyond which submit refuses at once.
// - Priority: 'foreground' (an editor completion) is admitted before any 'background' request,
//   FIFO within a class. A running request is never preempted: it leaves within one step when
//   cancelled.
// - KV reuse: a slot keeps the tokens of its last request; a new request takes the free slot whose
//   tokens share the longest prefix with its prompt and evaluates only the rest.
// - Prompt chunks: at most 64 tokens of one request per step, and at most `stepRows` rows per
//   step in all, so a long prompt does not hold up the other requests' decoding for long.
import type { NativeModel } from '../../native/model';
import type { Tokenizer } from '../../model/tokenizer';
import { Sampler } from '../sampler';
import { StopStringFilter } from '../stop-strings';
import type { SamplingOptions, StopReason } from '../types';

export interface ServeRequest extends SamplingOptions {
  /** Prompt text, or token ids (then addBos/parseSpecial do not apply). */
  prompt: string | number[];
  maxTokens: number;
  stop?: string[];
  /** Wall-clock cap from admission, ms. */
  timeLimitMs?: number;
  priority?: 'foreground' | 'background';
  signal?: AbortSignal;
  addBos?: boolean;
  parseSpecial?: boolean;
  /** Tokens that end the request besides end-of-generation (a FIM family's stop tokens). */
  stopIds?: ReadonlySet<number>;
}

export interface ServeResult {
  text: string;
  stopReason: StopReason | 'time';
  promptTokens: number;
  /** Prompt tokens whose KV was reused from the slot's previous request. */
  reusedTokens: number;
  generatedTokens: number;
  queuedMs: number;
  firstTokenMs: number;
  totalMs: number;
}

export class SchedulerError extends Error {
  constructor(message: string, readonly code: 'prompt_too_long' | 'queue_full' | 'closed' | 'bad_request') {
    super(message);
  }
}

export interface ServeStream extends AsyncIterable<string> {
  /** Settles when the request ends (also when nobody iterates the text). */
  result: Promise<ServeResult>;
}

interface Slot {
  seq: number;
  /** Tokens whose KV the sequence holds, from position 0. */
  tokens: number[];
  running?: Running;
  /** Admitted while a step ran: its KV past the reused prefix is cleared before the next step. */
  clearFrom?: number;
}

interface Running {
  req: ServeRequest;
  prompt: number[];
  /** Next prompt position to evaluate. */
  pos: number;
  reused: number;
  history: number[];
  generated: number;
  sampler: Sampler;
  decoder: ReturnType<Tokenizer['createStreamDecoder']>;
  stops: StopStringFilter;
  text: string;
  pending: number | undefined;  // sampled token not yet evaluated
  queuedAt: number;
  admittedAt: number;
  firstTokenAt: number;
  push: (piece: string) => void;
  finish: (reason: ServeResult['stopReason']) => void;
  fail: (err: Error) => void;
}

export interface SchedulerStats {
  running: number;
  queued: number;
  slots: number;
  requests: number;
  completed: number;
  cancelled: number;
  failed: number;
  promptTokens: number;
  reusedTokens: number;
  generatedTokens: number;
  steps: number;
  /** Rows per step, summed (÷ steps = mean batch rows). */
  stepRows: number;
}

export interface SchedulerOptions {
  /** Most requests waiting for a slot; beyond it submit refuses (default 256). */
  maxQueue?: number;
  /** Most rows (tokens) of all requests in one step (default 64). */
  stepRows?: number;
}

const PROMPT_CHUNK = 64;

export class Scheduler {
  private readonly slots: Slot[];
  private readonly queue: Running[] = [];
  private loop: Promise<void> | undefined;
  private closed = false;
  readonly stats: SchedulerStats;
  private readonly maxQueue: number;
  private readonly stepRows: number;

  constructor(private readonly native: NativeModel, private readonly tokenizer: Tokenizer, private readonly contextLength: number, opts: SchedulerOptions = {}) {
    this.slots = Array.from({ length: native.maxSequences }, (_, seq) => ({ seq, tokens: [] }));
    this.maxQueue = opts.maxQueue ?? 256;
    this.stepRows = Math.max(1, opts.stepRows ?? 64);
    this.stats = { running: 0, queued: 0, slots: this.slots.length, requests: 0, completed: 0, cancelled: 0, failed: 0, promptTokens: 0, reusedTokens: 0, generatedTokens: 0, steps: 0, stepRows: 0 };
  }

  /** Queues a request; its text streams as the scheduler produces it. Throws SchedulerError at once for a request that can never run. */
  submit(req: ServeRequest): ServeStream {
    if (this.closed) throw new SchedulerError('the scheduler is shut down', 'closed');
    if (!Number.isInteger(req.maxTokens) || req.maxTokens < 0) throw new SchedulerError(`maxTokens must be a non-negative integer, got ${req.maxTokens}`, 'bad_request');
    const prompt = typeof req.prompt === 'string'
      ? this.tokenizer.encode(req.prompt, { addBos: req.addBos ?? this.tokenizer.addBos, parseSpecial: req.parseSpecial ?? false })
      : [...req.prompt];
    if (prompt.length === 0) throw new SchedulerError('prompt is empty (no tokens, and no BOS is added)', 'bad_request');
    if (prompt.length >= this.contextLength) {
      throw new SchedulerError(`prompt has ${prompt.length} tokens but the context holds ${this.contextLength} (one position is needed to generate)`, 'prompt_too_long');
    }
    if (this.queue.length >= this.maxQueue) throw new SchedulerError(`${this.queue.length} requests are already waiting (the queue holds ${this.maxQueue}); try again later`, 'queue_full');
    const sampler = new Sampler(req);  // throws on bad sampling options, before anything is queued
    // A small push/pull channel: pieces are buffered until the consumer asks.
    const pieces: string[] = [];
    let wake: (() => void) | undefined;
    let done = false;
    let resolveResult!: (r: ServeResult) => void;
    let rejectResult!: (e: Error) => void;
    const result = new Promise<ServeResult>((res, rej) => { resolveResult = res; rejectResult = rej; });
    result.catch(() => undefined);
    const now = performance.now();
    const r: Running = {
      req, prompt, pos: 0, reused: 0, history: [...prompt], generated: 0, sampler,
      decoder: this.tokenizer.createStreamDecoder(), stops: new StopStringFilter(req.stop ?? []), text: '', pending: undefined,
      queuedAt: now, admittedAt: 0, firstTokenAt: 0,
      push: (piece) => { if (piece) { pieces.push(piece); wake?.(); } },
      finish: (reason) => {
        done = true;
        wake?.();
        const end = performance.now();
        resolveResult({
          text: r.text, stopReason: reason, promptTokens: prompt.length, reusedTokens: r.reused, generatedTokens: r.generated,
          queuedMs: (r.admittedAt || end) - r.queuedAt, firstTokenMs: r.firstTokenAt ? r.firstTokenAt - r.queuedAt : end - r.queuedAt, totalMs: end - r.queuedAt,
        });
      },
      fail: (err) => { done = true; wake?.(); rejectResult(err); },
    };
    this.stats.requests++;
    this.queue.push(r);
    this.sortQueue();
    this.admit();
    this.kick();
    const iterable: ServeStream = {
      result,
      async *[Symbol.asyncIterator]() {
        for (;;) {
          if (pieces.length) { yield pieces.shift()!; continue; }
          if (done) break;
          await new Promise<void>((res) => { wake = res; });
          wake = undefined;
        }
        await result;  // rethrows a failure to the consumer
      },
    };
    return iterable;
  }

  /** Stops admitting; running and queued requests are cancelled. */
  async close(): Promise<void> {
    this.closed = true;
    for (const r of this.queue.splice(0)) { this.stats.cancelled++; r.finish('cancelled'); }
    if (!this.loop) for (const s of this.slots) if (s.running) this.end(s, 'cancelled');
    await this.loop;
  }

  private sortQueue(): void {
    const rank = (r: Running) => (r.req.priority === 'background' ? 1 : 0);
    this.queue.sort((a, b) => rank(a) - rank(b) || a.queuedAt - b.queuedAt);
  }

  private kick(): void {
    if (this.loop) return;
    // A request submitted while the loop was finishing (admitted straight into a slot) restarts it.
    this.loop = this.run().catch((e: unknown) => {
      // Nothing in the loop should throw; if it does, every request learns why and the slots reset.
      const err = e instanceof Error ? e : new Error(String(e));
      for (const s of this.slots) {
        if (!s.running) continue;
        const r = s.running;
        s.running = undefined;
        s.tokens = [];
        s.clearFrom = 0;
        this.stats.failed++;
        r.fail(err);
      }
    }).finally(() => {
      this.loop = undefined;
      if (!this.closed && (this.queue.length || this.slots.some((s) => s.running))) this.kick();
    });
  }

  private admit(): void {
    for (;;) {
      const free = this.slots.filter((s) => !s.running);
      if (!free.length || !this.queue.length) break;
      const r = this.queue.shift()!;
      if (r.req.signal?.aborted) { this.stats.cancelled++; r.finish('cancelled'); continue; }
      // The free slot whose cached tokens share the longest prefix with the prompt.
      let best = free[0]!, bestLen = -1;
      for (const s of free) {
        let n = 0;
        const lim = Math.min(s.tokens.length, r.prompt.length - 1);  // the last prompt token is always evaluated (its logits)
        while (n < lim && s.tokens[n] === r.prompt[n]) n++;
        if (n > bestLen) { best = s; bestLen = n; }
      }
      r.reused = r.pos = Math.max(0, bestLen);
      best.clearFrom = r.pos;  // the native model may be mid-step: cleared before the next one
      best.tokens.length = r.pos;
      best.running = r;
      r.admittedAt = performance.now();
      this.stats.promptTokens += r.prompt.length;
      this.stats.reusedTokens += r.reused;
    }
    this.stats.queued = this.queue.length;
    this.stats.running = this.slots.filter((s) => s.running).length;
  }

  private end(slot: Slot, reason: ServeResult['stopReason']): void {
    const r = slot.running!;
    slot.running = undefined;
    if (reason !== 'stop') {
      const tail = r.stops.push(r.decoder.flush());
      r.text += tail.text;
      r.push(tail.text);
      if (!tail.stopped) { const rest = r.stops.flush(); r.text += rest; r.push(rest); }
    }
    if (reason === 'cancelled') this.stats.cancelled++; else this.stats.completed++;
    r.finish(reason);
  }

  private async run(): Promise<void> {
    for (;;) {
      if (this.closed) {
        for (const s of this.slots) if (s.running) this.end(s, 'cancelled');
        return;
      }
      this.admit();
      const active = this.slots.filter((s) => s.running);
      if (!active.length) return;
      for (const s of this.slots) {
        if (s.clearFrom === undefined) continue;
        this.native.clearKv(s.clearFrom, s.seq);
        s.clearFrom = undefined;
      }
      // Leave first: cancelled and timed-out requests free their slots before the step.
      for (const s of active) {
        const r = s.running!;
        if (r.req.signal?.aborted) this.end(s, 'cancelled');
        else if (r.req.timeLimitMs !== undefined && performance.now() - r.admittedAt > r.req.timeLimitMs) this.end(s, 'time');
      }
      const stepping = this.slots.filter((s) => s.running);
      if (!stepping.length) continue;
      // Decoding requests first (one row each), then prompt chunks in the rows left.
      const inputs: { slot: Slot; tokens: number[]; startPos: number; last: boolean }[] = [];
      let rows = 0;
      for (const s of stepping) {
        const r = s.running!;
        if (r.pending !== undefined) { inputs.push({ slot: s, tokens: [r.pending], startPos: s.tokens.length, last: true }); rows++; }
      }
      for (const s of stepping) {
        const r = s.running!;
        if (r.pending !== undefined || rows >= this.stepRows) continue;
        const take = Math.min(PROMPT_CHUNK, r.prompt.length - r.pos, this.stepRows - rows);
        inputs.push({ slot: s, tokens: r.prompt.slice(r.pos, r.pos + take), startPos: r.pos, last: r.pos + take === r.prompt.length });
        rows += take;
      }
      let logits: Float32Array[];
      try {
        logits = await this.native.evalBatchAsync(inputs.map((i) => ({ seq: i.slot.seq, tokens: Int32Array.from(i.tokens), startPos: i.startPos })));
      } catch (e) {
        // A failed step fails its requests (their KV is in an unknown state), never the loop.
        for (const i of inputs) {
          const r = i.slot.running;
          if (!r) continue;
          i.slot.running = undefined;
          i.slot.tokens = [];
          this.native.clearKv(0, i.slot.seq);
          this.stats.failed++;
          r.fail(e as Error);
        }
        continue;
      }
      this.stats.steps++;
      this.stats.stepRows += rows;
      inputs.forEach((inp, k) => {
        const s = inp.slot;
        const r = s.running;
        if (!r) return;
        s.tokens.push(...inp.tokens);
        if (r.pending === undefined) r.pos += inp.tokens.length;
        else r.pending = undefined;
        if (!inp.last) return;
        // Logits of the request's last token: sample the next one.
        if (r.generated >= r.req.maxTokens) return this.end(s, 'length');
        const id = r.sampler.sample(logits[k]!, r.history);
        if (this.tokenizer.isEog(id) || r.req.stopIds?.has(id)) return this.end(s, 'eos');
        r.generated++;
        this.stats.generatedTokens++;
        if (!r.firstTokenAt) r.firstTokenAt = performance.now();
        r.history.push(id);
        const piece = r.stops.push(r.decoder.push(id));
        r.text += piece.text;
        r.push(piece.text);
        if (piece.stopped) return this.end(s, 'stop');
        if (r.generated >= r.req.maxTokens || s.tokens.length + 1 >= this.contextLength) return this.end(s, 'length');
        r.pending = id;
      });
      this.stats.running = this.slots.filter((x) => x.running).length;
    }
  }
}
