// Synthetic models: real layouts that read back with the right hyperparameters, sizes, types,
// value scales and vocabularies; deterministic per seed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { GgmlType, ggmlTypeName } from '../../engine/model/ggml-types';
import { findTensor, metaNumber, metaString, metaStringArray, readGguf, type GgufFile } from '../../engine/model/gguf/index';
import { readHparams } from '../../engine/model/hparams';
import { bf16BitsToF32, dequantizeQ8_0, f16BitsToF32 } from '../../engine/model/quantize-ts';
import { generateSpmVocab, writeSyntheticModel, type SyntheticModelSpec } from '../../engine/model/synthetic';
import { loadAddon } from '../../engine/native/addon';
import { sharedPath, skipUnlessShared, tempDir } from '../helpers/shared';

const base: SyntheticModelSpec = {
  architecture: 'llama', nLayers: 2, nEmbd: 64, nHeads: 4, nKvHeads: 2, nFf: 96, nVocab: 300,
  contextLength: 512, weightType: GgmlType.Q8_0, seed: 7,
};

function tensorValues(file: GgufFile, bytes: Buffer, name: string): Float32Array {
  const t = findTensor(file, name);
  assert.ok(t, `tensor ${name}`);
  const raw = new Uint8Array(bytes.buffer.slice(bytes.byteOffset + t.absOffset, bytes.byteOffset + t.absOffset + t.byteSize));
  switch (t.type) {
    case GgmlType.F32: return new Float32Array(raw.buffer);
    case GgmlType.F16: return Float32Array.from(new Uint16Array(raw.buffer), f16BitsToF32);
    case GgmlType.BF16: return Float32Array.from(new Uint16Array(raw.buffer), bf16BitsToF32);
    case GgmlType.Q8_0: return dequantizeQ8_0(raw);
    default: throw new Error(`no TS dequantizer for ${ggmlTypeName(t.type)}`);
  }
}

function meanStd(x: Float32Array): { mean: number; std: number } {
  let s = 0;
  for (const v of x) s += v;
  const mean = s / x.length;
  let v2 = 0;
  for (const v of x) v2 += (v - mean) ** 2;
  return { mean, std: Math.sqrt(v2 / x.length) };
}

test('synthetic llama Q8_0 with a generated vocabulary reads back with its spec', () => {
  const { dir, cleanup } = tempDir();
  try {
    const file = path.join(dir, 'llama-q8.gguf');
    const layout = writeSyntheticModel(file, base);
    const g = readGguf(file);
    const hp = readHparams(g); // also checks every tensor's presence and shape
    assert.deepEqual(
      [hp.architecture, hp.nLayers, hp.nEmbd, hp.nHeads, hp.nKvHeads, hp.headDim, hp.nFf, hp.nVocab, hp.contextLength, hp.ropeStyle, hp.ropeFreqBase, hp.tiedOutput],
      ['llama', 2, 64, 4, 2, 16, 96, 300, 512, 'normal', 10000, false],
    );
    assert.equal(Math.fround(hp.normEps), Math.fround(1e-5));
    assert.equal(g.tensors.length, 1 + 2 * 9 + 2);
    for (const t of g.tensors) {
      const isNorm = t.name.endsWith('norm.weight');
      assert.equal(t.type, isNorm ? GgmlType.F32 : GgmlType.Q8_0, t.name);
    }
    // token_embd: 300 rows of 64 values = 600 Q8_0 blocks of 34 bytes.
    assert.equal(findTensor(g, 'token_embd.weight')!.byteSize, 600 * 34);
    const last = g.tensors[g.tensors.length - 1]!;
    assert.equal(statSync(file).size, last.absOffset + Math.ceil(last.byteSize / 32) * 32);
    assert.equal(layout.dataOffset, g.dataOffset);
    assert.equal(metaNumber(g, 'general.file_type'), 7);

    const bytes = readFileSync(file);
    const w = meanStd(tensorValues(g, bytes, 'blk.1.ffn_down.weight'));
    assert.ok(Math.abs(w.mean) < 0.002 && Math.abs(w.std - 0.02) < 0.002, `weights mean ${w.mean} std ${w.std}`);
    const n = meanStd(tensorValues(g, bytes, 'blk.0.attn_norm.weight'));
    assert.ok(Math.abs(n.mean - 1) < 0.01, `norm mean ${n.mean}`);

    const tokens = metaStringArray(g, 'tokenizer.ggml.tokens');
    assert.equal(tokens.length, 300);
    assert.equal(metaString(g, 'tokenizer.ggml.model'), 'llama');
  } finally {
    cleanup();
  }
});

