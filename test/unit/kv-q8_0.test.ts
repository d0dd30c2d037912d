// The Q8_0 KV cache (kvFormat 'Q8_0', native KvFormat::Q8_0): what test/unit/kv-cache.test.ts
// asks of the F16 cache holds for it too — logits do not depend on the page size, on how a
// prompt is split into evaluations or on the thread count (its kernels keep the F16 kernels'
// sums and chains, so decode equals prefill bit for bit) — its pages take 34 bytes per 32 values,
// moving positions (shiftKv) re-quantizes the rotated keys, and what it cannot store is refused
// with the reason. A tiny synthetic llama with F32 weights (4 query heads over 2 KV heads of 32:
// one Q8_0 block per row), so only the cache differs between runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';

import { GgmlType } from '../../engine/model/ggml-types';
import { readGguf } from '../../engine/model/gguf';
import { readHparams } from '../../engine/model/hparams';
import { writeSyntheticModel } from '../../engine/model/synthetic';
import { nativeConfig } from '../../engine/runtime/engine';
import { createNativeModel, type NativeModel } from '../../engine/native/model';
import { tempDir } from '../helpers/shared';
import { evalPieces as evalPiecesOf, kvTestTokens as tokens } from '../helpers/kv-eval';

const CONTEXT = 500;
const N_LAYERS = 2, N_KV_HEADS = 2, HEAD_DIM = 32;

const { dir, cleanup } = tempDir('fulcrum-kvq8-');
process.on('exit', cleanup);
const MODEL = path.join(dir, 'tiny32.gguf');
writeSyntheticModel(MODEL, {
  architecture: 'llama', nLayers: N_LAYERS, nEmbd: 128, nHeads: 4, nKvHeads: N_KV_HEADS, nFf: 192, nVocab: 300,
  contextLength: 512, weightType: GgmlType.F32, seed: 12, weightStd: 0.2,
});
const file = readGguf(MODEL);
const hp = readHparams(file);
const tensors = file.tensors.map((t) => ({ name: t.name, type: t.type, dims: t.dims, offset: t.absOffset }));
const evalPieces = (m: NativeModel, toks: Int32Array, start: number, sizes: number[]): Float32Array => evalPiecesOf(m, toks, start, sizes, hp.nVocab);

function load(kvFormat: 'F16' | 'Q8_0', kvPageTokens = 64, threads = 1): NativeModel {
  return createNativeModel(MODEL, tensors, { ...nativeConfig(file, hp, CONTEXT, threads), batchSize: 128, kvPageTokens, kvFormat });
}

function assertSame(actual: Float32Array, expected: Float32Array, what: string): void {
  assert.equal(actual.length, expected.length, what);
  for (let i = 0; i < actual.length; i++) {
    if (!Object.is(actual[i], expected[i])) assert.fail(`${what}: logit ${i % hp.nVocab} of position ${Math.floor(i / hp.nVocab)} is ${actual[i]}, expected ${expected[i]}`);
  }
}

function relativeL2(a: Float32Array, b: Float32Array): number {
  let num = 0, den = 0;
  for (let i = 0; i < a.length; i++) { num += (a[i]! - b[i]!) ** 2; den += a[i]! ** 2; }
  return Math.sqrt(num / den);
}

const PROMPT = tokens(450, 5);
const PIECES = [1, 37, 100, 63, 63, 1, 127, 58];

test('Q8_0 KV: logits do not depend on the page size, the prompt split or the threads', () => {
  const ref = load('Q8_0', 4096);
  const whole = evalPieces(ref, PROMPT, 0, [PROMPT.length]);
  ref.dispose();
  for (const [pages, threads] of [[64, 1], [24, 1], [8, 1], [64, 2], [24, 2]] as const) {
    const m = load('Q8_0', pages, threads);
    try {
      assert.equal(m.kvFormat, 'Q8_0');
      assertSame(evalPieces(m, PROMPT, 0, PIECES), whole, `pages of ${pages}, ${threads} thread(s), prompt in pieces`);
      // Decode steps one token at a time over the same positions.
      m.clearKv(300);
      const steps = evalPieces(m, PROMPT.subarray(300), 300, Array.from({ length: 150 }, () => 1));
      assertSame(steps, whole.subarray(300 * hp.nVocab), `pages of ${pages}, ${threads} thread(s), decode steps`);
    } finally {
      m.dispose();
    }
  }
});

