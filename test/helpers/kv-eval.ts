// Shared by the KV cache tests (test/unit/kv-cache.test.ts, test/unit/kv-q8_0.test.ts): token
// ids and a prompt evaluated in pieces, every position's logits kept.
import assert from 'node:assert/strict';
import type { NativeModel } from '../../engine/native/model';

/** Deterministic token ids in [3, 300). */
export function kvTestTokens(n: number, seed: number): Int32Array {
  let s = seed >>> 0;
  return Int32Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return 3 + (s % 297);
  });
}

/** Evaluates `toks` from position `start` in consecutive pieces of the given sizes; the logits of every position. */
export function evalPieces(m: NativeModel, toks: Int32Array, start: number, sizes: number[], nVocab: number): Float32Array {
  assert.equal(sizes.reduce((a, b) => a + b, 0), toks.length);
  const out = new Float32Array(toks.length * nVocab);
  let done = 0;
  for (const n of sizes) {
    out.set(m.eval(toks.subarray(done, done + n), start + done, true), done * nVocab);
    done += n;
  }
  return out;
}