test('synthetic models are deterministic per seed', () => {
  const { dir, cleanup } = tempDir();
  try {
    const a = path.join(dir, 'a.gguf');
    const b = path.join(dir, 'b.gguf');
    const c = path.join(dir, 'c.gguf');
    writeSyntheticModel(a, base);
    writeSyntheticModel(b, base);
    writeSyntheticModel(c, { ...base, seed: 8 });
    assert.deepEqual(readFileSync(a), readFileSync(b));
    assert.notDeepEqual(readFileSync(a), readFileSync(c));
  } finally {
    cleanup();
  }
});

test('synthetic per-matrix types (a Q4_K_M-like mix) with the K-quant fallback per row length', () => {
  const { dir, cleanup } = tempDir();
  try {
    const file = path.join(dir, 'mix.gguf');
    // nEmbd 256: rows of 256 take Q4_K / Q6_K; ffn_down rows of nFf 320 take the fallbacks.
    writeSyntheticModel(file, {
      ...base, nEmbd: 256, nFf: 320, weightType: GgmlType.Q4_K,
      tensorType: (name) => (/attn_v|ffn_down|^output/.test(name) ? GgmlType.Q6_K : undefined),
    });
    const g = readGguf(file);
    const type = (name: string) => ggmlTypeName(findTensor(g, name)!.type);
    assert.equal(type('blk.0.attn_q.weight'), 'Q4_K');
    assert.equal(type('blk.1.attn_v.weight'), 'Q6_K');
    assert.equal(type('output.weight'), 'Q6_K');
    assert.equal(type('blk.0.ffn_down.weight'), 'Q8_0');  // Q6_K's fallback for rows of 320
    assert.equal(type('blk.0.ffn_gate.weight'), 'Q4_K');
    assert.equal(type('blk.0.attn_norm.weight'), 'F32');
  } finally {
    cleanup();
  }
});

test('synthetic qwen2: biases, tied output, F16/BF16/F32 weights', () => {
  const { dir, cleanup } = tempDir();
  try {
    for (const weightType of [GgmlType.F16, GgmlType.BF16, GgmlType.F32]) {
      const file = path.join(dir, `qwen-${ggmlTypeName(weightType)}.gguf`);
      writeSyntheticModel(file, { ...base, architecture: 'qwen2', weightType, tiedOutput: true, nVocab: 320 });
      const g = readGguf(file);
      const hp = readHparams(g);
      assert.equal(hp.architecture, 'qwen2');
      assert.equal(hp.ropeStyle, 'neox');
      assert.equal(hp.hasQkvBias, true);
      assert.equal(hp.tiedOutput, true);
      assert.equal(hp.ropeFreqBase, 1e6);
      assert.equal(findTensor(g, 'output.weight'), undefined);
      assert.equal(findTensor(g, 'blk.0.attn_k.bias')!.type, GgmlType.F32);
      assert.equal(findTensor(g, 'blk.0.attn_q.weight')!.type, weightType);
      const x = meanStd(tensorValues(g, readFileSync(file), 'token_embd.weight'));
      assert.ok(Math.abs(x.std - 0.02) < 0.002, `${ggmlTypeName(weightType)} std ${x.std}`);
    }
  } finally {
    cleanup();
  }
});

const spm = sharedPath('vocab', 'ggml-vocab-llama-spm.gguf');
test('synthetic model with a real vocabulary copied from ../shared/vocab', { skip: skipUnlessShared(spm) }, () => {
  const { dir, cleanup } = tempDir();
  try {
    const file = path.join(dir, 'spm.gguf');
    const spec = { ...base, nVocab: undefined, nEmbd: 32, nHeads: 2, nKvHeads: 1, nFf: 64, nLayers: 1, weightType: GgmlType.F16, vocabFrom: spm };
    writeSyntheticModel(file, spec);
    const g = readGguf(file);
    const hp = readHparams(g);
    assert.equal(hp.nVocab, 32000);
    const source = readGguf(spm);
    assert.deepEqual(metaStringArray(g, 'tokenizer.ggml.tokens'), metaStringArray(source, 'tokenizer.ggml.tokens'));
    assert.equal(metaString(g, 'tokenizer.ggml.pre'), 'default');
    assert.deepEqual(findTensor(g, 'token_embd.weight')!.dims, [32, 32000]);
    assert.throws(() => writeSyntheticModel(path.join(dir, 'x.gguf'), { ...spec, nVocab: 1000 }), /nVocab 1000 differs from the 32000 tokens/);
  } finally {
    cleanup();
  }
});

