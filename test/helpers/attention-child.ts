// Child process of test/unit/attention.test.ts, run once per ISA (FULCRUM_ISA set by the parent)
// and KV cache format (FULCRUM_TEST_KV_FORMAT: F16, the default, or Q8_0):
// runs kernels.attention (the executor's attention over a paged KV cache) for many shapes,
// prompt lengths and start positions, and prints one JSON line with, per case, how prefill
// compares with decode of the same tokens one at a time, with other page sizes, thread counts and
// context sizes (all must be bit-identical), and with a float64 reference.
import { loadAddon } from '../../engine/native/addon';

interface Kernels {
  attention(q: Float32Array, k: Float32Array, v: Float32Array, nHeads: number, nKvHeads: number, headDim: number,
    pageTokens: number, threads: number, context?: number, kvFormat?: KvFormat): Float32Array;
  attentionBlocked(headDim: number): boolean;
  isaLevel(): string;
}

export interface AttentionShapeCase { nHeads: number; nKvHeads: number; headDim: number }
export type KvFormat = 'F16' | 'Q8_0';

export interface AttentionCase extends AttentionShapeCase {
  nTokens: number;
  pos0: number;
  /** Whether this ISA takes the blocked prefill kernels for this head size. */
  blocked: boolean;
  /** Prefill rows equal decode of each token alone, bit for bit. */
  sameAsDecode: boolean;
  /** Prefill is bit-identical with pages of 5 and of 4096 positions (the default run uses 64). */
  samePages: boolean;
  /** ... with 2 threads, and with a context long enough to shrink the token block. */
  sameThreads: boolean;
  sameLongContext: boolean;
  /** max |prefill − float64 reference| over all outputs. */
  refError: number;
}

// Shapes: the 0.5B bench model's (group of 7, 64), multi-head (group 1), sizes that take the
// unrolled (64, 128, 256) and the run-time (16, 80, 96) register layouts, with every output
// column tile width (64/32/16 columns on AVX-512, 16/8 on AVX2), and 8, which has none on
// AVX-512 (the per-token kernels then run, as for stories260K).
export const SHAPES: AttentionShapeCase[] = [
  { nHeads: 14, nKvHeads: 2, headDim: 64 },
  { nHeads: 4, nKvHeads: 4, headDim: 16 },
  { nHeads: 6, nKvHeads: 2, headDim: 80 },
  { nHeads: 6, nKvHeads: 3, headDim: 96 },
  { nHeads: 4, nKvHeads: 2, headDim: 128 },
  { nHeads: 2, nKvHeads: 2, headDim: 256 },
  { nHeads: 4, nKvHeads: 2, headDim: 8 },
  // One query head per KV head (MHA, deepseek-coder-1.3B's shape), and a group that two threads
  // split into single heads: decode's V side for one query head (pv_one).
  { nHeads: 2, nKvHeads: 2, headDim: 128 },
  { nHeads: 2, nKvHeads: 1, headDim: 64 },
  // Decode's V side takes a group's query heads in as few register tiles as fit, as even as can
  // be (pv_f16): 6 heads in one tile at AVX-512, 16 in tiles of 5, 5 and 6 (2-vector rows).
  { nHeads: 12, nKvHeads: 2, headDim: 64 },
  { nHeads: 16, nKvHeads: 1, headDim: 32 },
];
// Q8_0 takes head sizes in whole blocks of 32 up to 256: the shapes above that have one, and 160
// (above AVX2's blocked K kernel: the per-token kernel there, a run-time trip count on AVX-512).
export const Q8_0_SHAPES: AttentionShapeCase[] = [...SHAPES.filter((s) => s.headDim % 32 === 0), { nHeads: 4, nKvHeads: 2, headDim: 160 }];
export const TOKEN_COUNTS = Array.from({ length: 40 }, (_, i) => i + 1);
export const START_POSITIONS = [0, 37];

/**
 * Deterministic f16 values (so the reference sees exactly the kernel's inputs) in (-2, 2) with
 * full 11-bit significands and exponents spread over 2^-6..2^0, so that f32 sums of their
 * products really round: with short significands every sum would be exact and any summation
 * order would give the same bits, hiding a reordering from the bit-identity checks.
 */
function makeRng(seed: number): () => number {
  let s = seed >>> 0;
  const next = (): number => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0);
  return () => {
    const u = next() / 2 ** 32 * 2 - 1;
    return roundF16(u * 2 ** -(next() % 7));
  };
}

/** Round to the nearest f16 value (ties to even), as the kernel rounds probabilities. */
export function roundF16(x: number): number {
  if (x === 0 || !Number.isFinite(x)) return x;
  const a = Math.abs(x);
  const e = Math.max(Math.floor(Math.log2(a)), -14);
  const ulp = 2 ** (e - 10);
  const m = a / ulp;
  let r = Math.floor(m);
  const frac = m - r;
  if (frac > 0.5 || (frac === 0.5 && r % 2 === 1)) r += 1;
  return Math.sign(x) * r * ulp;
}

/**
 * What a Q8_0 cache stores for a row, as values: per block of 32, d = amax / 127 in f32, q =
 * round-half-even(x / d) (x times the f32 reciprocal), the value f16(d) · q (the kernels' d·q).
 */
