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
//   step in all, so a long prompt does not hold up the other requests' decoding for long. A
//   foreground prompt alone (no other request running, no per-iteration plan) takes bigger
//   steps, as many rows as the measured prompt speed fits in `soloPromptMs` (a multiple of 64, up
//   to the native batch; the rule is runtime/prompt-steps.ts, which the engine's own prefill
//   shares): a step re-reads every weight, and on CPU 64-row steps prefilled 10-16 % slower than
//   256-512 (0.5B Q8_0, 2 threads, 960 tokens: 1121-1174 against 1266-1320 tok/s on an AMD EPYC
//   Zen 5). A request arriving meanwhile waits at most that step, and a keystroke's next
//   completion reuses what the step evaluated.
// - Slot choice: among free slots, the longest shared prefix wins, then the least recently used
//   (never-used first), so each recently edited document keeps its KV while others come and go.
// - Speculation (greedy requests only): a decoding request's row may carry prompt-lookup drafts
//   after its pending token; the step then returns every row's logits, and the drafts that equal
//   the greedy choice stand (a step's rows are bit for bit what single-token steps give, so the
//   output is exactly plain greedy). The KV of rejected drafts is cleared before the next step.
// - NEO / APEX plans (KV placed by sequence): before every step the plan's online decider
//   (engine/plan/online, the simulator's) decides which running requests step, where each one's KV
//   lives (hence whether its attention runs on the CPU or the device), which KV moves, and which
//   prompts are admitted; scheduler/online.ts executes it. Slots and prompt chunks stay as above.
// - A device that fails mid-step (DeviceError): the engine moves the model to the CPU
//   (onDeviceError) and every running request rebuilds its KV there from the tokens it held,
//   then goes on; nothing it already streamed changes.
import type { NativeModel } from '../../native/model';
import { findDraft, DEFAULT_DRAFT } from './speculate';
import type { Tokenizer } from '../../model/tokenizer';
import { Sampler, topKIds } from '../sampler';
import { StopStringFilter } from '../stop-strings';
import type { SamplingOptions, StopReason } from '../types';
import { type LayerRange, type LiveDecider, type LiveStats, countIteration, emptyLiveStats } from './online';
import { PREFILL_BATCH } from '../native-config';
import { PROMPT_CHUNK, PromptSpeed, promptRowsFitting, SOLO_PROMPT_MS } from '../prompt-steps';

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
  /** Only stopIds end the request (the tokenizer's end-of-generation tokens do not). */
  onlyStopIds?: boolean;
  /**
   * Decoding cap, ms from the end of prompt processing (llama.vscode's t_max_predict_ms); at
   * least one token is always generated.
   */
  generateTimeLimitMs?: number;
  /**
   * Prompt processing cap, ms from admission (llama-server's t_max_prompt_ms): past it a request
   * that would generate ends ('time') without generating; the KV of the prompt part evaluated
   * stays in the slot for the next request. Requests of 0 tokens (cache warm-ups) run to the end.
   */
  promptTimeLimitMs?: number;
  /** Called with the text so far after each token; true ends the request ('rule'). */
  shouldStop?: (text: string) => boolean;
  /** Prompt-lookup drafts of up to this many tokens verified per step (greedy requests only). */
  speculate?: number;
  /** Record each generated token's log-probability and the `logprobs` most likely alternatives (0–20). */
  logprobs?: number;
  /**
   * Reuse the slot's KV of the prompt's unchanged tail (a FIM suffix) at shifted positions, keys
   * re-rotated, instead of evaluating it again (llama-server's --cache-reuse). Not exact: the
   * tail's KV was computed after the previous prompt's text, so logits differ slightly from a
   * fresh evaluation (bounded by MAX_STALE_TOKENS; measured in test/unit/kv-shift.test.ts).
   * Default false: every prompt token is evaluated (exact).
   */
  reuseShiftedKv?: boolean;
  /**
   * Prompt tokens before this index are context of other files (extra-context chunks): new ones
   * there do not count toward the reused tail's staleness, so a new chunk does not cost the
   * cursor's prompt its cache (its KV is refreshed with the keystroke bound instead).
   */
  farContextEnd?: number;
}

/** A generated token's log-probability under the model (before sampling adjustments) and its top alternatives. */
export interface TokenLogprob {
  id: number;
  logprob: number;
  top: { id: number; logprob: number }[];
}

