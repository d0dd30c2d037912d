// Runs one completion from prompt token ids on the engine's model: reuses the longest common
// prefix of the KV cache, decodes greedily (completions must be reproducible, and speculation is
// only exact for greedy), optionally verifies prompt-lookup drafts in one multi-token step, and
// stops at the family's stop tokens, a text rule, the token cap or the time cap.
import type { Engine } from '../engine';
import { PREFILL_CHUNK } from '../engine';
import { DEFAULT_DRAFT, findDraft } from './speculate';

export type CompletionStopReason = 'eos' | 'length' | 'time' | 'rule' | 'cancelled';

export interface RunOptions {
  /** Most tokens to generate (the n_predict cap). */
  maxTokens: number;
  /** The KV slot to run in (e.g. the document's URI): each recent document keeps its own KV. */
  slot?: string;
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
  signal?: AbortSignal;
}

export interface RunResult {
  text: string;
  tokens: number[];
  promptTokens: number;
  /** Prompt tokens whose KV was already in the cache (not evaluated again). */
  reusedTokens: number;
  generatedTokens: number;
  promptMs: number;
  generateMs: number;
  /** Model evaluations during decoding (one per token without speculation). */
  decodeSteps: number;
  draftedTokens: number;
  acceptedDraftTokens: number;
  stopReason: CompletionStopReason;
}

/** Index of the largest of `n` logits starting at `offset` (the first one on ties, as llama.cpp). */
export function argmax(logits: Float32Array, offset = 0, n = logits.length - offset): number {
  let best = 0;
  let bestValue = logits[offset]!;
  for (let i = 1; i < n; i++) {
    const v = logits[offset + i]!;
    if (v > bestValue) { bestValue = v; best = i; }
  }
  return best;
}

export function runCompletion(engine: Engine, promptIds: readonly number[], opts: RunOptions): Promise<RunResult> {
  if (promptIds.length === 0) return Promise.reject(new Error('completion prompt is empty (no tokens)'));
  if (!Number.isInteger(opts.maxTokens) || opts.maxTokens < 0) {
    return Promise.reject(new Error(`maxTokens must be a non-negative integer, got ${opts.maxTokens}`));
  }
  const nVocab = engine.summary.nVocab;
  return engine.exclusive(async (model, kv) => {
    const t0 = performance.now();
    const ctx = model.contextLength;
    if (promptIds.length >= ctx) {
      throw new Error(`the completion prompt has ${promptIds.length} tokens but the context holds ${ctx}; lower the prompt budget`);
    }
    const signal = opts.signal;
    // Longest common prefix with the KV cache; the last prompt token is evaluated again for its logits.
    let same = 0;
    const limit = Math.min(promptIds.length, kv.length);
    while (same < limit && promptIds[same] === kv[same]) same++;
    const reused = Math.min(same, promptIds.length - 1);
    model.clearKv(reused);
    kv.length = reused;
    let logits: Float32Array | undefined;
    for (let pos = reused; pos < promptIds.length;) {
      if (signal?.aborted) break;
      const chunk = promptIds.slice(pos, pos + PREFILL_CHUNK);
      logits = await model.evalAsync(Int32Array.from(chunk), pos);
      kv.push(...chunk);
      pos += chunk.length;
    }
    const t1 = performance.now();
    const deadline = t1 + (opts.timeLimitMs ?? Infinity);
    const tokens: number[] = [];
    const decoder = engine.tokenizer.createStreamDecoder();
    let text = '';
    let steps = 0;
    let drafted = 0;
    let accepted = 0;
    const finish = (stopReason: CompletionStopReason): RunResult => {
      if (stopReason !== 'cancelled') text += decoder.flush();
      return {
        text, tokens, promptTokens: promptIds.length, reusedTokens: reused, generatedTokens: tokens.length,
        promptMs: t1 - t0, generateMs: performance.now() - t1, decodeSteps: steps,
        draftedTokens: drafted, acceptedDraftTokens: accepted, stopReason,
      };
    };
    if (logits === undefined) return finish('cancelled');
    const history = [...promptIds];
    /** Takes a greedy token; returns why generation ends now, or undefined to go on. */
    const take = (id: number): CompletionStopReason | undefined => {
      if (opts.stopIds.has(id)) return 'eos';
      tokens.push(id);
      history.push(id);
      text += decoder.push(id);
      if (opts.shouldStop?.(text)) return 'rule';
      if (tokens.length >= opts.maxTokens) return 'length';
      return undefined;
    };
    if (opts.maxTokens === 0) return finish('length');
    let next = argmax(logits, 0, nVocab);
    for (;;) {
      const reason = take(next);
      if (reason) return finish(reason);
      if (signal?.aborted) return finish('cancelled');
      if (performance.now() >= deadline) return finish('time');
      if (kv.length + 1 >= ctx) return finish('length');
      const room = Math.min(opts.speculate ?? 0, opts.maxTokens - tokens.length - 1, ctx - kv.length - 2);
      const draft = room > 0 ? findDraft(history, room, DEFAULT_DRAFT) : [];
      const base = kv.length;
      const batch = [next, ...draft];
      const out = await model.evalAsync(Int32Array.from(batch), base, draft.length > 0);
      kv.push(...batch);
      steps++;
      if (draft.length === 0) {
        next = argmax(out, 0, nVocab);
        continue;
      }
      drafted += draft.length;
      // Row j holds the logits after batch[j]; draft[j] stands if it is row j's greedy token.
      let kept = 0;
      let ended: CompletionStopReason | undefined;
      for (; kept < draft.length; kept++) {
        const predicted = argmax(out, kept * nVocab, nVocab);
        if (predicted !== draft[kept]) break;
        accepted++;
        ended = take(predicted);
        if (ended) break;
      }
      // Keep the KV of `next` and of the drafts that stood (a stop token is not kept).
      const keep = base + 1 + (ended === 'eos' ? kept : ended ? kept + 1 : kept);
      if (kv.length > keep) {
        model.clearKv(keep);
        kv.length = keep;
      }
      if (ended) return finish(ended);
      next = argmax(out, kept * nVocab, nVocab);
    }
  }, opts.slot);
}
