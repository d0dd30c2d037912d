// Token sampling: repetition penalty, then top-k, top-p and min-p on the raw logits, then
// temperature and a draw from a seeded PRNG (llama.cpp's default chain order). Temperature 0 is
// greedy (argmax after the penalty). The same options and seed give the same tokens.
import type { SamplingOptions } from './types';
import { seededRandom } from '../model/seeded-random';
import { nativeKernels } from '../native/model';

export interface ResolvedSampling {
  temperature: number;
  topK: number;
  topP: number;
  minP: number;
  repeatPenalty: number;
  repeatLastN: number;
  seed: number;
}

/** llama.cpp's defaults, so the CLI behaves like llama-cli when nothing is given. */
export const DEFAULT_SAMPLING: Omit<ResolvedSampling, 'seed'> = {
  temperature: 0.8,
  topK: 40,
  topP: 0.95,
  minP: 0.05,
  repeatPenalty: 1.0,
  repeatLastN: 64,
};

export class SamplingOptionError extends Error {}

/**
 * Logits with NaN or ±Inf: the weights (or a kernel) are broken. Sampling them would pick a fixed
 * token forever (argmax of NaNs is the first id: "!!!!" in the editor), so the request fails.
 */
export class NonFiniteLogitsError extends Error {}

/**
 * Greedy sampling's pick from a logits row: the largest logit's id, the first on ties (as
 * `argmax`). One native SIMD pass finds it and checks every logit is finite: the two JS passes it
 * replaces took 270 µs together over a 152k vocabulary (12 µs native at AVX-512), ~5 % of a 0.5B
 * model's decode step at two threads. Throws NonFiniteLogitsError (assertFiniteLogits's message) for NaN or ±Inf.
 */
export function greedyPick(logits: Float32Array, position: number): number {
  const id = nativeKernels().argmaxFinite(logits);
  if (id < 0) assertFiniteLogits(logits, position);
  return id;
}

/** Throws NonFiniteLogitsError naming how many logits are not finite and at which position. Costs one pass over the vocabulary. */
export function assertFiniteLogits(logits: Float32Array, position: number): void {
  let bad = 0, first = -1;
  for (let i = 0; i < logits.length; i++) {
    // x - x is 0 for every finite x and NaN for NaN and ±Inf.
    const v = logits[i]!;
    if (v - v !== 0) { bad++; if (first < 0) first = i; }
  }
  if (bad) {
    throw new NonFiniteLogitsError(`the model produced ${bad} non-finite logits of ${logits.length} (first at token id ${first}) at position ${position}: the weights are corrupt or a kernel failed; run \`fulcrum inspect --check FILE\` to find a damaged tensor`);
  }
}

function check(name: string, v: number, lo: number, hi: number): number {
  if (!Number.isFinite(v) || v < lo || v > hi) throw new SamplingOptionError(`${name} must be in [${lo}, ${hi}], got ${v}`);
  return v;
}

export function resolveSampling(opts: SamplingOptions): ResolvedSampling {
  const d = DEFAULT_SAMPLING;
  return {
    temperature: check('temperature', opts.temperature ?? d.temperature, 0, 100),
    topK: Math.floor(check('topK', opts.topK ?? d.topK, 0, 1 << 24)),
    topP: check('topP', opts.topP ?? d.topP, 0, 1),
    minP: check('minP', opts.minP ?? d.minP, 0, 1),
    repeatPenalty: check('repeatPenalty', opts.repeatPenalty ?? d.repeatPenalty, 0.01, 100),
    repeatLastN: Math.floor(check('repeatLastN', opts.repeatLastN ?? d.repeatLastN, 0, 1 << 20)),
    seed: Math.floor(check('seed', opts.seed ?? (Math.random() * 0x100000000) >>> 0, 0, 2 ** 53)) >>> 0,
  };
}

/** The engine's seeded PRNG (engine/model/seeded-random.ts); next() is uniform in [0, 1). */
export class Prng {
  readonly next: () => number;
  constructor(seed: number) {
    this.next = seededRandom(seed);
  }
}

export function argmax(logits: ArrayLike<number>): number {
  let best = 0;
  let bestV = -Infinity;
  for (let i = 0; i < logits.length; i++) {
    const v = logits[i]!;
    if (v > bestV) {
      bestV = v;
      best = i;
    }
  }
  return best;
}

/**
 * llama.cpp's repetition penalty: each distinct token among the last `lastN` of `history` has
 * its logit divided by `penalty` when positive, multiplied when negative. Modifies `logits`.
 */