export interface ServeResult {
  text: string;
  stopReason: StopReason | 'time' | 'rule';
  /** The generated token ids (stop tokens excluded). */
  tokens: number[];
  promptTokens: number;
  /** Prompt tokens whose KV was reused from the slot's previous request. */
  reusedTokens: number;
  generatedTokens: number;
  queuedMs: number;
  firstTokenMs: number;
  totalMs: number;
  /** From admission to the end of the prompt, and from there to the end. */
  promptMs: number;
  generateMs: number;
  /** Steps that decoded for this request, drafts verified and drafts that stood. */
  decodeSteps: number;
  draftedTokens: number;
  acceptedDraftTokens: number;
  /** With `logprobs` in the request: one entry per generated token. */
  logprobs?: TokenLogprob[];
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
  /** Admission counter value when the slot was last taken (0: never). */
  lastUsed: number;
  running?: Running;
  /** Admitted while a step ran: its KV past the reused prefix is cleared before the next step. */
  clearFrom?: number;
  /** Length of the prompt of the request whose KV `tokens` holds (its generated tokens follow). */
  promptLength?: number;
  /** A move of cached KV positions to apply before the next step (shifted reuse), then no clear. */
  shifts?: { from: number; to: number; delta: number }[];
  /**
   * New prompt tokens evaluated before the reused tail since the tail's KV was last computed
   * fresh: what the tail has not seen. Past MAX_STALE_TOKENS the tail is evaluated again.
   */
  staleTokens: number;
  /** The array this slot's logits are written into, step after step (NativeModel.evalBatchAsync's `outs`). */
  logits?: Float32Array;
}

interface Running {
  req: ServeRequest;
  prompt: number[];
  /** Next prompt position to evaluate. */
  pos: number;
  /** Prompt positions [from, to) whose KV is already in place (shifted reuse): evaluation jumps over them. */
  skips: { from: number; to: number }[];
  /** The prompt tokens shared with the slot at admission (where a refused shift goes back to). */
  sharedAtAdmission: number;
  reused: number;
  history: number[];
  generated: number;
  sampler: Sampler;
  decoder: ReturnType<Tokenizer['createStreamDecoder']>;
  stops: StopStringFilter;
  text: string;
  pending: number | undefined;  // sampled token not yet evaluated
  /** Generated ids (stop tokens excluded). */
  out: number[];
  /** Log-probabilities of `out`, when the request asks for them. */
  logprobs?: TokenLogprob[];
  steps: number;
  drafted: number;
  accepted: number;
  queuedAt: number;
  admittedAt: number;
  firstTokenAt: number;
  promptDoneAt: number;
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
  /**
   * How long a step of a foreground prompt alone may take (default 200 ms): its rows are sized by
   * the measured prompt speed, from `stepRows` up to the native batch (512). 0 keeps such a
   * prompt to the steps of a shared one.
   */
  soloPromptMs?: number;
  /**
   * A step threw: returns true when the error was a device failure and the model now runs on
   * the CPU (every sequence's KV gone), so requests rebuild theirs and go on.
   */
  onStepError?: (e: unknown) => boolean;
}

/**
 * A step that verifies drafts returns every row's logits (the native step has one switch for all
 * its rows), so the LM head runs on every prompt row too: prompt chunks beside drafts are capped
 * at this many rows (the head on 64 rows of a 152k vocabulary is ~9 GFLOP wasted).
 */
const PROMPT_ROWS_BESIDE_DRAFTS = 8;

export class Scheduler {
  private readonly slots: Slot[];
  private readonly queue: Running[] = [];
  private loop: Promise<void> | undefined;
  private closed = false;
  readonly stats: SchedulerStats;
  private readonly maxQueue: number;
  private readonly stepRows: number;
  private readonly soloPromptMs: number;
  /** The prompt speed of the last prompt-only steps, once timed (sizes a foreground prompt's steps). */
  private readonly promptSpeed = new PromptSpeed();
  private readonly onStepError: ((e: unknown) => boolean) | undefined;
  private admissions = 0;
  /** NEO/APEX deciding per iteration, when the engine's plan is one of theirs (setOnline). */
  private online: LiveDecider | undefined;
  /**
   * Every online decider's iterations over the scheduler's life. A re-plan builds a new decider
   * (its own stats start at 0); these go on, so /metrics' counters never drop (Prometheus would
   * read a drop as a counter reset).
   */
  private readonly onlineTotals: LiveStats = emptyLiveStats();
  private hadOnline = false;
  /** Whether the model can move KV positions (host KV); false after the first refusal. */
  private canShift = true;
  /** The model's vocabulary, learnt from the first step's logits (sizes each slot's logits array). */
  private nVocab: number | undefined;

