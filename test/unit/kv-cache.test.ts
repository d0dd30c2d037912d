// The paged KV cache (native/src/model/kv_cache.h): results must not depend on how positions fall
// into pages or how a prompt is split into evaluations, memory must follow the positions held a
// page at a time, and cleared pages must be reused without their stale rows ever being read.
// A tiny synthetic llama (2 layers, 4 query heads over 2 KV heads of 16) keeps every case fast.
// Its weights are F32 so that logits can be compared bit for bit across different splits of a
// prompt: quantized matmuls round one row differently from a batch of rows (gemv vs gemm
// tiles), which has nothing to do with the cache but would blur the comparison.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';

import { GgmlType } from '../../engine/model/ggml-types';
import { readGguf } from '../../engine/model/gguf';
import { readHparams } from '../../engine/model/hparams';
import { writeSyntheticModel } from '../../engine/model/synthetic';
import { DEFAULT_PROMPT_BUDGET } from '../../engine/completion/budget';
import { DEFAULT_MAX_TOKENS } from '../../engine/completion/completer';
import { Engine, FIRST_REQUEST_KV_POSITIONS, nativeConfig } from '../../engine/runtime/engine';
import { createNativeModel, type NativeModel } from '../../engine/native/model';
import { tempDir } from '../helpers/shared';
import { evalPieces as evalPiecesOf, kvTestTokens as tokens } from '../helpers/kv-eval';

// Not a multiple of any page size used below, so the last page of a table is partly past the end.
const CONTEXT = 500;
const N_LAYERS = 2;
const KV_ROW = 2 * 16; // KV heads × head dim

const { dir, cleanup } = tempDir('fulcrum-kv-');
process.on('exit', cleanup);
const MODEL = path.join(dir, 'tiny.gguf');
writeSyntheticModel(MODEL, {
  architecture: 'llama', nLayers: N_LAYERS, nEmbd: 64, nHeads: 4, nKvHeads: 2, nFf: 96, nVocab: 300,
  contextLength: 512, weightType: GgmlType.F32, seed: 11, weightStd: 0.2,
});
const file = readGguf(MODEL);
const hp = readHparams(file);
const tensors = file.tensors.map((t) => ({ name: t.name, type: t.type, dims: t.dims, offset: t.absOffset }));
const evalPieces = (m: NativeModel, toks: Int32Array, start: number, sizes: number[]): Float32Array => evalPiecesOf(m, toks, start, sizes, hp.nVocab);

function load(kvPageTokens: number | undefined, threads = 1): NativeModel {
  const config = { ...nativeConfig(file, hp, CONTEXT, threads), batchSize: 128 };
  return createNativeModel(MODEL, tensors, kvPageTokens === undefined ? config : { ...config, kvPageTokens });
}

/** Bytes of one page: K then V of `p` positions of one layer, each rounded up to 64 bytes. */
function pageBytes(p: number): number {
  return 2 * Math.ceil((p * KV_ROW * 2) / 64) * 64;
}

function assertSameLogits(actual: Float32Array, expected: Float32Array, what: string): void {
  assert.equal(actual.length, expected.length, what);
  for (let i = 0; i < actual.length; i++) {
    if (actual[i] !== expected[i]) {
      assert.fail(`${what}: logit ${i % hp.nVocab} of position ${Math.floor(i / hp.nVocab)} is ${actual[i]}, expected ${expected[i]}`);
    }
  }
}

const PROMPT = tokens(450, 5);
// Pieces whose boundaries fall inside pages and on them (1, 38, 138, 201, 264, 265, 392 for
// pages of 64; most positions for pages of 24), with single-token (decode) steps mixed in.
const PIECES = [1, 37, 100, 63, 63, 1, 127, 58];

test('kv cache: logits do not depend on the page size or on how the prompt is split', () => {
  // Reference: one page covers the whole context, i.e. the cache is one contiguous array.
  const ref = load(4096);
  const whole = evalPieces(ref, PROMPT, 0, [PROMPT.length]);
  // Splitting the prompt changes nothing: every position's result is computed the same way.
  ref.clearKv(0);
  const refPieces = evalPieces(ref, PROMPT, 0, PIECES);
  assertSameLogits(refPieces, whole, 'one page, prompt in pieces vs whole');
  ref.dispose();
  for (const p of [undefined, 24, 8]) {
    const m = load(p);
    if (p !== undefined) assert.equal(m.kvPageTokens, p);
    assertSameLogits(evalPieces(m, PROMPT, 0, [PROMPT.length]), whole, `pages of ${m.kvPageTokens}, whole prompt`);
    m.clearKv(0);
    assertSameLogits(evalPieces(m, PROMPT, 0, PIECES), whole, `pages of ${m.kvPageTokens}, prompt in pieces`);
    m.dispose();
  }
});