export function applyRepeatPenalty(logits: Float32Array, history: readonly number[], penalty: number, lastN: number): void {
  if (penalty === 1 || lastN === 0) return;
  const seen = new Set<number>();
  for (let i = Math.max(0, history.length - lastN); i < history.length; i++) {
    const id = history[i]!;
    if (id < 0 || id >= logits.length || seen.has(id)) continue;
    seen.add(id);
    const v = logits[id]!;
    logits[id] = v > 0 ? v / penalty : v * penalty;
  }
}

/** The k largest logits' ids, highest first (k ≥ vocabulary: all, sorted). */
export function topKIds(logits: Float32Array, k: number): number[] {
  const n = logits.length;
  if (k <= 0 || k >= n) {
    const ids = Array.from({ length: n }, (_, i) => i);
    return ids.sort((a, b) => logits[b]! - logits[a]! || a - b);
  }
  // Min-heap of the best k seen so far (root = the weakest of them).
  const heap: number[] = [];
  const less = (a: number, b: number) => logits[a]! < logits[b]! || (logits[a] === logits[b] && a > b);
  const down = (i: number) => {
    for (;;) {
      const l = 2 * i + 1, r = l + 1;
      let m = i;
      if (l < heap.length && less(heap[l]!, heap[m]!)) m = l;
      if (r < heap.length && less(heap[r]!, heap[m]!)) m = r;
      if (m === i) return;
      [heap[i], heap[m]] = [heap[m]!, heap[i]!];
      i = m;
    }
  };
  for (let id = 0; id < n; id++) {
    if (heap.length < k) {
      heap.push(id);
      for (let i = heap.length - 1; i > 0;) {
        const p = (i - 1) >> 1;
        if (!less(heap[i]!, heap[p]!)) break;
        [heap[i], heap[p]] = [heap[p]!, heap[i]!];
        i = p;
      }
    } else if (less(heap[0]!, id)) {
      heap[0] = id;
      down(0);
    }
  }
  return heap.sort((a, b) => logits[b]! - logits[a]! || a - b);
}

export class Sampler {
  readonly options: ResolvedSampling;
  private readonly rng: Prng;

  constructor(opts: SamplingOptions) {
    this.options = resolveSampling(opts);
    this.rng = new Prng(this.options.seed);
  }

  /** Greedy (argmax after the penalty): the same logits and history always give the same token. */
  get greedy(): boolean {
    return this.options.temperature <= 0;
  }

  /** Picks the next token. `logits` is modified (penalty applied); `history` is prompt + generated ids. */
  sample(logits: Float32Array, history: readonly number[]): number {
    const o = this.options;
    if (o.temperature <= 0) {
      // The penalty keeps a non-finite logit non-finite, so checking after it names the same ones.
      applyRepeatPenalty(logits, history, o.repeatPenalty, o.repeatLastN);
      return greedyPick(logits, history.length);
    }
    assertFiniteLogits(logits, history.length);
    applyRepeatPenalty(logits, history, o.repeatPenalty, o.repeatLastN);

    // Candidates, highest first.
    let ids = topKIds(logits, o.topK);
    const maxLogit = logits[ids[0]!]!;
    // Probabilities before temperature, for top-p and min-p (llama.cpp applies both to the raw
    // distribution and the temperature afterwards).
    let probs = ids.map((id) => Math.exp(logits[id]! - maxLogit));
    let sum = probs.reduce((a, b) => a + b, 0);
    if (o.topP < 1) {
      let acc = 0;
      let keep = ids.length;
      for (let i = 0; i < ids.length; i++) {
        acc += probs[i]! / sum;
        if (acc >= o.topP) {
          keep = i + 1;
          break;
        }
      }
      ids = ids.slice(0, keep);
      probs = probs.slice(0, keep);
    }
    if (o.minP > 0) {
      // probs[0] is the largest (= 1 after the max shift).
      let keep = 1;
      while (keep < ids.length && probs[keep]! >= o.minP) keep++;
      ids = ids.slice(0, keep);
      probs = probs.slice(0, keep);
    }
    // Temperature, then draw.
    const weights = ids.map((id) => Math.exp((logits[id]! - maxLogit) / o.temperature));
    sum = weights.reduce((a, b) => a + b, 0);
    let r = this.rng.next() * sum;
    for (let i = 0; i < ids.length; i++) {
      r -= weights[i]!;
      if (r < 0) return ids[i]!;
    }
    return ids[ids.length - 1]!;
  }
}