  constructor(private readonly native: NativeModel, private readonly tokenizer: Tokenizer, private readonly contextLength: number, opts: SchedulerOptions = {}) {
    this.slots = Array.from({ length: native.maxSequences }, (_, seq) => ({ seq, tokens: [], lastUsed: 0, staleTokens: 0 }));
    this.onStepError = opts.onStepError;
    this.maxQueue = opts.maxQueue ?? 256;
    this.stepRows = Math.max(1, opts.stepRows ?? 64);
    this.soloPromptMs = Math.max(0, opts.soloPromptMs ?? SOLO_PROMPT_MS);
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
    if (req.speculate !== undefined && (!Number.isInteger(req.speculate) || req.speculate < 0)) throw new SchedulerError(`speculate must be a non-negative integer, got ${req.speculate}`, 'bad_request');
    if (req.logprobs !== undefined && (!Number.isInteger(req.logprobs) || req.logprobs < 0 || req.logprobs > 20)) throw new SchedulerError(`logprobs must be an integer in [0, 20], got ${req.logprobs}`, 'bad_request');
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
      out: [], steps: 0, drafted: 0, accepted: 0, skips: [], sharedAtAdmission: 0, ...(req.logprobs !== undefined ? { logprobs: [] } : {}),
      queuedAt: now, admittedAt: 0, firstTokenAt: 0, promptDoneAt: 0,
      push: (piece) => { if (piece) { pieces.push(piece); wake?.(); } },
      finish: (reason) => {
        done = true;
        wake?.();
        const end = performance.now();
        const admitted = r.admittedAt || end, promptDone = r.promptDoneAt || end;
        resolveResult({
          text: r.text, stopReason: reason, tokens: r.out, promptTokens: prompt.length, reusedTokens: r.reused, generatedTokens: r.generated,
          queuedMs: admitted - r.queuedAt, firstTokenMs: r.firstTokenAt ? r.firstTokenAt - r.queuedAt : end - r.queuedAt, totalMs: end - r.queuedAt,
          promptMs: promptDone - admitted, generateMs: end - promptDone,
          decodeSteps: r.steps, draftedTokens: r.drafted, acceptedDraftTokens: r.accepted,
          ...(r.logprobs ? { logprobs: r.logprobs.slice(0, r.out.length) } : {}),
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

  /**
   * The online decider that decides every following iteration (undefined: every running request
   * steps, its KV where the placement put it). The engine sets it at load and after a re-plan.
   */
  setOnline(decider: LiveDecider | undefined): void {
    this.online = decider;
    if (decider) this.hadOnline = true;
  }

  get onlineDecider(): LiveDecider | undefined {
    return this.online;
  }

  /**
   * Prompt tokens whose KV some slot already holds for `prompt` (its shared prefix, plus the runs
   * a request with `reuseShiftedKv` may move into place): what submitting it would reuse, without
   * admitting anything. Slots of running requests count only once they are cancelled (the
   * superseded request of the same cursor, whose slot the next one waits for).
   */
  cachedTokens(prompt: readonly number[], req: Pick<ServeRequest, 'reuseShiftedKv' | 'farContextEnd'> = {}): number {
    let best = 0;
    for (const s of this.slots) {
      if (s.running && !s.running.req.signal?.aborted) continue;
      best = Math.max(best, slotSaves(s, prompt, req).total);
    }
    return best;
  }

  /** The online deciders' counts since the scheduler started, across re-plans; undefined while none was ever set. */
  get onlineStats(): LiveStats | undefined {
    return this.hadOnline ? this.onlineTotals : undefined;
  }

  /** Forgets the prompts idle slots hold (their KV is cleared before the next step): the next requests evaluate every token. */
  clearCache(): void {
    for (const s of this.slots) {
      if (s.running) continue;
      s.tokens = [];
      s.clearFrom = 0;
      s.shifts = undefined;
      s.promptLength = undefined;
      s.staleTokens = 0;
    }
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
    for (let i = 0; i < this.queue.length;) {
      const free = this.slots.filter((s) => !s.running);
      if (!free.length) break;
      const r = this.queue[i]!;
      if (r.req.signal?.aborted) { this.queue.splice(i, 1); this.stats.cancelled++; r.finish('cancelled'); continue; }
      const choice = chooseSlot(this.slots, r.prompt, this.canShift ? r.req : undefined);
      if (choice.waitFor) {
        // The slot holding this prompt's work is still running a request that was cancelled
        // (superseded by this one): it leaves within one step, then this request takes its KV.
        // Taking another slot now would evaluate the whole prompt again.
        i++;
        continue;
      }
      this.queue.splice(i, 1);
      const best = choice.slot, bestLen = choice.shared;
      best.lastUsed = ++this.admissions;
      r.reused = r.pos = Math.max(0, bestLen);
      // Found while choosing the slot (only for requests that allow moved KV, while the model can move it).
      const chunks = choice.chunks;
      best.tokens.length = r.pos;
      best.shifts = undefined;
      r.sharedAtAdmission = r.pos;
      if (chunks) {
        // The native model may be mid-step: the moves are applied before the next one.
        best.shifts = chunks.moves.map((c) => ({ from: c.cacheFrom, to: c.cacheFrom + c.length, delta: c.promptFrom - c.cacheFrom }));
        best.staleTokens += chunks.staleTokens;
        r.skips = chunks.moves.map((c) => ({ from: c.promptFrom, to: c.promptFrom + c.length })).sort((a, b) => a.from - b.from);
        best.clearFrom = undefined;
        this.adoptSkips(best, r, false);
      } else {
        best.clearFrom = r.pos;  // the native model may be mid-step: cleared before the next one
        best.staleTokens = 0;
      }
      best.promptLength = r.prompt.length;
      best.running = r;
      r.admittedAt = performance.now();
      this.stats.promptTokens += r.prompt.length;
      this.stats.reusedTokens += r.pos;  // the shared prefix (and a tail adopted at once); a later tail adds itself
    }
    this.stats.queued = this.queue.length;
    this.stats.running = this.slots.filter((s) => s.running).length;
  }

  /** The prompt reached reused chunks: their tokens are the slot's now, and evaluation goes on after them. */
  private adoptSkips(s: Slot, r: Running, count = true): void {
    while (r.skips.length && r.skips[0]!.from === r.pos) {
      const skip = r.skips.shift()!;
      s.tokens.push(...r.prompt.slice(skip.from, skip.to));
      r.pos = skip.to;
      r.reused += skip.to - skip.from;
      if (count) this.stats.reusedTokens += skip.to - skip.from;
    }
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
        if (s.shifts) {
          try {
            // Moving right, the rightmost chunk first; moving left, the leftmost: no chunk lands on one not yet moved.
            const order = [...s.shifts.filter((m) => m.delta > 0).sort((a, b) => b.from - a.from), ...s.shifts.filter((m) => m.delta <= 0).sort((a, b) => a.from - b.from)];
            for (const m of order) this.native.shiftKv(m.from, m.to, m.delta, s.seq);
          } catch {
            // KV this model cannot move (on a device, KVPR): evaluate instead, from now on. No step
            // has run for the request since admission, so it goes back to its shared prefix.
            this.canShift = false;
            const r = s.running;
            if (r) {
              this.stats.reusedTokens -= r.pos - r.sharedAtAdmission;
              r.reused = r.pos = r.sharedAtAdmission;
              r.skips = [];
              s.tokens.length = r.pos;
            }
            s.clearFrom = s.tokens.length;
            s.staleTokens = 0;
          }
          s.shifts = undefined;
        }
        if (s.clearFrom === undefined) continue;
        this.native.clearKv(s.clearFrom, s.seq);
        s.clearFrom = undefined;
      }
      // Leave first: cancelled and timed-out requests free their slots before the step.
      const now = performance.now();
      for (const s of active) {
        const r = s.running!;
        if (r.req.signal?.aborted) this.end(s, 'cancelled');
        else if (r.req.timeLimitMs !== undefined && now - r.admittedAt > r.req.timeLimitMs) this.end(s, 'time');
        else if (r.req.promptTimeLimitMs !== undefined && !r.promptDoneAt && r.req.maxTokens > 0 && now - r.admittedAt > r.req.promptTimeLimitMs) this.end(s, 'time');
        else if (r.req.generateTimeLimitMs !== undefined && r.promptDoneAt && r.generated > 0 && now - r.promptDoneAt >= r.req.generateTimeLimitMs) this.end(s, 'time');
      }
      const stepping = this.slots.filter((s) => s.running);
      if (!stepping.length) continue;
      const { slots: decided, layers } = this.decided(stepping);
      const inputs = this.buildStep(decided, layers);
      const wantAll = inputs.some((i) => i.draft.length > 0);
      // Each input's logits (its last row's, or every row's in a step with drafts) go into its
      // slot's own array, grown to the most rows it has needed: afterStep reads them before the next step.
      const vocab = this.nVocab;
      const outs = vocab ? inputs.map((i) => (i.partial ? undefined : slotLogits(i.slot, (wantAll ? i.tokens.length : 1) * vocab))) : undefined;
      let logits: Float32Array[];
      const stepStart = performance.now();
      try {
        logits = await this.native.evalBatchAsync(inputs.map((i) => ({
          seq: i.slot.seq, tokens: Int32Array.from(i.tokens), startPos: i.startPos, ...(i.keepAfter ? { keepAfter: true } : {}), ...(i.layers ?? {}),
        })), wantAll, outs);
      } catch (e) {
        if (this.onStepError?.(e)) {
          // The model now runs on the CPU with every sequence's KV gone: each running request
          // rebuilds the tokens its slot held, then goes on from where it was.
          for (const s of this.slots) {
            const r = s.running;
            if (r) {
              // What the slot held, then the part of the prompt not evaluated yet (if any).
              r.prompt = [...s.tokens, ...r.prompt.slice(r.pos)];
              r.pos = 0;
              r.skips = [];
            }
            s.tokens = [];
            s.clearFrom = undefined;
            s.shifts = undefined;
            s.staleTokens = 0;
          }
          continue;
        }
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
      const stepRows = inputs.reduce((n, i) => n + i.tokens.length, 0);
      this.stats.stepRows += stepRows;
      if (inputs.every((i) => i.slot.running && i.slot.running.pos < i.slot.running.prompt.length && !i.partial)) {
        this.promptSpeed.observe(stepRows, performance.now() - stepStart);
      }
      const nVocab = wantAll ? logits.length && inputs.length ? logits[0]!.length / inputs[0]!.tokens.length : 0 : 0;
      if (!wantAll) this.nVocab ??= logits.find((l) => l.length > 0)?.length;
      else if (nVocab > 0) this.nVocab ??= nVocab;
      inputs.forEach((inp, k) => this.afterStep(inp, logits[k]!, wantAll ? nVocab : 0));
      this.stats.running = this.slots.filter((x) => x.running).length;
    }
  }

  /**
   * With an online decider (NEO, APEX): the running requests it lets step this iteration, after
   * it moved their KV (engine/runtime/scheduler/online.ts); without one, all of them.
   */
  private decided(stepping: Slot[]): { slots: Slot[]; layers: Map<number, LayerRange> } {
    if (!this.online) return { slots: stepping, layers: new Map() };
    const byAdmission = [...stepping].sort((a, b) => a.running!.admittedAt - b.running!.admittedAt);
    const { stepping: allowed, layers, record } = this.online.decide(byAdmission.map((s) => {
      const r = s.running!;
      return { key: r, seq: s.seq, promptTokens: r.prompt.length, generated: r.generated, maxTokens: r.req.maxTokens, decoding: r.pending !== undefined && r.pos >= r.prompt.length };
    }));
    countIteration(this.onlineTotals, record);
    const chosen = stepping.filter((s) => allowed.has(s.seq));
    return { slots: chosen.length ? chosen : stepping, layers };
  }

  /**
   * The step's rows: decoding requests first (their pending token, and drafts where they
   * speculate), then prompt chunks (a request's prompt, or the tokens it is rebuilding after a
   * device failure) in the rows left.
   */
  private buildStep(stepping: Slot[], layers: Map<number, LayerRange> = new Map()): StepInput[] {
    const inputs: StepInput[] = [];
    let rows = 0;
    for (const s of stepping) {
      const r = s.running!;
      if (r.pending === undefined || r.pos < r.prompt.length) continue;
      const part = layers.get(s.seq);
      if (part) {
        // Part of the pending token (APEX's asynchronous overlap): its layers only, no drafts.
        inputs.push({ slot: s, tokens: [r.pending], draft: [], startPos: s.tokens.length, last: true, layers: part, partial: part.layer + part.layers < (this.online?.limits.nLayers ?? 0) });
        rows += 1;
        continue;
      }
      const room = Math.min(r.req.speculate ?? 0, r.req.maxTokens - r.generated - 1, this.contextLength - s.tokens.length - 2, this.stepRows);
      const draft = room > 0 && r.sampler.greedy ? findDraft(r.history, room, DEFAULT_DRAFT) : [];
      inputs.push({ slot: s, tokens: [r.pending, ...draft], draft, startPos: s.tokens.length, last: true });
      rows += 1 + draft.length;
    }
    const drafting = inputs.some((i) => i.draft.length > 0);
    const solo = this.soloRows(stepping, inputs.length, layers);
    for (const s of stepping) {
      const r = s.running!;
      if (r.pos >= r.prompt.length || rows >= this.stepRows) continue;
      // Up to the next reused chunk, whose KV waits at its shifted positions (kept by keepAfter).
      const end = r.skips.length ? r.skips[0]!.from : r.prompt.length;
      const take = solo ? Math.min(solo, end - r.pos) : Math.min(drafting ? PROMPT_ROWS_BESIDE_DRAFTS : PROMPT_CHUNK, end - r.pos, this.stepRows - rows);
      inputs.push({ slot: s, tokens: r.prompt.slice(r.pos, r.pos + take), draft: [], startPos: r.pos, last: r.pos + take === r.prompt.length, ...(r.skips.length ? { keepAfter: true } : {}) });
      rows += take;
    }
    return inputs;
  }

  /**
   * Rows for a foreground prompt alone in its step (the header's "Prompt chunks"), or 0 when it
   * shares the step or the rule does not apply: the rows the measured prompt speed fits in
   * soloPromptMs, a multiple of 64 from stepRows up to the native batch. Untimed, the first step
   * is an ordinary chunk.
   */
  private soloRows(stepping: readonly Slot[], decodingInputs: number, layers: Map<number, LayerRange>): number {
    if (this.soloPromptMs <= 0 || this.promptSpeed.rowMs === undefined || this.online || decodingInputs > 0 || layers.size > 0 || stepping.length !== 1) return 0;
    const r = stepping[0]!.running!;
    if (r.req.priority === 'background' || r.pos >= r.prompt.length) return 0;
    const rows = promptRowsFitting(this.soloPromptMs, this.promptSpeed.rowMs, Math.min(PREFILL_BATCH, this.contextLength));
    return rows > this.stepRows && rows > PROMPT_CHUNK ? rows : 0;
  }

  /** Commits one input's step: its KV, and the tokens its logits decide. */
  private afterStep(inp: StepInput, logits: Float32Array, nVocab: number): void {
    const s = inp.slot;
    const r = s.running;
    if (!r) return;
    // Layers of the pending token that are not its last: its KV of those layers is written, the
    // token is not (the sequence stays where it was) and there are no logits to sample.
    if (inp.partial) return;
    s.tokens.push(...inp.tokens);
    const decoding = r.pending !== undefined && r.pos >= r.prompt.length;
    if (!decoding) {
      r.pos += inp.tokens.length;
      this.adoptSkips(s, r);
      // A rebuilt prompt (after a device failure) already has its next token pending.
      if (!inp.last || r.pending !== undefined) return;
      r.promptDoneAt = performance.now();
    } else {
      r.pending = undefined;
      r.steps++;
    }
    // Rows whose logits decide tokens: the last row, or (with drafts) every row of the input.
    const rows = nVocab > 0 && decoding ? inp.tokens.length : 1;
    // Row j is the input's token at index first + j, at position inp.startPos + first + j.
    const first = inp.tokens.length - rows;
    const rowOf = (j: number) => (nVocab > 0 ? logits.subarray((first + j) * nVocab, (first + j + 1) * nVocab) : logits);
    for (let j = 0; j < rows; j++) {
      if (rows > 1 && j > 0) {
        // Row j follows draft j - 1, which stood: it was the greedy choice after row j - 1.
        r.accepted++;
      }
      let id: number;
      try {
        // Log-probabilities of the model's own distribution, read before sampling adjusts the row.
        const lp = r.logprobs ? logSoftmaxTop(rowOf(j), r.req.logprobs ?? 0) : undefined;
        id = r.sampler.sample(rowOf(j), r.history);
        if (lp && r.logprobs) r.logprobs.push({ id, logprob: lp.logprobOf(id), top: lp.top });
      } catch (e) {
        // Non-finite logits: this request fails with the reason; its KV is not trusted further.
        s.running = undefined;
        this.trim(s, 0);
        this.stats.failed++;
        r.fail(e as Error);
        return;
      }
      const ended = this.take(s, r, id);
      const draft = inp.draft[j];
      if (ended) {
        // Keep the KV of the rows whose tokens are now the sequence's (a stop token is not kept).
        this.trim(s, inp.startPos + first + j + 1);
        r.drafted += inp.draft.length;
        return this.end(s, ended);
      }
      if (draft !== undefined && r.pending === draft) {
        r.pending = undefined;
        continue;
      }
      // The greedy token differs from the draft (or there was none): it is the next pending
      // token, and the KV of the drafts after row j goes.
      this.trim(s, inp.startPos + first + j + 1);
      break;
    }
    r.drafted += inp.draft.length;
  }

  /** Forgets a slot's KV past `length` tokens (cleared natively before the next step). */
  private trim(s: Slot, length: number): void {
    if (s.tokens.length <= length) return;
    s.tokens.length = length;
    s.clearFrom = s.clearFrom === undefined ? length : Math.min(s.clearFrom, length);
  }

  /** One generated token: returns why the request ends, or undefined (it is then pending). */
  private take(s: Slot, r: Running, id: number): ServeResult['stopReason'] | undefined {
    if (r.generated >= r.req.maxTokens) return 'length';
    if (r.req.stopIds?.has(id) || (!r.req.onlyStopIds && this.tokenizer.isEog(id))) return 'eos';
    r.generated++;
    this.stats.generatedTokens++;
    if (!r.firstTokenAt) r.firstTokenAt = performance.now();
    r.history.push(id);
    r.out.push(id);
    const piece = r.stops.push(r.decoder.push(id));
    r.text += piece.text;
    r.push(piece.text);
    if (piece.stopped) return 'stop';
    if (r.req.shouldStop?.(r.text)) return 'rule';
    if (r.generated >= r.req.maxTokens) return 'length';
    if (s.tokens.length + 1 >= this.contextLength) return 'context';
    r.pending = id;
    return undefined;
  }
}

interface StepInput {
  slot: Slot;
  /** The sequence's positions after this input hold a shifted tail that must stay. */
  keepAfter?: boolean;
  tokens: number[];
  /** Prompt-lookup drafts after the pending token (decoding requests that speculate). */
  draft: number[];
  startPos: number;
  last: boolean;
  /** Part of the pending token's layers (APEX's asynchronous overlap); absent: all. */
  layers?: LayerRange;
  /** The layers do not reach the last: no logits come back. */
  partial?: boolean;
}

/**
 * log-softmax of a logits row, lazily: the normaliser once, the `k` most likely tokens, and any
 * token's log-probability on demand (the chosen one may be outside the top k).
 */
export function logSoftmaxTop(row: Float32Array, k: number): { top: { id: number; logprob: number }[]; logprobOf: (id: number) => number } {
  let max = -Infinity;
  for (let i = 0; i < row.length; i++) if (row[i]! > max) max = row[i]!;
  let sum = 0;
  for (let i = 0; i < row.length; i++) sum += Math.exp(row[i]! - max);
  const logZ = max + Math.log(sum);
  const top = k > 0 ? topKIds(row, k).map((id) => ({ id, logprob: row[id]! - logZ })) : [];
  return { top, logprobOf: (id: number) => row[id]! - logZ };
}

/**
 * Decision (issue 23): a slot is worth taking for what it saves only when that is at least
 * REUSE_MIN_TOKENS (or half of a short prompt) and at least what taking it throws away (its cached tokens this prompt does
 * not reuse). Prompts of different files (or of far-apart places in one file) share their first
 * tokens only — BOS, the FIM token, a file header, or the same extra-context chunks — and taking
 * a slot for those would throw away that slot's file. Such a prompt takes an empty slot, else the
 * least recently used one.
 */
const REUSE_MIN_TOKENS = 32;

/** Whether `a` is a better slot to overwrite than `b`: an empty one (nothing to lose), then the least recently used. */
function preferToEvict(a: Slot, b: Slot | undefined): boolean {
  if (!b) return true;
  const aEmpty = a.tokens.length === 0, bEmpty = b.tokens.length === 0;
  if (aEmpty !== bEmpty) return aEmpty;
  return a.lastUsed < b.lastUsed;
}

/** `floats` of the slot's logits array (a view of it, which grows to the largest asked). */
function slotLogits(slot: Slot, floats: number): Float32Array {
  if (!slot.logits || slot.logits.length < floats) slot.logits = new Float32Array(floats);
  return slot.logits.subarray(0, floats);
}

/** Tokens of `prompt` whose KV `slot` holds (the last prompt token is always evaluated: its logits are needed). */
function sharedPrefix(slot: Slot, prompt: readonly number[]): number {
  let n = 0;
  const lim = Math.min(slot.tokens.length, prompt.length - 1);
  while (n < lim && slot.tokens[n] === prompt[n]) n++;
  return n;
}

/**
 * What `slot` saves `prompt`: its shared prefix `n`, plus (for a request that allows it) the runs
 * it holds that can be moved into place; `whole` when the slot holds nothing but a prefix of it.
 */
function slotSaves(slot: Slot, prompt: readonly number[], req?: Pick<ServeRequest, 'reuseShiftedKv' | 'farContextEnd'>): { n: number; chunks: ReusableChunks | undefined; total: number; whole: boolean } {
  const n = sharedPrefix(slot, prompt);
  const chunks = req?.reuseShiftedKv ? reusableChunks(slot, prompt, n, req.farContextEnd ?? 0) : undefined;
  const moved = chunks?.moves.reduce((a, m) => a + m.length, 0) ?? 0;
  return { n, chunks, total: n + moved, whole: n > 0 && n === slot.tokens.length };
}

/**
 * The slot a prompt runs in: the free slot sharing the longest useful prefix; failing that an
 * empty slot, then the least recently used. `waitFor` when a busy slot whose request was cancelled
 * holds a longer useful prefix than any free slot (the superseded request of the same cursor).
 */
function chooseSlot(slots: readonly Slot[], prompt: readonly number[], req?: ServeRequest): { slot: Slot; shared: number; chunks?: ReusableChunks; waitFor?: false } | { waitFor: true; slot?: undefined; shared?: undefined; chunks?: undefined } {
  // What a slot saves this prompt: its shared prefix, plus (for requests that allow it) the runs
  // it holds that can be moved into place. A slot that holds nothing but a prefix of this prompt
  // (a cache warm-up) is always worth taking: nothing of it is lost.
  const saved = (s: Slot) => slotSaves(s, prompt, req);
  const useful = (v: { total: number; whole: boolean }, s: Slot) => v.whole || (v.total >= Math.min(REUSE_MIN_TOKENS, prompt.length / 2) && v.total >= s.tokens.length - v.total);
  let best: Slot | undefined, bestSaved = -1, bestShared = 0, bestChunks: ReusableChunks | undefined;
  let fallback: Slot | undefined, fallbackSaved: ReturnType<typeof saved> | undefined;
  for (const s of slots) {
    if (s.running) continue;
    const v = saved(s);
    if (useful(v, s) && (v.total > bestSaved || (v.total === bestSaved && s.lastUsed < best!.lastUsed))) { best = s; bestSaved = v.total; bestShared = v.n; bestChunks = v.chunks; }
    if (preferToEvict(s, fallback)) { fallback = s; fallbackSaved = v; }
  }
  for (const s of slots) {
    if (!s.running?.req.signal?.aborted) continue;
    const v = saved(s);
    if (useful(v, s) && v.total > bestSaved) return { waitFor: true };
  }
  if (best) return { slot: best, shared: bestShared, ...(bestChunks ? { chunks: bestChunks } : {}) };
  return { slot: fallback!, shared: fallbackSaved!.n, ...(fallbackSaved!.chunks ? { chunks: fallbackSaved!.chunks } : {}) };
}

/** Shortest reused run worth a move: below it, evaluating costs about as much as shifting. */
const MIN_TAIL_TOKENS = 16;
/**
 * Most new prompt tokens a reused tail may have missed before it is evaluated again. Decision:
 * 64 — a keystroke adds 0–2 tokens before the cursor, so the suffix is refreshed about every
 * line or two of typing; the logit drift measured at this bound is in test/unit/kv-shift.test.ts.
 */
const MAX_STALE_TOKENS = 64;

/** Length of the common run of `a` from `i` and `b` from `j`, up to (exclusive) `aEnd` and `bEnd`. */
function runLength(a: readonly number[], i: number, aEnd: number, b: readonly number[], j: number, bEnd: number): number {
  let n = 0;
  while (i + n < aEnd && j + n < bEnd && a[i + n] === b[j + n]) n++;
  return n;
}

interface ReusedChunk { cacheFrom: number; promptFrom: number; length: number }

/**
 * Runs of the slot's cached prompt that reappear, moved, in `prompt` after the first `shared`
 * tokens, in order: the FIM suffix after a keystroke in the prefix; the FIM prefix and suffix
 * after extra-context chunks were added, dropped or rotated ahead of them; the chunks that stayed.
 * At each prompt position the longest cached run of at least MIN_TAIL_TOKENS, then the set of
 * them with the most tokens whose sources and destinations are both in order (which makes the
 * moves safe to apply one by one). The prompt's last token is never
 * reused (its logits are needed). `staleTokens`: near-context tokens (after `farContextEnd`)
 * evaluated before the last run, which its cached KV has not seen. Undefined when nothing is
 * worth moving or the slot's reused KV has gone too stale.
 */
type ReusableChunks = { moves: ReusedChunk[]; staleTokens: number };

/**
 * The runs (in prompt order, not overlapping there) whose sources are also in order and do not
 * overlap, with the most tokens in all; a run whose source begins inside the previous one's is
 * cut at its front (its end stays, so what follows it is unaffected) if MIN_TAIL_TOKENS remain.
 * Code repeats itself: a short run of a new chunk can match the middle of the cached prefix, and
 * taking it first (greedy) put the cursor's whole prompt out of order (issue 23 item 6: a turned
 * extra-context ring then evaluated all 934 tokens). Quadratic in the runs (at most the prompt
 * length / MIN_TAIL_TOKENS).
 */
function longestInOrder(runs: readonly ReusedChunk[]): ReusedChunk[] {
  const total: number[] = [], from: number[] = [], cut: number[] = [];
  let bestEnd = -1;
  for (let j = 0; j < runs.length; j++) {
    const r = runs[j]!;
    total[j] = r.length; from[j] = -1; cut[j] = 0;
    for (let i = 0; i < j; i++) {
      const overlap = Math.max(0, runs[i]!.cacheFrom + runs[i]!.length - r.cacheFrom);
      if (r.length - overlap < (overlap > 0 ? MIN_TAIL_TOKENS : 1)) continue;
      if (total[i]! + r.length - overlap > total[j]!) { total[j] = total[i]! + r.length - overlap; from[j] = i; cut[j] = overlap; }
    }
    if (bestEnd < 0 || total[j]! > total[bestEnd]!) bestEnd = j;
  }
  const out: ReusedChunk[] = [];
  for (let j = bestEnd; j >= 0; j = from[j]!) {
    const r = runs[j]!, c = cut[j]!;
    out.unshift({ cacheFrom: r.cacheFrom + c, promptFrom: r.promptFrom + c, length: r.length - c });
  }
  return out;
}

function reusableChunks(slot: Slot, prompt: readonly number[], shared: number, farContextEnd: number): ReusableChunks | undefined {
  const cl = slot.promptLength;
  if (cl === undefined || cl > slot.tokens.length) return undefined;
  const cached = slot.tokens, end = prompt.length - 1;
  const key = (xs: readonly number[], at: number) => xs.slice(at, at + MIN_TAIL_TOKENS).join(',');
  const where = new Map<string, number[]>();
  for (let c = shared; c + MIN_TAIL_TOKENS <= cl; c++) {
    const k = key(cached, c);
    const list = where.get(k);
    if (list) { if (list.length < 8) list.push(c); } else where.set(k, [c]);
  }
  // Candidates, left to right in the prompt: at each position the longest cached run, anywhere.
  const candidates: ReusedChunk[] = [];
  for (let i = shared; i + MIN_TAIL_TOKENS <= end;) {
    let best: ReusedChunk | undefined;
    for (const c of where.get(key(prompt, i)) ?? []) {
      const length = runLength(cached, c, cl, prompt, i, end);
      if (!best || length > best.length) best = { cacheFrom: c, promptFrom: i, length };
    }
    if (!best) { i++; continue; }
    candidates.push(best);
    i += best.length;
  }
  const moves = longestInOrder(candidates);
  if (!moves.length) return undefined;
  // Near-context tokens evaluated (not reused) before the last run: what the reused KV missed.
  const last = moves[moves.length - 1]!;
  let evaluated = 0;
  for (let i = Math.max(shared, farContextEnd); i < last.promptFrom; i++) if (!moves.some((m) => i >= m.promptFrom && i < m.promptFrom + m.length)) evaluated++;
  if (slot.staleTokens + evaluated > MAX_STALE_TOKENS) return undefined;
  return { moves, staleTokens: evaluated };
}
