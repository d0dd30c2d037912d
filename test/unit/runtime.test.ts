// The runtime on the real stories260K model: generation, stop rules, cancellation, KV prefix
// reuse, and the native model's refusals (bad tokens, unsupported tensor types, memory).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';

import { readGguf } from '../../engine/model/gguf';
import { readHparams } from '../../engine/model/hparams';
import { Engine, nativeConfig } from '../../engine/runtime/engine';
import { createNativeModel } from '../../engine/native/model';

const MODEL = path.resolve(__dirname, '../../../shared/models/stories260K.gguf');
const skip = existsSync(MODEL) ? false : `shared model missing: ${MODEL}`;

test('generate: greedy story, streamed text equals the result', { skip }, async () => {
  const engine = await Engine.load(MODEL, { threads: 1, contextLength: 256 });
  try {
    assert.equal(engine.summary.architecture, 'llama');
    assert.equal(engine.summary.nLayers, 5);
    assert.equal(engine.layers().filter((l) => l.index >= 0).length, 5);
    let streamed = '';
    const r = await engine.generate('Once upon a time', { maxTokens: 40, temperature: 0, onText: (t) => { streamed += t; } });
    assert.match(r.text, /Lily/);
    assert.equal(streamed, r.text);
    assert.equal(r.generatedTokens, 40);
    assert.equal(r.stopReason, 'length');
    assert.equal(r.promptTokens, 5);
    assert.ok(r.tokensPerSecond > 0);
    // Same prompt again: prefix reuse must not change the result.
    const again = await engine.generate('Once upon a time', { maxTokens: 40, temperature: 0 });
    assert.deepEqual(again.tokens, r.tokens);
    // A prompt that extends the previous one continues identically to a cold run.
    const ext = 'Once upon a time' + r.text.slice(0, 20);
    const warm = await engine.generate(ext, { maxTokens: 10, temperature: 0 });
    const cold = await Engine.load(MODEL, { threads: 2, contextLength: 256 });
    try {
      const coldR = await cold.generate(ext, { maxTokens: 10, temperature: 0 });
      assert.deepEqual(warm.tokens, coldR.tokens);
    } finally {
      cold.dispose();
    }
  } finally {
    engine.dispose();
  }
});

test('generate: stop strings, sampling with a seed, cancellation, context limits', { skip }, async () => {
  const engine = await Engine.load(MODEL, { threads: 1, contextLength: 64 });
  try {
    const r = await engine.generate('Once upon a time', { maxTokens: 40, temperature: 0, stop: ['Lily'] });
    assert.equal(r.stopReason, 'stop');
    assert.ok(!r.text.includes('Lily'));
    assert.match(r.text, /named $/);

    const a = await engine.generate('Once upon a time', { maxTokens: 20, temperature: 1, seed: 11 });
    const b = await engine.generate('Once upon a time', { maxTokens: 20, temperature: 1, seed: 11 });
    assert.deepEqual(a.tokens, b.tokens);

    engine.setProfiling(true);
    await engine.generate('Once upon a time', { maxTokens: 3, temperature: 0 });
    const prof = engine.opProfile();
    engine.setProfiling(false);
    const matmuls = prof.filter((o) => o.kind === 'matmul');
    assert.equal(matmuls.length, 5 * 7 + 1, 'q, k, v, o, gate, up, down per layer + output');
    assert.ok(matmuls.every((o) => o.calls >= 1 && o.ns > 0 && typeof o.weight === 'string'));
    assert.ok(prof.some((o) => o.kind === 'attention' && o.layer === 4));

    const ac = new AbortController();
    let n = 0;
    const c = await engine.generate('Once upon a time', {
      maxTokens: 50, temperature: 0, signal: ac.signal,
      onText: () => { if (++n === 3) ac.abort(); },
    });
    assert.equal(c.stopReason, 'cancelled');
    assert.ok(c.generatedTokens <= 4, `generated ${c.generatedTokens} after abort`);

    const pre = new AbortController();
    pre.abort();
    const none = await engine.generate('Once upon a time', { maxTokens: 5, signal: pre.signal });
    assert.equal(none.stopReason, 'cancelled');
    assert.equal(none.generatedTokens, 0);

    const full = await engine.generate('Once upon a time', { maxTokens: 500, temperature: 0 });
    assert.ok(full.promptTokens + full.generatedTokens <= 65);
    assert.ok(full.stopReason === 'context' || full.stopReason === 'eos', full.stopReason);

    const long = 'the cat sat on the mat and '.repeat(20);
    await assert.rejects(engine.generate(long, { maxTokens: 5 }), /prompt has \d+ tokens but the context holds 64/);
  } finally {
    engine.dispose();
  }
});

