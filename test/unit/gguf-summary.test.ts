// Model summaries and per-layer weight bytes, on the real stories260K and a synthetic Q8_0 model.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { GgmlType } from '../../engine/model/ggml-types';
import { readGguf } from '../../engine/model/gguf/index';
import { kvBytesPerToken, layerSummaries, summarizeModel, tensorGroup } from '../../engine/model/summary';
import { writeSyntheticModel } from '../../engine/model/synthetic';
import { sharedPath, skipUnlessShared, tempDir } from '../helpers/shared';

const stories = sharedPath('models', 'stories260K.gguf');

test('stories260K summary: parameters, types, KV bytes per token', { skip: skipUnlessShared(stories) }, () => {
  const s = summarizeModel(readGguf(stories));
  assert.deepEqual(s, {
    path: stories, name: 'llama', architecture: 'llama', fileBytes: 1185376,
    // 2 x 64x512 (embedding, output) + 64 + 5 x (64x64 + 2 x 64x32 + 64x64 + 3 x 64x172 + 2 x 64)
    parameters: 292800,
    contextLength: 2048, trainingContextLength: 2048, nLayers: 5, nEmbd: 64, nHeads: 8, nKvHeads: 4, nFf: 172,
    nVocab: 512, tensorTypes: { F32: 48 },
    kvFormat: 'F16',
    kvBytesPerToken: 2 * 5 * 4 * 8 * 2,
  });
  assert.equal(summarizeModel(readGguf(stories), { contextLength: 100 }).contextLength, 100);
  // A Q8_0 cache: 34 bytes per 32 values.
  const q8 = summarizeModel(readGguf(stories), { kvFormat: 'Q8_0' });
  assert.equal(q8.kvFormat, 'Q8_0');
  assert.equal(q8.kvBytesPerToken, (2 * 5 * 4 * 8 * 34) / 32);
});

test('stories260K per-layer bytes grouped attention / ffn / norm / other', { skip: skipUnlessShared(stories) }, () => {
  const file = readGguf(stories);
  const layers = layerSummaries(file);
  assert.deepEqual(layers.map((l) => l.index), [-1, 0, 1, 2, 3, 4]);
  const outside = layers[0]!;
  assert.equal(outside.label, 'embedding & output');
  assert.deepEqual(outside.tensors.map((t) => t.name).sort(), ['output.weight', 'output_norm.weight', 'token_embd.weight']);
  assert.equal(outside.otherBytes, 2 * 64 * 512 * 4);
  assert.equal(outside.normBytes, 64 * 4);
  for (const l of layers.slice(1)) {
    assert.equal(l.label, `layer ${l.index}`);
    assert.equal(l.attentionBytes, (64 * 64 * 2 + 64 * 32 * 2) * 4);
    assert.equal(l.ffnBytes, 3 * 64 * 172 * 4);
    assert.equal(l.normBytes, 2 * 64 * 4);
    assert.equal(l.otherBytes, 0);
    assert.equal(l.totalBytes, l.attentionBytes + l.ffnBytes + l.normBytes);
    assert.equal(l.tensors.length, 9);
  }
  assert.equal(layers.reduce((s, l) => s + l.totalBytes, 0), file.tensors.reduce((s, t) => s + t.byteSize, 0));
});

test('tensor groups by llama.cpp name', () => {
  assert.equal(tensorGroup('attn_q.weight'), 'attention');
  assert.equal(tensorGroup('attn_k.bias'), 'attention');
  assert.equal(tensorGroup('attn_norm.weight'), 'norm');
  assert.equal(tensorGroup('ffn_norm.weight'), 'norm');
  assert.equal(tensorGroup('ffn_down.weight'), 'ffn');
  assert.equal(tensorGroup('token_embd.weight'), 'other');
});

test('synthetic qwen2 Q8_0: block-format bytes per layer, biases under attention, context capped at 4096', () => {
  const { dir, cleanup } = tempDir();
  try {
    const file = path.join(dir, 'q.gguf');
    writeSyntheticModel(file, {
      architecture: 'qwen2', nLayers: 3, nEmbd: 128, nHeads: 4, nKvHeads: 2, nFf: 256, nVocab: 400,
      contextLength: 32768, weightType: GgmlType.Q8_0, seed: 1, tiedOutput: true,
    });
    const g = readGguf(file);
    const s = summarizeModel(g);
    assert.equal(s.contextLength, 4096);
    assert.equal(s.trainingContextLength, 32768);
    assert.deepEqual(s.tensorTypes, { Q8_0: 1 + 3 * 7, F32: 1 + 3 * 5 });
    assert.equal(s.kvBytesPerToken, kvBytesPerToken({ nLayers: 3, nKvHeads: 2, headDim: 32 }));
    assert.equal(s.kvBytesPerToken, 2 * 3 * 2 * 32 * 2);
    const q8 = (n: number) => (n / 32) * 34;
    const layers = layerSummaries(g);
    assert.equal(layers.length, 4);
    for (const l of layers.slice(1)) {
      assert.equal(l.attentionBytes, q8(128 * 128) * 2 + q8(128 * 64) * 2 + (128 + 64 + 64) * 4);
      assert.equal(l.ffnBytes, 3 * q8(128 * 256));
    }
    assert.equal(layers[0]!.otherBytes, q8(128 * 400)); // tied: no output.weight
  } finally {
    cleanup();
  }
});