test('generated vocabulary: control tokens, 256 byte tokens, unique pieces with falling scores', () => {
  const v = generateSpmVocab(2000);
  assert.equal(v.tokens.length, 2000);
  assert.deepEqual(v.tokens.slice(0, 3), ['<unk>', '<s>', '</s>']);
  assert.deepEqual(v.types.slice(0, 3), [2, 3, 3]);
  assert.equal(v.tokens[3], '<0x00>');
  assert.equal(v.tokens[3 + 0x0a], '<0x0A>');
  assert.equal(v.tokens[258], '<0xFF>');
  assert.ok(v.types.slice(3, 259).every((t) => t === 6));
  assert.ok(v.types.slice(259).every((t) => t === 1));
  assert.equal(new Set(v.tokens).size, v.tokens.length);
  for (let i = 260; i < v.tokens.length; i++) assert.ok(v.scores[i]! < v.scores[i - 1]!);
  // Every multi-character piece is reachable by merging: its prefix without the last character is a piece.
  const all = new Set(v.tokens);
  for (const t of v.tokens.slice(259)) if ([...t].length > 1) assert.ok(all.has([...t].slice(0, -1).join('')), t);
  assert.throws(() => generateSpmVocab(100), /nVocab must be an integer ≥ 259/);
});

test('spec errors are named', () => {
  const { dir, cleanup } = tempDir();
  try {
    const f = path.join(dir, 'bad.gguf');
    assert.throws(() => writeSyntheticModel(f, { ...base, nHeads: 3 }), /nHeads 3 must divide nEmbd 64/);
    assert.throws(() => writeSyntheticModel(f, { ...base, nFf: 100 }), /blk\.0\.ffn_down\.weight has rows of 100 values, not a multiple of Q8_0's block size 32/);
    assert.throws(() => writeSyntheticModel(f, { ...base, nLayers: 0 }), /nLayers must be a positive integer/);
  } finally {
    cleanup();
  }
});

function nativeQuantize(): string | false {
  try {
    const addon = loadAddon<{ quantize?: unknown }>();
    return typeof addon.quantize === 'function' ? false : 'the native addon has no quantize()';
  } catch (e) {
    return `the native addon is not available: ${(e as Error).message}`;
  }
}

test('block formats beyond Q8_0 go through the native quantize(), or fail naming the type', () => {
  const { dir, cleanup } = tempDir();
  try {
    const file = path.join(dir, 'q4k.gguf');
    const spec = { ...base, nEmbd: 256, nFf: 512, weightType: GgmlType.Q4_K };
    const missing = nativeQuantize();
    if (missing) {
      assert.throws(() => writeSyntheticModel(file, spec), /weight type Q4_K needs the native addon's quantize\(\)/);
      return;
    }
    writeSyntheticModel(file, spec);
    const g = readGguf(file);
    readHparams(g);
    assert.equal(findTensor(g, 'blk.0.ffn_up.weight')!.type, GgmlType.Q4_K);
    assert.equal(findTensor(g, 'blk.0.ffn_up.weight')!.byteSize, (256 * 512 / 256) * 144);
    const addon = loadAddon<{ dequantize: (t: number, d: Uint8Array, n: number) => Float32Array }>();
    const t = findTensor(g, 'blk.0.ffn_up.weight')!;
    const bytes = readFileSync(file);
    const x = meanStd(addon.dequantize(GgmlType.Q4_K, new Uint8Array(bytes.subarray(t.absOffset, t.absOffset + t.byteSize)), t.nElements));
    assert.ok(Math.abs(x.std - 0.02) < 0.004, `Q4_K std ${x.std}`);
  } finally {
    cleanup();
  }
});
