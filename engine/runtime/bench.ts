// Throughput measurement of the native executor on one model file: prefill of a prompt of N
// tokens in batches, then M decode steps of one token each. Token ids are fixed pseudo-random
// ordinary ids (the text does not matter for speed; the same ids every run).
import { readGguf } from '../model/gguf';
import { readHparams, type ModelHparams } from '../model/hparams';
import { formatBytesPerElement } from '../model/shape';
import type { KvFormat } from './types';
import { createNativeModel } from '../native/model';
import { defaultThreads, nativeConfig, PREFILL_BATCH } from './native-config';
import { greedyPick } from './sampler';
import { inlineBudgetError, withInlineSteps } from './inline-steps';

export interface BenchOptions {
  threads?: number;
  promptTokens: number;
  genTokens: number;
  /** KV cache positions (default: prompt + gen + 1, the fewest the run needs). */
  contextLength?: number;
  /**
   * Called once the model is loaded ('loaded', before the warm-up) and once after the timed run
   * while it is still loaded ('done'): where a caller reads the process's memory at those points.
   */
  probe?: (stage: 'loaded' | 'done') => void;
  /** Stops the run between steps (a cancelled profile). */
  signal?: AbortSignal;
  /** As the engine's LoadOptions.inlineStepBudgetMs: the decode steps run where the engine's would. */
  inlineStepBudgetMs?: number;
  /** The KV cache's format (LoadOptions.kvFormat); default F16. */
  kvFormat?: KvFormat;
}

export interface BenchResult {
  prompt_tokens_per_s: number;
  gen_tokens_per_s: number;
  threads: number;
  /** Process-wide peak resident set (getrusage maxRSS): meaningful when the bench runs alone in its process. */
  peak_rss_bytes: number;
  /** KV cache positions and the cache's size in bytes (keys and values in the cache's format). */
  context_length: number;
  kv_bytes: number;
  prompt_tokens: number;
  gen_tokens: number;
  prompt_ms: number;
  gen_ms: number;
}

/** Deterministic token ids in [lo, hi). */
export function benchTokens(n: number, nVocab: number, seed = 12345): number[] {
  const lo = Math.min(100, Math.floor(nVocab / 4));
  const span = Math.max(1, nVocab - lo - 1);
  let s = seed >>> 0;
  return Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return lo + (s % span);
  });
}

/** Bytes of a KV cache of `contextLength` positions in `kvFormat` (default F16): keys and values, every layer. */
export function kvCacheBytes(hp: ModelHparams, contextLength: number, kvFormat: KvFormat = 'F16'): number {
  return hp.nLayers * 2 * contextLength * hp.nKvHeads * hp.headDim * formatBytesPerElement(kvFormat);
}

export async function benchModel(path: string, opts: BenchOptions): Promise<BenchResult> {
  const file = readGguf(path);
  const hp = readHparams(file);
  const threads = opts.threads ?? defaultThreads();
  const needed = opts.promptTokens + opts.genTokens + 1;
  const ctx = opts.contextLength ?? needed;
  if (!Number.isInteger(ctx) || ctx < needed) {
    throw new Error(`bench: context length ${ctx} is below the ${needed} positions a ${opts.promptTokens}-token prompt and ${opts.genTokens} decoded tokens need`);
  }
  const badBudget = inlineBudgetError(opts.inlineStepBudgetMs);
  if (badBudget) throw new Error(`bench: ${badBudget}`);
  const model = withInlineSteps(
    createNativeModel(
      path,
      file.tensors.map((t) => ({ name: t.name, type: t.type, dims: t.dims, offset: t.absOffset })),
      { ...nativeConfig(file, hp, ctx, threads), ...(opts.kvFormat && opts.kvFormat !== 'F16' ? { kvFormat: opts.kvFormat } : {}) },
    ),
    opts.inlineStepBudgetMs,
  );
  try {
    const kvBytes = kvCacheBytes(hp, ctx, opts.kvFormat);
    // The executor's own count must agree, or the memory comparison would rest on a wrong size.
    if (model.kvBytes !== kvBytes) throw new Error(`${path}: executor KV cache is ${model.kvBytes} bytes, hparams give ${kvBytes}`);
    opts.probe?.('loaded');
    const prompt = benchTokens(opts.promptTokens, hp.nVocab);
    // Warm-up: one short step pages in the weights so the first timed step is not a page-fault run.
    await model.evalAsync(Int32Array.from(prompt.slice(0, 1)), 0);
    model.clearKv(0);
    // One logits array for every step, as the engine's decode loops keep one (NativeModel.eval's `out`).
    const logitsOut = new Float32Array(hp.nVocab);
    const t0 = performance.now();
    let logits: Float32Array | undefined;
    for (let pos = 0; pos < prompt.length; pos += PREFILL_BATCH) {
      if (opts.signal?.aborted) throw new Error('bench: cancelled');
      logits = await model.evalAsync(Int32Array.from(prompt.slice(pos, pos + PREFILL_BATCH)), pos, false, logitsOut);
    }
    const t1 = performance.now();
    let pos = prompt.length;
    // Greedy, as the engine decodes at temperature 0 (the peer's bench samples greedily in C++ too).
    let next = logits ? greedyPick(logits, pos) : 1;
    for (let i = 0; i < opts.genTokens; i++) {
      if (opts.signal?.aborted) throw new Error('bench: cancelled');
      logits = await model.evalAsync(Int32Array.of(next), pos++, false, logitsOut);
      next = greedyPick(logits, pos);
    }
    const t2 = performance.now();
    opts.probe?.('done');
    return {
      prompt_tokens_per_s: opts.promptTokens > 0 ? (opts.promptTokens / (t1 - t0)) * 1000 : 0,
      gen_tokens_per_s: opts.genTokens > 0 ? (opts.genTokens / (t2 - t1)) * 1000 : 0,
      threads: model.threads,
      peak_rss_bytes: process.resourceUsage().maxRSS * 1024,
      context_length: ctx,
      kv_bytes: kvBytes,
      prompt_tokens: opts.promptTokens,
      gen_tokens: opts.genTokens,
      prompt_ms: t1 - t0,
      gen_ms: t2 - t1,
    };
  } finally {
    model.dispose();
  }
}