test('kv cache: decode split across threads reads the same values through any page size', () => {
  // Two threads split decode into (chunk, KV head) units whose chunks start inside pages.
  const decodeSteps = Array.from({ length: 40 }, () => 1);
  const toks = tokens(300 + decodeSteps.length, 9);
  const run = (p: number): Float32Array => {
    const m = load(p, 2);
    try {
      return evalPieces(m, toks, 0, [300, ...decodeSteps]);
    } finally {
      m.dispose();
    }
  };
  const contiguous = run(4096);
  for (const p of [64, 24]) assertSameLogits(run(p), contiguous, `2 threads, pages of ${p}`);
  // And the chunked decode agrees with prefill of the same positions to float rounding.
  const m = load(64, 2);
  const prefill = evalPieces(m, toks, 0, [toks.length]);
  m.dispose();
  let worst = 0;
  for (let i = 300 * hp.nVocab; i < prefill.length; i++) worst = Math.max(worst, Math.abs(prefill[i]! - contiguous[i]!));
  assert.ok(worst < 1e-3, `decode vs prefill logits differ by ${worst}`);
});

test('kv cache: memory grows a page at a time, clearKv returns pages, which are reused', () => {
  const P = 64;
  const perPage = N_LAYERS * pageBytes(P);
  const m = load(P);
  try {
    assert.equal(m.kvPageTokens, P);
    assert.equal(m.kvBytes, N_LAYERS * 2 * CONTEXT * KV_ROW * 2);
    assert.equal(m.kvBytesInUse, 0, 'no page before the first write');
    assert.equal(m.kvBytesReserved, 0);
    const toks = tokens(CONTEXT, 3);
    // Decode steps one position at a time: a new page exactly when a position starts one.
    for (let pos = 0; pos < 2 * P + 3; pos++) {
      m.eval(toks.subarray(pos, pos + 1), pos);
      const pages = Math.ceil((pos + 1) / P);
      assert.equal(m.kvBytesInUse, pages * perPage, `after position ${pos}`);
      assert.equal(m.kvBytesReserved, pages * perPage, `reserved after position ${pos}`);
    }
    // A batch that spans several pages takes them all.
    m.eval(toks.subarray(2 * P + 3, 400), 2 * P + 3);
    assert.equal(m.kvBytesInUse, 7 * perPage);
    const high = m.kvBytesReserved;
    assert.equal(high, 7 * perPage);

    m.clearKv(200); // keeps positions 0..199: pages 0..3 (page 3 partly)
    assert.equal(m.nPast, 200);
    assert.equal(m.kvBytesInUse, 4 * perPage);
    assert.equal(m.kvBytesReserved, high, 'cleared pages stay allocated');
    m.clearKv(64); // exactly on a page boundary: page 1 onwards go
    assert.equal(m.kvBytesInUse, 1 * perPage);
    m.clearKv(300); // past nPast: nothing changes
    assert.equal(m.kvBytesInUse, 1 * perPage);

    // Growing again up to the old high-water mark allocates nothing.
    m.eval(toks.subarray(64, 448), 64);
    assert.equal(m.kvBytesInUse, 7 * perPage);
    assert.equal(m.kvBytesReserved, high);
    // The whole context: one page more (the last one partly past the end).
    m.eval(toks.subarray(448, CONTEXT), 448);
    assert.equal(m.kvBytesInUse, Math.ceil(CONTEXT / P) * perPage);
    assert.equal(m.kvBytesReserved, Math.ceil(CONTEXT / P) * perPage);
    // Re-evaluating from an earlier position drops the pages past the new end.
    m.eval(toks.subarray(10, 20), 10);
    assert.equal(m.nPast, 20);
    assert.equal(m.kvBytesInUse, 1 * perPage);
    m.clearKv(0);
    assert.equal(m.kvBytesInUse, 0);
    assert.equal(m.kvBytesReserved, Math.ceil(CONTEXT / P) * perPage);
  } finally {
    m.dispose();
  }
});