export function q8_0Values(x: Float32Array): Float32Array {
  const out = new Float32Array(x.length);
  for (let b = 0; b < x.length; b += 32) {
    let amax = 0;
    for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[b + j]!));
    const d = Math.fround(amax / 127), id = d !== 0 ? Math.fround(1 / d) : 0, dh = roundF16(d);
    for (let j = 0; j < 32; j++) {
      const y = Math.fround(x[b + j]! * id);
      let q = Math.round(y);
      if (Math.abs(y - Math.trunc(y)) === 0.5) q = 2 * Math.round(y / 2);
      out[b + j] = dh * Math.max(-127, Math.min(127, q));
    }
  }
  return out;
}

/** Causal GQA attention in float64 with the kernel's roundings (q, k, v given as stored values; probabilities to f16). */
function reference(q: Float32Array, k: Float32Array, v: Float32Array, c: AttentionShapeCase, nTokens: number, pos0: number): Float64Array {
  const { nHeads, nKvHeads, headDim: hd } = c;
  const group = nHeads / nKvHeads;
  const out = new Float64Array(nTokens * nHeads * hd);
  const scale = 1 / Math.sqrt(hd);
  for (let i = 0; i < nTokens; i++) {
    const nKv = pos0 + i + 1;
    for (let h = 0; h < nHeads; h++) {
      const g = Math.floor(h / group);
      const s = new Float64Array(nKv);
      let mx = -Infinity;
      for (let t = 0; t < nKv; t++) {
        let dot = 0;
        for (let d = 0; d < hd; d++) dot += q[(i * nHeads + h) * hd + d]! * k[(t * nKvHeads + g) * hd + d]!;
        s[t] = dot * Math.fround(scale);
        mx = Math.max(mx, s[t]!);
      }
      let sum = 0;
      for (let t = 0; t < nKv; t++) sum += (s[t] = Math.exp(s[t]! - mx));
      for (let t = 0; t < nKv; t++) {
        const p = roundF16(s[t]! / sum);
        const o = (i * nHeads + h) * hd, vt = (t * nKvHeads + g) * hd;
        for (let d = 0; d < hd; d++) out[o + d] = out[o + d]! + p * v[vt + d]!;
      }
    }
  }
  return out;
}

function identical(a: Float32Array, b: Float32Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return false;
  return true;
}

function main(): void {
  const kernels = loadAddon<{ kernels: Kernels }>().kernels;
  const format: KvFormat = process.env.FULCRUM_TEST_KV_FORMAT === 'Q8_0' ? 'Q8_0' : 'F16';
  const cases: AttentionCase[] = [];
  let seed = 1;
  for (const shape of format === 'Q8_0' ? Q8_0_SHAPES : SHAPES) {
    const { nHeads, nKvHeads, headDim: hd } = shape;
    const qrow = nHeads * hd, kvrow = nKvHeads * hd;
    for (const pos0 of START_POSITIONS) {
      for (const nTokens of TOKEN_COUNTS) {
        const rng = makeRng(seed++);
        const nKv = pos0 + nTokens;
        const q = Float32Array.from({ length: nTokens * qrow }, rng);
        const k = Float32Array.from({ length: nKv * kvrow }, rng);
        const v = Float32Array.from({ length: nKv * kvrow }, rng);
        const run = (pages: number, threads: number, context?: number): Float32Array =>
          kernels.attention(q, k, v, nHeads, nKvHeads, hd, pages, threads, context, format);
        const out = run(64, 1);
        // Decode of token i alone: q row i against the first pos0 + i + 1 positions.
        const decode = new Float32Array(out.length);
        for (let i = 0; i < nTokens; i++) {
          const n = pos0 + i + 1;
          decode.set(kernels.attention(q.subarray(i * qrow, (i + 1) * qrow), k.subarray(0, n * kvrow), v.subarray(0, n * kvrow),
            nHeads, nKvHeads, hd, 64, 1, undefined, format), i * qrow);
        }
        const stored = (x: Float32Array): Float32Array => (format === 'Q8_0' ? q8_0Values(x) : x);
        const ref = reference(q, stored(k), stored(v), shape, nTokens, pos0);
        let refError = 0;
        for (let j = 0; j < out.length; j++) refError = Math.max(refError, Math.abs(out[j]! - ref[j]!));
        // A context of 80000 positions shrinks the token block (score rows per thread are capped at 4 MiB).
        cases.push({
          ...shape, nTokens, pos0, blocked: kernels.attentionBlocked(hd),
          sameAsDecode: identical(out, decode),
          samePages: identical(out, run(5, 1)) && identical(out, run(4096, 1)),
          sameThreads: identical(out, run(64, 2)),
          sameLongContext: identical(out, run(64, 1, Math.min(80_000, (1 << 24) / nHeads))),
          refError,
        });
      }
    }
  }
  process.stdout.write(JSON.stringify({ isa: kernels.isaLevel(), format, cases }) + '\n');
}

// Run only as the child process, not when the parent imports the shapes above.
if (require.main === module) main();
