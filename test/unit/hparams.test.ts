// Hyperparameters from GGUF metadata for llama and qwen2, and the tensor checks behind them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { GgmlType } from '../../engine/model/ggml-types';
import { GgufMetadataError, GgufValueType as T, readGguf, writeGguf, type GgufWriteKv, type GgufWriteTensor } from '../../engine/model/gguf/index';
import { ModelTensorError, readHparams, SUPPORTED_ARCHITECTURES } from '../../engine/model/hparams';
import { sharedPath, skipUnlessShared, tempDir } from '../helpers/shared';

interface Tiny {
  arch: string;
  kv: GgufWriteKv[];
  tensors: Array<{ name: string; dims: number[] }>;
}

/**
 * A tiny model written out by hand (not from the code under test): 2 layers, embedding 16,
 * 4 heads of 4, 2 KV heads, FFN 24, vocabulary 10.
 */
function tiny(arch: 'llama' | 'qwen2' | string, withBias = arch === 'qwen2'): Tiny {
  const kv: GgufWriteKv[] = [
    { key: 'general.architecture', type: T.STRING, value: arch },
    { key: 'general.name', type: T.STRING, value: `tiny-${arch}` },
    { key: `${arch}.block_count`, type: T.UINT32, value: 2 },
    { key: `${arch}.context_length`, type: T.UINT32, value: 128 },
    { key: `${arch}.embedding_length`, type: T.UINT32, value: 16 },
    { key: `${arch}.feed_forward_length`, type: T.UINT32, value: 24 },
    { key: `${arch}.attention.head_count`, type: T.UINT32, value: 4 },
    { key: `${arch}.attention.head_count_kv`, type: T.UINT32, value: 2 },
    { key: `${arch}.attention.layer_norm_rms_epsilon`, type: T.FLOAT32, value: 1e-6 },
    { key: `${arch}.rope.freq_base`, type: T.FLOAT32, value: 1000000 },
  ];
  const tensors = [{ name: 'token_embd.weight', dims: [16, 10] }];
  for (let i = 0; i < 2; i++) {
    tensors.push(
      { name: `blk.${i}.attn_norm.weight`, dims: [16] },
      { name: `blk.${i}.attn_q.weight`, dims: [16, 16] },
      { name: `blk.${i}.attn_k.weight`, dims: [16, 8] },
      { name: `blk.${i}.attn_v.weight`, dims: [16, 8] },
      { name: `blk.${i}.attn_output.weight`, dims: [16, 16] },
      { name: `blk.${i}.ffn_norm.weight`, dims: [16] },
      { name: `blk.${i}.ffn_gate.weight`, dims: [16, 24] },
      { name: `blk.${i}.ffn_up.weight`, dims: [16, 24] },
      { name: `blk.${i}.ffn_down.weight`, dims: [24, 16] },
    );
    if (withBias) {
      tensors.push(
        { name: `blk.${i}.attn_q.bias`, dims: [16] },
        { name: `blk.${i}.attn_k.bias`, dims: [8] },
        { name: `blk.${i}.attn_v.bias`, dims: [8] },
      );
    }
  }
  tensors.push({ name: 'output_norm.weight', dims: [16] }, { name: 'output.weight', dims: [16, 10] });
  return { arch, kv, tensors };
}

function write(dir: string, m: Tiny, name = 'm.gguf'): string {
  const file = path.join(dir, name);
  const tensors: GgufWriteTensor[] = m.tensors.map((t) => ({
    name: t.name, dims: t.dims, type: GgmlType.F32, data: new Uint8Array(4 * t.dims.reduce((a, b) => a * b, 1)),
  }));
  writeGguf(file, { kv: m.kv, tensors });
  return file;
}

function setKv(m: Tiny, key: string, type: T, value: GgufWriteKv['value']): Tiny {
  return { ...m, kv: [...m.kv.filter((k) => k.key !== key), { key, type, value }] };
}

function withoutKv(m: Tiny, key: string): Tiny {
  return { ...m, kv: m.kv.filter((k) => k.key !== key) };
}

function withTensors(m: Tiny, f: (ts: Tiny['tensors']) => Tiny['tensors']): Tiny {
  return { ...m, tensors: f(m.tensors) };
}

const stories = sharedPath('models', 'stories260K.gguf');
test('stories260K: llama hyperparameters as its README states', { skip: skipUnlessShared(stories) }, () => {
  const hp = readHparams(readGguf(stories));
  assert.deepEqual(
    { ...hp, normEps: Math.fround(hp.normEps) },
    {
      architecture: 'llama', name: 'llama', nLayers: 5, nEmbd: 64, nHeads: 8, nKvHeads: 4, headDim: 8, nFf: 172,
      nVocab: 512, contextLength: 2048, normEps: Math.fround(1e-5), ropeFreqBase: 10000, ropeScalingType: 'none',
      ropeScalingFactor: 1, ropeStyle: 'normal', ropeDims: 8, tiedOutput: false, hasQkvBias: false, hasQkNorm: false, fusedQkv: false, fusedGateUp: false, norm: 'rms', ffn: 'swiglu', hasOutFfnBias: false, embeddingScale: false, nExpert: 0, nExpertUsed: 0, postNorms: false, attnScale: 0, attnSoftcap: 0, finalSoftcap: 0, slidingWindow: 0, swaLayers: [], ropeFreqBaseSwa: 10000,
      hasOutputBias: false, hasRopeFreqs: false,
    },
  );
});

