// A completion at a cursor, end to end: the cache (with type-through), the prompt budget, the
// FIM prompt, the runner (KV prefix reuse, speculation, caps) and the quality rules. One
// Completer per loaded engine.
import type { Engine } from '../runtime/engine';
import { DEFAULT_PROMPT_BUDGET, fitContext } from './budget';
import { CompletionCache } from './cache';
import type { ContextChunk } from './extra-context';
import type { FimFamily } from './fim';
import { PromptBuilder } from './prompt';
import { applyRules, cursorContext, stopRule } from './rules';
import { runCompletion, type CompletionStopReason, type RunOptions } from './runner';

export const DEFAULT_MAX_TOKENS = 64;
export const DEFAULT_TIME_LIMIT_MS = 1500;
/**
 * Draft tokens verified per step by default. Verification keeps exactly the tokens the
 * multi-token step's rows predict, and those rows are bit for bit what each token decoded alone
 * gives (decode attention no longer splits a row's positions between threads; verification
 * steps skip prefill tiles that sum in another order): output identical to plain greedy,
 * test/parity/step-exactness.test.ts and test/unit/completion-speculation.test.ts. Measured on
 * repetitive Python (test/bench/bench-completion.ts): drafts of up to 4 tokens decode 1.4-1.8×
 * faster on the synthetic 0.5B Q8_0/Q4_0 models, 8 no faster than 4 (more rejected drafts).
 */
export const DEFAULT_SPECULATE = 4;
/** The step of cut budgets, and the smallest (a few lines around the cursor). */
const MIN_CUT_BUDGET = 64;
/** Documents whose cut budget is remembered. */
const CUT_DOCUMENTS = 32;
/** Fewest evaluated prompt tokens a speed sample needs (a keystroke's one or two tokens time the step, not the speed). */
const MIN_SPEED_SAMPLE_TOKENS = 32;
/** Texts whose tokens the Completer remembers (a keystroke's budget fit and prompt use about four). */
const ENCODE_MEMO_ENTRIES = 8;

export interface CursorCompletionRequest {
  /** Identifies the document (its URI) for the cache. */
  document: string;
  before: string;
  after: string;
  /** Prompt budget in tokens (default 1024). */
  budget?: number;
  /** The n_predict cap (default 64). */
  maxTokens?: number;
  /** Cap on decoding after the prompt is processed, ms (default 1500). */
  timeLimitMs?: number;
  /** Draft tokens per step for prompt-lookup speculation; 0 = off (the default). */
  speculate?: number;
  /**
   * Chunks of other files to put before the FIM prefix (FIM models only), oldest first; they
   * take at most a quarter of the budget and the newest are kept when they do not all fit.
   */
  extraContext?: readonly ContextChunk[];
  /**
   * Show what we have: when decoding would still be running this many ms after the request
   * arrived, return the text so far at the last token before then (judged by the decode step's
   * time; once the rules leave something to show) as a 'partial' completion,
   * and let decoding go on to the full one (`CursorCompletion.rest`), which the cache then
   * serves. Continue shows partial results at 300 ms; 0 or undefined: off (wait for the end).
   */
  showPartialAfterMs?: number;
  /**
   * Most time the prompt's uncached tokens may take, ms, at the measured prompt speed (0 or
   * undefined: no limit). A prompt that needs more (the first completion in a big file) is cut to
   * the text nearest the cursor that fits, and the completion says so (`cut`): evaluating the
   * whole prompt in the background (`warm`) then gives the completions after it the full context.
   */
  maxPromptMs?: number;
  /** Serve from and store in the completion cache (default true). */
  useCache?: boolean;
  /**
   * Evaluate every prompt token (default false): without it, the suffix's cached KV is reused at
   * shifted positions after a keystroke (not bit-exact; see ServeRequest.reuseShiftedKv).
   */
  exact?: boolean;
  signal?: AbortSignal;
}

