// Runs one completion from prompt token ids through the engine's scheduler (the runtime's one
// door, engine/runtime/scheduler/): it reuses the KV slot sharing the longest prompt prefix,
// decodes greedily (completions must be reproducible, and speculation is only exact for greedy),
// verifies prompt-lookup drafts in multi-token steps, and stops at the family's stop tokens, a
// text rule, the token cap or the time cap.
import type { Engine } from '../runtime/engine';

export type CompletionStopReason = 'eos' | 'length' | 'context' | 'time' | 'rule' | 'cancelled';

export interface RunOptions {
  /** Most tokens to generate (the n_predict cap). */
  maxTokens: number;
  /** Tokens that end the completion (not part of it). */
  stopIds: ReadonlySet<number>;
  /**
   * Cap on decoding, ms from the end of prompt processing (llama.vscode's t_max_predict_ms): at
   * least one token is always generated. Infinity for none.
   */
  timeLimitMs?: number;
  /** Called with the whole text so far after each token; true ends generation ('rule'). */
  shouldStop?: (text: string) => boolean;
  /** Verify prompt-lookup drafts of up to this many tokens per step; 0 = plain greedy. */
  speculate?: number;
  /** Reuse the cached KV of the prompt's unchanged tail (the suffix) at shifted positions; see ServeRequest.reuseShiftedKv. */
  reuseShiftedKv?: boolean;
  /** Prompt tokens before this index are other files' context (see ServeRequest.farContextEnd). */
  farContextEnd?: number;
  /** Scheduler class (default 'foreground', an editor completion; cache warm-ups run 'background'). */
  priority?: 'foreground' | 'background';
  signal?: AbortSignal;
}

export interface RunResult {
  text: string;
  tokens: number[];
  promptTokens: number;
  /** Prompt tokens whose KV was already in the cache (not evaluated again). */
  reusedTokens: number;
  generatedTokens: number;
  /** From submission to admission into a KV slot (waiting for a busy engine or a superseded request's slot). */
  queuedMs: number;
  promptMs: number;
  generateMs: number;
  /** Model evaluations during decoding (one per token without speculation). */
  decodeSteps: number;
  draftedTokens: number;
  acceptedDraftTokens: number;
  stopReason: CompletionStopReason;
}

export async function runCompletion(engine: Engine, promptIds: readonly number[], opts: RunOptions): Promise<RunResult> {
  if (promptIds.length === 0) throw new Error('completion prompt is empty (no tokens)');
  if (!Number.isInteger(opts.maxTokens) || opts.maxTokens < 0) throw new Error(`maxTokens must be a non-negative integer, got ${opts.maxTokens}`);
  // The one door: the engine's scheduler, shared with the HTTP API, so an editor completion and
  // other clients batch together on one model (an editor completion goes first).
  const stream = engine.scheduler().submit({
    prompt: [...promptIds],
    maxTokens: opts.maxTokens,
    temperature: 0,
    repeatPenalty: 1,
    stopIds: opts.stopIds,
    onlyStopIds: true,
    priority: opts.priority ?? 'foreground',
    ...(opts.timeLimitMs !== undefined && Number.isFinite(opts.timeLimitMs) ? { generateTimeLimitMs: opts.timeLimitMs } : {}),
    ...(opts.shouldStop ? { shouldStop: opts.shouldStop } : {}),
    ...(opts.speculate ? { speculate: opts.speculate } : {}),
    ...(opts.reuseShiftedKv ? { reuseShiftedKv: true, ...(opts.farContextEnd ? { farContextEnd: opts.farContextEnd } : {}) } : {}),
    ...(opts.signal ? { signal: opts.signal } : {}),
  });
  const r = await stream.result;
  const stopReason: CompletionStopReason = r.stopReason === 'stop' ? 'rule' : r.stopReason;
  return {
    text: r.text, tokens: r.tokens, promptTokens: r.promptTokens, reusedTokens: r.reusedTokens, generatedTokens: r.generatedTokens,
    queuedMs: r.queuedMs, promptMs: r.promptMs, generateMs: r.generateMs, decodeSteps: r.decodeSteps, draftedTokens: r.draftedTokens,
    acceptedDraftTokens: r.acceptedDraftTokens, stopReason,
  };
}