test('llama: normal RoPE, defaults, tied output when output.weight is absent', () => {
  const { dir, cleanup } = tempDir();
  try {
    const m = withTensors(withoutKv(tiny('llama'), 'llama.rope.freq_base'), (ts) => ts.filter((t) => t.name !== 'output.weight'));
    const hp = readHparams(readGguf(write(dir, m)));
    assert.equal(hp.ropeStyle, 'normal');
    assert.equal(hp.ropeFreqBase, 10000);
    assert.equal(hp.headDim, 4);
    assert.equal(hp.ropeDims, 4);
    assert.equal(hp.nVocab, 10);
    assert.equal(hp.tiedOutput, true);
    assert.equal(hp.hasQkvBias, false);
  } finally {
    cleanup();
  }
});

test('qwen2: NeoX RoPE, Q/K/V biases, freq base from the file', () => {
  const { dir, cleanup } = tempDir();
  try {
    const hp = readHparams(readGguf(write(dir, tiny('qwen2'))));
    assert.equal(hp.architecture, 'qwen2');
    assert.equal(hp.ropeStyle, 'neox');
    assert.equal(hp.hasQkvBias, true);
    assert.equal(hp.ropeFreqBase, 1000000);
    assert.equal(hp.nKvHeads, 2);
    assert.equal(hp.tiedOutput, false);
  } finally {
    cleanup();
  }
});

test('RoPE scaling: yarn, legacy linear, unknown type, factor 0 means none', () => {
  const { dir, cleanup } = tempDir();
  try {
    let m = setKv(tiny('llama'), 'llama.rope.scaling.type', T.STRING, 'yarn');
    m = setKv(m, 'llama.rope.scaling.factor', T.FLOAT32, 4);
    m = setKv(m, 'llama.rope.scaling.original_context_length', T.UINT32, 32);
    let hp = readHparams(readGguf(write(dir, m, 'yarn.gguf')));
    assert.equal(hp.ropeScalingType, 'yarn');
    assert.equal(hp.ropeScalingFactor, 4);
    assert.equal(hp.ropeScalingOrigContext, 32);

    hp = readHparams(readGguf(write(dir, setKv(tiny('llama'), 'llama.rope.scale_linear', T.FLOAT32, 2), 'legacy.gguf')));
    assert.equal(hp.ropeScalingType, 'linear');
    assert.equal(hp.ropeScalingFactor, 2);

    hp = readHparams(readGguf(write(dir, setKv(setKv(tiny('llama'), 'llama.rope.scaling.type', T.STRING, 'linear'), 'llama.rope.scaling.factor', T.FLOAT32, 0), 'zero.gguf')));
    assert.equal(hp.ropeScalingFactor, 1);

    const bad = write(dir, setKv(tiny('llama'), 'llama.rope.scaling.type', T.STRING, 'spiral'), 'bad.gguf');
    assert.throws(() => readHparams(readGguf(bad)), /llama\.rope\.scaling\.type.*unknown RoPE scaling type 'spiral'/);
  } finally {
    cleanup();
  }
});