export interface CursorCompletionStats {
  format: FimFamily | 'prefix-only';
  promptTokens: number;
  /** Prompt tokens whose KV was reused from the previous completion. */
  reusedTokens: number;
  generatedTokens: number;
  /** Prompt tokens the model evaluated (promptTokens - reusedTokens). */
  evaluatedTokens: number;
  /** Fitting the text to the budget, tokenizing it and assembling the FIM prompt. */
  buildMs: number;
  /** Waiting for a KV slot (a superseded request's slot, a busy scheduler). */
  queuedMs: number;
  promptMs: number;
  generateMs: number;
  totalMs: number;
  tokensPerSecond: number;
  /**
   * 'cached': served from the completion cache without running the model; 'partial': the text so
   * far at the show-partial deadline (the full completion follows in `rest`).
   */
  stopReason: CompletionStopReason | 'cached' | 'partial';
  /** Model evaluations while decoding (fewer than generated tokens when drafts stood). */
  decodeSteps: number;
  draftedTokens: number;
  acceptedDraftTokens: number;
}

/** What a cache warm-up did: the prompt it evaluated for the completions to come. */
export interface CursorWarmUp {
  promptTokens: number;
  reusedTokens: number;
  evaluatedTokens: number;
  promptMs: number;
  /** 'cancelled' when a completion superseded it (its KV so far stays for that completion). */
  stopReason: CompletionStopReason;
}

export interface CursorCompletion {
  text: string;
  stats: CursorCompletionStats;
  /**
   * For a 'partial' completion only: the full completion, still decoding. It settles when decoding
   * ends (cancelled by the next completion request or a load: text '', stopReason 'cancelled'),
   * and its text, when there is one, is in the cache for the same cursor by then.
   */
  rest?: Promise<CursorCompletion>;
  /**
   * Set when `maxPromptMs` cut the prompt: its budget and the whole prompt's size. Warming the
   * same request (without the cut) lets the next completions use the whole prompt.
   */
  cut?: PromptCut;
}

/** A prompt cut to meet `maxPromptMs`: the budget it used and what the whole prompt would have been. */
export interface PromptCut {
  budget: number;
  wholePromptTokens: number;
  /** Of the whole prompt, tokens a slot already held. */
  wholeCachedTokens: number;
  /** The measured prompt speed the cut was judged by (tokens/s). */
  promptTokensPerSecond: number;
}

export class Completer {
  readonly prompts: PromptBuilder;
  readonly cache = new CompletionCache();
  private readonly chunkMemo = new Map<string, number[]>();
  /** The running cache warm-up, if any (at most one: a newer one or any completion cancels it). */
  private warming: AbortController | undefined;
  private readonly encodeMemo = new Map<string, number[]>();
  /** Prompt evaluation speed measured on this engine (tokens/s), averaged over recent runs. */
  private promptTokensPerSecond: number | undefined;
  /**
   * Per document, the budget its cut prompts use while its whole prompt is not cached: kept, so
   * consecutive keystrokes get the same window and reuse its KV.
   */
  private readonly cutBudgets = new Map<string, number>();

  constructor(private readonly engine: Engine, log?: (message: string) => void) {
    this.prompts = new PromptBuilder(engine.tokenizer);
    if (this.prompts.fim === undefined) {
      log?.(`${engine.summary.name}: the model has no fill-in-the-middle tokens; completions use the text before the cursor only`);
    } else {
      log?.(`${engine.summary.name}: fill-in-the-middle format ${this.prompts.fim.family}`);
    }
  }

  /** Forgets the prompts the engine's KV slots hold (benchmarks measure cold completions with it). */
  clearKvCache(): void {
    this.engine.scheduler().clearCache();
  }