test('Q8_0 KV: pages of 34 bytes per 32 values; logits close to the F16 cache\'s, not equal', () => {
  const f16 = load('F16'), q8 = load('Q8_0');
  try {
    assert.equal(f16.kvFormat, 'F16');
    assert.equal(f16.kvBytes, N_LAYERS * 2 * CONTEXT * N_KV_HEADS * HEAD_DIM * 2);
    assert.equal(q8.kvBytes, N_LAYERS * 2 * CONTEXT * N_KV_HEADS * (HEAD_DIM / 32) * 34);
    const a = f16.eval(PROMPT, 0, true), b = q8.eval(PROMPT, 0, true);
    // One page of 64 positions per layer: K then V of 2 heads × 64 rows of 34 bytes, each half
    // rounded up to 64 bytes (4352 → 4352).
    assert.equal(q8.kvBytesInUse, Math.ceil(PROMPT.length / 64) * N_LAYERS * 2 * Math.ceil((64 * N_KV_HEADS * 34) / 64) * 64);
    const d = relativeL2(a, b);
    assert.ok(d > 0 && d < 0.05, `Q8_0 vs F16 logits: relative L2 ${d}`);
  } finally {
    f16.dispose();
    q8.dispose();
  }
});

test('Q8_0 KV: shiftKv moves positions with re-quantized keys, as close to a fresh run as the F16 cache', () => {
  // 200 tokens at positions 0..199; the 40 at 80..119 are deleted by moving the last 80 left
  // (their keys re-rotated to positions 80..159); the next logits are compared with a fresh
  // evaluation of the same 160 tokens.
  const a = tokens(200, 31), next = tokens(1, 33);
  const distance = (kvFormat: 'F16' | 'Q8_0'): number => {
    const shifted = load(kvFormat), fresh = load(kvFormat);
    try {
      shifted.eval(a, 0);
      shifted.shiftKv(120, 200, -40);
      shifted.clearKv(160);
      const got = shifted.eval(next, 160, false);
      fresh.eval(new Int32Array([...a.subarray(0, 80), ...a.subarray(120)]), 0);
      return relativeL2(fresh.eval(next, 160, false), got);
    } finally {
      shifted.dispose();
      fresh.dispose();
    }
  };
  const f16 = distance('F16'), q8 = distance('Q8_0');
  // Not exact either way: the moved positions' KV was computed after the deleted tokens.
  assert.ok(f16 > 0 && q8 > 0, `shifted KV equals a fresh run (F16 ${f16}, Q8_0 ${q8})`);
  assert.ok(q8 < 2 * f16 + 0.05, `Q8_0 shifted vs fresh ${q8}, F16 ${f16}`);
  console.log(`  shifted vs fresh, relative L2: F16 ${f16.toExponential(2)}, Q8_0 ${q8.toExponential(2)}`);
});

test('Q8_0 KV: what it cannot store is refused with the reason', () => {
  assert.throws(() => createNativeModel(MODEL, tensors, { ...nativeConfig(file, hp, CONTEXT, 1), kvFormat: 'Q4_0' as 'Q8_0' }),
    /'kvFormat' must be 'F16' or 'Q8_0', got 'Q4_0'/);
  // Head size 16: not a whole Q8_0 block.
  const small = path.join(dir, 'tiny16.gguf');
  writeSyntheticModel(small, {
    architecture: 'llama', nLayers: 1, nEmbd: 64, nHeads: 4, nKvHeads: 2, nFf: 96, nVocab: 300, contextLength: 64, weightType: GgmlType.F32, seed: 1, weightStd: 0.2,
  });
  const f = readGguf(small), h = readHparams(f);
  assert.throws(() => createNativeModel(small, f.tensors.map((t) => ({ name: t.name, type: t.type, dims: t.dims, offset: t.absOffset })), { ...nativeConfig(f, h, 64, 1), kvFormat: 'Q8_0' }),
    /Q8_0 KV cache needs a head size that is a multiple of 32 up to 256.*is 16: use the F16 KV cache/);
});