test('kv cache: after clearKv, re-evaluation over reused pages equals a fresh run', () => {
  const a = tokens(330, 21);
  const b = tokens(150, 22);
  for (const p of [64, 24]) {
    const reused = load(p);
    const fresh = load(p);
    try {
      reused.eval(a, 0); // fills pages with positions 0..329 of `a`
      reused.clearKv(70); // inside a page: its rows 70.. stay behind, stale
      const got = evalPieces(reused, b, 70, [1, 80, 1, 68]);
      fresh.eval(a.subarray(0, 70), 0);
      const want = evalPieces(fresh, b, 70, [1, 80, 1, 68]);
      assertSameLogits(got, want, `pages of ${p}`);
      assert.equal(reused.kvBytesInUse, fresh.kvBytesInUse);
      assert.ok(reused.kvBytesReserved > fresh.kvBytesReserved, 'the reused model kept its cleared pages');
    } finally {
      reused.dispose();
      fresh.dispose();
    }
  }
});

test('kv cache: a page size outside [8, 4096] is refused with its name', () => {
  assert.throws(() => load(4), /kv_page_tokens = 4 is outside \[8, 4096\]/);
  assert.throws(() => load(5000), /kv_page_tokens = 5000 is outside \[8, 4096\]/);
});

test('kv cache: prepareKv commits pages ahead of their first write without holding them, and changes no result', () => {
  const P = 64;
  const perPage = N_LAYERS * pageBytes(P);
  const prepared = load(P);
  const plain = load(P);
  try {
    prepared.prepareKv(130);
    assert.equal(prepared.kvBytesReserved, 3 * perPage, 'the pages of positions 0..129 are committed');
    assert.equal(prepared.kvBytesInUse, 0, 'none is held');
    assert.equal(prepared.nPast, 0);
    prepared.prepareKv(10); // less than committed: nothing changes
    assert.equal(prepared.kvBytesReserved, 3 * perPage);
    prepared.prepareKv(100_000); // clamped to the context
    assert.equal(prepared.kvBytesReserved, Math.ceil(CONTEXT / P) * perPage);
    const toks = tokens(200, 31);
    const got = evalPieces(prepared, toks, 0, [150, 1, 49]);
    const want = evalPieces(plain, toks, 0, [150, 1, 49]);
    assertSameLogits(got, want, 'prepared against plain');
    assert.equal(prepared.kvBytesInUse, plain.kvBytesInUse, 'the evaluation holds the same pages');
    assert.equal(prepared.kvBytesReserved, Math.ceil(CONTEXT / P) * perPage, 'and commits nothing more');
    assert.throws(() => prepared.prepareKv(-1), /prepareKv: positions -1 is negative/);
    assert.throws(() => prepared.prepareKv(10, 3), /prepareKv: sequence 3 is outside \[0, 1\)/);
    assert.throws(() => (prepared.prepareKv as (p: unknown) => void)('10'), /prepareKv\(positions: number, seq\?: number\)/);
  } finally {
    prepared.dispose();
    plain.dispose();
  }
});

test('kv cache: Engine.load commits the first request\'s KV (a default completion\'s positions), prepareKvPositions sets how many', async () => {
  const P = 64;
  const perPage = N_LAYERS * pageBytes(P);
  const byDefault = await Engine.load(MODEL, { threads: 1, contextLength: 2048, device: 'cpu', feedback: false });
  try {
    // A default completion: the 1024-token prompt budget and 64 generated tokens, 17 pages.
    assert.equal(FIRST_REQUEST_KV_POSITIONS, DEFAULT_PROMPT_BUDGET + DEFAULT_MAX_TOKENS, 'the runtime\'s figure follows the completion defaults');
    assert.equal(byDefault.kvBytesReserved(), Math.ceil(FIRST_REQUEST_KV_POSITIONS / P) * perPage);
    assert.equal(byDefault.kvBytesInUse(), 0);
  } finally {
    byDefault.dispose();
  }
  const short = await Engine.load(MODEL, { threads: 1, contextLength: CONTEXT, device: 'cpu', feedback: false });
  try {
    assert.equal(short.kvBytesReserved(), Math.ceil(CONTEXT / P) * perPage, 'clamped to the context');
  } finally {
    short.dispose();
  }
  const none = await Engine.load(MODEL, { threads: 1, contextLength: CONTEXT, device: 'cpu', feedback: false, prepareKvPositions: 0 });
  try {
    assert.equal(none.kvBytesReserved(), 0);
  } finally {
    none.dispose();
  }
  await assert.rejects(Engine.load(MODEL, { threads: 1, contextLength: CONTEXT, device: 'cpu', prepareKvPositions: -5 }), /prepareKvPositions must be a non-negative integer, got -5/);
  await assert.rejects(Engine.load(MODEL, { threads: 1, contextLength: CONTEXT, device: 'cpu', prepareKvPositions: 1.5 }), /prepareKvPositions must be a non-negative integer, got 1.5/);
});