  async complete(request: CursorCompletionRequest): Promise<CursorCompletion> {
    const t0 = performance.now();
    // A warm-up still evaluating gives way (its KV so far is this completion's to reuse).
    this.cancelWarmUp();
    const useCache = request.useCache ?? true;
    const cached = useCache ? this.cache.lookup(request.document, request.before, request.after) : undefined;
    if (cached !== undefined) {
      return { text: cached, stats: { ...emptyStats(this.format()), totalMs: performance.now() - t0, stopReason: 'cached' } };
    }
    if (this.prompts.fim === undefined && request.before.length === 0) {
      return { text: '', stats: { ...emptyStats(this.format()), totalMs: performance.now() - t0, stopReason: 'length' } };
    }
    const { p, cut } = this.prepareInTime(request);
    const buildMs = performance.now() - t0;
    const ctx = cursorContext(request.before, request.after);
    const rule = stopRule(ctx);
    // Show what we have: from the last token before the deadline on, the first token after which
    // the rules leave text to show resolves `partial`; decoding goes on. The deadline counts from the request's
    // arrival, so a long queue or prefill shows the first words as soon as they exist.
    const showAfter = request.showPartialAfterMs ?? 0;
    let partial: ((text: string, generated: number) => void) | undefined;
    const shown = new Promise<{ text: string; generated: number }>((resolve) => {
      partial = showAfter > 0 ? (text, generated) => resolve({ text, generated }) : undefined;
    });
    let generated = 0;
    // Show by the deadline, not after it: at each token, if the next one (judged by the last
    // decode step's time) would arrive past the deadline, this token is the last before it.
    // Drafted tokens that stand arrive together, so a step is a gap of more than a millisecond.
    let lastTokenAt = 0, stepMs = 0;
    const shouldStop = (text: string): boolean => {
      generated++;
      const now = performance.now();
      if (lastTokenAt > 0 && now - lastTokenAt > 1) stepMs = now - lastTokenAt;
      lastTokenAt = now;
      if (partial !== undefined && now - t0 + stepMs >= showAfter) {
        const visible = applyRules(text, ctx);
        if (visible.length > 0) {
          partial(visible, generated);
          partial = undefined;
        }
      }
      return rule(text);
    };
    const full = runCompletion(this.engine, p.ids, {
      ...p.run,
      maxTokens: p.maxTokens,
      timeLimitMs: request.timeLimitMs ?? DEFAULT_TIME_LIMIT_MS,
      speculate: request.speculate ?? DEFAULT_SPECULATE,
      shouldStop,
      ...(request.signal ? { signal: request.signal } : {}),
    }).then((result): CursorCompletion => {
      partial = undefined;
      if (result.stopReason !== 'cancelled') this.notePromptSpeed(result.promptTokens - result.reusedTokens, result.promptMs);
      const text = result.stopReason === 'cancelled' ? '' : applyRules(result.text, ctx);
      if (useCache && text.length > 0) this.cache.store(request.document, request.before, request.after, text);
      return {
        text,
        stats: {
          format: p.format,
          promptTokens: result.promptTokens,
          reusedTokens: result.reusedTokens,
          evaluatedTokens: result.promptTokens - result.reusedTokens,
          generatedTokens: result.generatedTokens,
          buildMs,
          queuedMs: result.queuedMs,
          promptMs: result.promptMs,
          generateMs: result.generateMs,
          totalMs: performance.now() - t0,
          tokensPerSecond: result.generateMs > 0 ? (result.generatedTokens / result.generateMs) * 1000 : 0,
          stopReason: result.stopReason,
          decodeSteps: result.decodeSteps,
          draftedTokens: result.draftedTokens,
          acceptedDraftTokens: result.acceptedDraftTokens,
        },
        ...(cut ? { cut } : {}),
      };
    });
    if (showAfter <= 0) return full;
    const first = await Promise.race([full, shown]);
    if ('stats' in first) return first;
    // Partial: the prompt's figures are those of the run that goes on.
    return {
      text: first.text,
      stats: { ...emptyStats(p.format), buildMs, generatedTokens: first.generated, totalMs: performance.now() - t0, stopReason: 'partial' },
      rest: full,
      ...(cut ? { cut } : {}),
    };
  }