test('metadata errors name the file and the key', () => {
  const { dir, cleanup } = tempDir();
  try {
    const expectMeta = (m: Tiny, key: string, problem: RegExp, name: string) => {
      const file = write(dir, m, name);
      assert.throws(() => readHparams(readGguf(file)), (e: unknown) => {
        assert.ok(e instanceof GgufMetadataError, String(e));
        assert.equal(e.key, key);
        assert.ok(e.message.includes(file));
        assert.match(e.problem, problem);
        return true;
      });
    };
    expectMeta(tiny('gpt2'), 'general.architecture', new RegExp(`unsupported architecture 'gpt2' \\(supported: ${SUPPORTED_ARCHITECTURES.join(', ')}\\)`), 'gpt2.gguf');
    expectMeta(withoutKv(tiny('llama'), 'general.architecture'), 'general.architecture', /missing/, 'noarch.gguf');
    expectMeta(withoutKv(tiny('llama'), 'llama.block_count'), 'llama.block_count', /missing/, 'noblocks.gguf');
    expectMeta(setKv(tiny('llama'), 'llama.block_count', T.STRING, '2'), 'llama.block_count', /expected a number, found STRING/, 'strblocks.gguf');
    expectMeta(setKv(tiny('llama'), 'llama.attention.head_count_kv', T.UINT32, 3), 'llama.attention.head_count_kv', /3 KV heads do not divide 4/, 'kv3.gguf');
    expectMeta(setKv(tiny('llama'), 'llama.attention.head_count', T.UINT32, 3), 'llama.attention.head_count', /3 heads do not divide embedding length 16/, 'h3.gguf');
    expectMeta(setKv(tiny('llama'), 'llama.expert_count', T.UINT32, 8), 'llama.expert_count', /mixture-of-experts/, 'moe.gguf');
    expectMeta(withoutKv(tiny('llama'), 'llama.attention.layer_norm_rms_epsilon'), 'llama.attention.layer_norm_rms_epsilon', /missing/, 'noeps.gguf');
    expectMeta(setKv(tiny('llama'), 'tokenizer.ggml.tokens', T.ARRAY, { itemType: T.STRING, items: ['a', 'b'] }), 'tokenizer.ggml.tokens', /2 tokens but the model's vocabulary has 10 rows/, 'vocab.gguf');
    expectMeta(
      setKv(tiny('llama'), 'llama.attention.head_count_kv', T.ARRAY, { itemType: T.UINT32, items: [2, 1] }),
      'llama.attention.head_count_kv', /per-layer values differ \(2, 1\)/, 'perlayer.gguf');
  } finally {
    cleanup();
  }
});

test('a uniform per-layer head count array is accepted', () => {
  const { dir, cleanup } = tempDir();
  try {
    const m = setKv(tiny('llama'), 'llama.attention.head_count_kv', T.ARRAY, { itemType: T.INT32, items: [2, 2] });
    assert.equal(readHparams(readGguf(write(dir, m))).nKvHeads, 2);
  } finally {
    cleanup();
  }
});

test('tensor errors name the tensor and the expected vs actual shape', () => {
  const { dir, cleanup } = tempDir();
  try {
    const expectTensor = (m: Tiny, tensor: string, problem: RegExp, name: string) => {
      const file = write(dir, m, name);
      assert.throws(() => readHparams(readGguf(file)), (e: unknown) => {
        assert.ok(e instanceof ModelTensorError, String(e));
        assert.equal(e.tensor, tensor);
        assert.ok(e.message.includes(file));
        assert.match(e.problem, problem);
        return true;
      });
    };
    expectTensor(withTensors(tiny('llama'), (ts) => ts.filter((t) => t.name !== 'blk.1.ffn_up.weight')),
      'blk.1.ffn_up.weight', /missing; llama .* needs it with shape \[16, 24\]/, 'noup.gguf');
    expectTensor(withTensors(tiny('llama'), (ts) => ts.map((t) => (t.name === 'blk.0.attn_k.weight' ? { ...t, dims: [16, 16] } : t))),
      'blk.0.attn_k.weight', /expected shape \[16, 8\], found \[16, 16\]/, 'kshape.gguf');
    expectTensor(withTensors(tiny('llama'), (ts) => ts.map((t) => (t.name === 'output_norm.weight' ? { ...t, dims: [16, 1] } : t))),
      'output_norm.weight', /expected shape \[16\], found \[16, 1\]/, 'normshape.gguf');
    expectTensor(tiny('qwen2', false), 'blk.0.attn_q.bias', /missing.*\[16\]/, 'nobias.gguf');
    expectTensor(withTensors(tiny('llama'), (ts) => [...ts, { name: 'blk.2.attn_norm.weight', dims: [16] }]),
      'blk.2.attn_norm.weight', /not expected in a llama model with 2 layers/, 'extra.gguf');
    // llama with only part of the Q/K/V biases.
    expectTensor(withTensors(tiny('llama'), (ts) => [...ts, { name: 'blk.0.attn_q.bias', dims: [16] }]),
      'blk.0.attn_k.bias', /missing/, 'partialbias.gguf');
  } finally {
    cleanup();
  }
});

const spm = sharedPath('vocab', 'ggml-vocab-llama-spm.gguf');
const deepseek = sharedPath('vocab', 'ggml-vocab-deepseek-coder.gguf');
test('vocab-only files: hyperparameters without the tensor check', { skip: skipUnlessShared(spm) || skipUnlessShared(deepseek) }, () => {
  const llama2 = readHparams(readGguf(spm), { checkTensors: false });
  assert.equal(llama2.nLayers, 32);
  assert.equal(llama2.nVocab, 32000);
  assert.equal(llama2.headDim, 128);
  const ds = readHparams(readGguf(deepseek), { checkTensors: false });
  assert.equal(ds.ropeScalingType, 'linear');
  assert.equal(ds.ropeScalingFactor, 4);
  assert.equal(ds.ropeFreqBase, 100000);
  assert.equal(ds.nVocab, 32256);
  // With the check, the missing weights are reported.
  assert.throws(() => readHparams(readGguf(spm)), /tensor 'token_embd\.weight': missing/);
});