test('prefill in chunks, token by token and in one batch give the same logits', { skip }, async () => {
  const engine = await Engine.load(MODEL, { threads: 2, contextLength: 512 });
  try {
    const text = 'Once upon a time, there was a little girl named Lily. She loved to play outside in the park. '.repeat(5);
    const tokens = engine.tokenizer.encode(text, { addBos: true });
    assert.ok(tokens.length > 130, `${tokens.length} tokens`);
    const chunked = await engine.logits(tokens); // evaluated 64 tokens per call
    const file = readGguf(MODEL);
    const m = createNativeModel(MODEL, file.tensors.map((t) => ({ name: t.name, type: t.type, dims: t.dims, offset: t.absOffset })),
      nativeConfig(file, readHparams(file), 512, 1));
    try {
      const batch = m.eval(Int32Array.from(tokens), 0);
      m.clearKv(0);
      let stepwise = new Float32Array();
      for (let i = 0; i < tokens.length; i++) stepwise = m.eval(Int32Array.of(tokens[i]!), i);
      let d1 = 0, d2 = 0;
      for (let i = 0; i < batch.length; i++) {
        d1 = Math.max(d1, Math.abs(batch[i]! - chunked[i]!));
        d2 = Math.max(d2, Math.abs(batch[i]! - stepwise[i]!));
      }
      // Chunked prefill does the same arithmetic per token. Token-by-token decode normalises the
      // softmax per KV chunk and merges (flash-decoding), so a probability now and then rounds
      // to the neighbouring f16 value; on this head_dim-8 model that moves logits by ~1e-3.
      assert.ok(d1 < 1e-5, `chunked vs batch ${d1}`);
      assert.ok(d2 < 5e-3, `stepwise vs batch ${d2}`);
    } finally {
      m.dispose();
    }
  } finally {
    engine.dispose();
  }
});

test('native model: errors name the problem and never crash', { skip }, async () => {
  const file = readGguf(MODEL);
  const hp = readHparams(file);
  const tensors = file.tensors.map((t) => ({ name: t.name, type: t.type, dims: t.dims, offset: t.absOffset }));
  const cfg = nativeConfig(file, hp, 32, 1);

  const m = createNativeModel(MODEL, tensors, cfg);
  assert.throws(() => m.eval(Int32Array.of(1, 9999), 0), /token 9999 at index 1 is outside the vocabulary \[0, 512\)/);
  assert.throws(() => m.eval(Int32Array.of(1), 5), /gap/);
  assert.throws(() => m.eval(new Int32Array(40).fill(1), 0), /exceed the context length 32/);
  const all = m.eval(Int32Array.of(1, 403, 407), 0, true);
  assert.equal(all.length, 3 * 512);
  const last = await m.evalAsync(Int32Array.of(1, 403, 407), 0);
  assert.deepEqual(Array.from(last), Array.from(all.subarray(2 * 512)));
  const p = m.evalAsync(Int32Array.of(261), 3);
  assert.throws(() => m.eval(Int32Array.of(261), 3), /already running/);
  await p;
  assert.equal(m.nPast, 4);
  m.clearKv(1);
  assert.equal(m.nPast, 1);
  m.dispose();
  assert.throws(() => m.eval(Int32Array.of(1), 0), /disposed/);

  const q2k = tensors.map((t) => (t.name === 'blk.2.ffn_up.weight' ? { ...t, type: 10 } : t));
  assert.throws(() => createNativeModel(MODEL, q2k, cfg), /blk\.2\.ffn_up\.weight.*Q2_K/);
  const outside = tensors.map((t) => (t.name === 'output.weight' ? { ...t, offset: file.fileSize - 10 } : t));
  assert.throws(() => createNativeModel(MODEL, outside, cfg), /output\.weight.*spans bytes/);
  assert.throws(() => createNativeModel(MODEL, tensors, { ...cfg, memoryLimitBytes: 1 << 20 }), /not enough memory: needs [\d.]+ MiB .* but 1\.0 MiB is available/);
  assert.throws(() => createNativeModel(MODEL, tensors.filter((t) => t.name !== 'blk.0.attn_k.weight'), cfg), /'blk\.0\.attn_k\.weight' is missing/);
  assert.throws(() => createNativeModel(MODEL, tensors, { ...cfg, nHeads: 7 }), /shape|multiple/);
});