  /**
   * Evaluates the prompt a completion at this cursor would have, generating nothing (as
   * llama.vscode warms llama-server's cache with n_predict 0), so that the completion, when
   * asked, evaluates only what changed since. For a document that opens or gets focus. Runs in
   * the background class; a completion that arrives meanwhile cancels it and takes over its KV.
   * The completion's text is the same as without the warm-up: the warm-up only fills the KV
   * cache with the prompt's own tokens (as a previous completion at this cursor would).
   */
  async warm(request: CursorCompletionRequest): Promise<CursorWarmUp> {
    this.cancelWarmUp();
    if (this.prompts.fim === undefined && request.before.length === 0) {
      return { promptTokens: 0, reusedTokens: 0, evaluatedTokens: 0, promptMs: 0, stopReason: 'length' };
    }
    const p = this.prepare(request);
    const mine = new AbortController();
    this.warming = mine;
    const onAbort = () => mine.abort();
    request.signal?.addEventListener('abort', onAbort, { once: true });
    if (request.signal?.aborted) mine.abort();
    try {
      const r = await runCompletion(this.engine, p.ids, { ...p.run, maxTokens: 0, priority: 'background', signal: mine.signal });
      if (r.stopReason !== 'cancelled') this.notePromptSpeed(r.promptTokens - r.reusedTokens, r.promptMs);
      return { promptTokens: r.promptTokens, reusedTokens: r.reusedTokens, evaluatedTokens: r.promptTokens - r.reusedTokens, promptMs: r.promptMs, stopReason: r.stopReason };
    } finally {
      request.signal?.removeEventListener('abort', onAbort);
      if (this.warming === mine) this.warming = undefined;
    }
  }

  /** Cancels a running warm-up (it ends within one step; the KV it evaluated stays in its slot). */
  cancelWarmUp(): void {
    this.warming?.abort();
    this.warming = undefined;
  }

  /**
   * The request's prompt, cut when `maxPromptMs` is set and its uncached tokens would take longer
   * at the measured prompt speed (before any run has measured it, nothing is cut: a warm-up on
   * focus or the first completion measures it). The cut prompt is the one the budget fit gives at a smaller budget: the
   * text nearest the cursor, on the same stable line grid, so the next keystrokes reuse its KV.
   */
  private prepareInTime(request: CursorCompletionRequest): { p: ReturnType<Completer['prepare']>; cut?: PromptCut } {
    const whole = this.prepare(request);
    const limitMs = request.maxPromptMs ?? 0;
    if (limitMs <= 0) return { p: whole };
    const cached = this.engine.scheduler().cachedTokens(whole.ids, whole.run);
    const rate = this.promptTokensPerSecond;
    if (rate === undefined) return { p: whole };
    const affordable = (rate * limitMs) / 1000;
    // Whole multiples of the budget grid's step; the kept budget changes only when the speed
    // moved by half or double, since a new budget moves the window and loses its KV.
    const fitting = Math.max(MIN_CUT_BUDGET, Math.floor(affordable / MIN_CUT_BUDGET) * MIN_CUT_BUDGET);
    let budget = this.cutBudgets.get(request.document);
    if (budget === undefined || fitting >= 2 * budget || fitting * 2 <= budget) budget = fitting;
    // No cut where it saves nothing: the whole prompt's new tokens fit the time, or are no more
    // than a cut prompt of `budget` tokens would evaluate.
    if (whole.ids.length - cached <= Math.max(affordable, budget) || budget >= whole.budget) {
      this.cutBudgets.delete(request.document);
      return { p: whole };
    }
    this.cutBudgets.set(request.document, budget);
    if (this.cutBudgets.size > CUT_DOCUMENTS) this.cutBudgets.delete(this.cutBudgets.keys().next().value as string);
    return {
      p: this.prepare({ ...request, budget }),
      cut: { budget, wholePromptTokens: whole.ids.length, wholeCachedTokens: cached, promptTokensPerSecond: rate },
    };
  }

  /** Folds a run's prompt evaluation into the measured prompt speed (runs of a few tokens say little). */
  private notePromptSpeed(evaluated: number, ms: number): void {
    if (evaluated < MIN_SPEED_SAMPLE_TOKENS || ms <= 0) return;
    const rate = (evaluated / ms) * 1000;
    this.promptTokensPerSecond = this.promptTokensPerSecond === undefined ? rate : (this.promptTokensPerSecond + rate) / 2;
  }

  /** The budgeted FIM prompt of a request and the runner options that depend on it (shared by complete and warm). */
  private prepare(request: CursorCompletionRequest): { ids: number[]; format: FimFamily | 'prefix-only'; maxTokens: number; budget: number; run: Pick<RunOptions, 'stopIds' | 'reuseShiftedKv' | 'farContextEnd'> } {
    const maxTokens = request.maxTokens ?? DEFAULT_MAX_TOKENS;
    // The prompt and every token the completion may add must fit the context.
    const budget = Math.min(request.budget ?? DEFAULT_PROMPT_BUDGET, this.engine.contextLength - maxTokens - 1);
    const fim = this.prompts.fim;
    const count = (text: string) => this.encodePart(text, true).length;
    // Without FIM the suffix cannot be used, so the prefix gets the whole budget.
    const extra = fim && request.extraContext ? this.extraTokens(request.extraContext, Math.floor(budget / 4)) : [];
    const fitted = fitContext(request.before, fim ? request.after : '', budget - extra.length, this.prompts.overheadTokens, count);
    const prompt = fim
      ? this.prompts.buildTokens(this.encodePart(fitted.prefix, fim.prefixSpace), this.encodePart(fitted.suffix, fim.suffixSpace), extra)
      : this.prompts.build(fitted.prefix, '', extra);
    const shifted = !(request.exact ?? false);
    // Extra-context chunks go right after BOS (PromptBuilder.build): the cursor's prompt follows them.
    const farContextEnd = extra.length ? (fim?.addBos && this.engine.tokenizer.bos !== undefined ? 1 : 0) + extra.length : 0;
    return {
      ids: prompt.ids, format: prompt.format, maxTokens, budget,
      run: { stopIds: prompt.stopIds, ...(shifted ? { reuseShiftedKv: true, ...(farContextEnd ? { farContextEnd } : {}) } : {}) },
    };
  }

  /**
   * PromptBuilder.encodePart, remembered for the last few texts: the budget fit counts the very
   * suffix and prefix the prompt then encodes, and the suffix is the same on every keystroke, so
   * a keystroke tokenizes only its new prefix window (the ids are the tokenizer's own).
   */
  private encodePart(text: string, space: boolean): number[] {
    const key = `${space ? 1 : 0}${text}`;
    let ids = this.encodeMemo.get(key);
    if (ids === undefined) {
      ids = this.prompts.encodePart(text, space);
      if (this.encodeMemo.size >= ENCODE_MEMO_ENTRIES) this.encodeMemo.delete(this.encodeMemo.keys().next().value as string);
    } else {
      this.encodeMemo.delete(key);
    }
    this.encodeMemo.set(key, ids);
    return ids;
  }

  /** The newest chunks whose tokens fit `budget`, in their original (oldest-first) order. */
  private extraTokens(chunks: readonly ContextChunk[], budget: number): number[] {
    const kept: number[][] = [];
    let total = 0;
    for (let i = chunks.length - 1; i >= 0; i--) {
      const tokens = this.chunkTokens(chunks[i]!);
      if (total + tokens.length > budget) break;
      kept.unshift(tokens);
      total += tokens.length;
    }
    return kept.flat();
  }

  /** A chunk's tokens, remembered: the same chunks come back on every keystroke. */
  private chunkTokens(chunk: ContextChunk): number[] {
    const key = `${chunk.name}\u0000${chunk.text}`;
    let ids = this.chunkMemo.get(key);
    if (ids === undefined) {
      ids = this.prompts.encodeExtra([chunk]);
      this.chunkMemo.set(key, ids);
      if (this.chunkMemo.size > 64) this.chunkMemo.delete(this.chunkMemo.keys().next().value as string);
    }
    return ids;
  }

  private format(): FimFamily | 'prefix-only' {
    return this.prompts.fim?.family ?? 'prefix-only';
  }
}

function emptyStats(format: FimFamily | 'prefix-only'): CursorCompletionStats {
  return {
    format, promptTokens: 0, reusedTokens: 0, evaluatedTokens: 0, generatedTokens: 0, buildMs: 0, queuedMs: 0, promptMs: 0, generateMs: 0, totalMs: 0,
    tokensPerSecond: 0, stopReason: 'cached', decodeSteps: 0, draftedTokens: 0, acceptedDraftTokens: 0,
  };
}
