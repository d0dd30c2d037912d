// Fulcrum's native forward pass against an independent reference: the same model built as an
// ONNX graph (test/helpers/onnx) from the same GGUF weights, dequantized in TypeScript, and run
// by onnxruntime-node's CPU provider. Logits are compared at every one of 32 positions.
//
// Two references per model:
//  - "emulated": the graph also rounds where Fulcrum (like llama.cpp's CPU backend) leaves
//    float32: f16 KV cache and Q, f16 softmax probabilities, f16 / Q8_0 activations into F16 /
//    Q8_0 matmuls. What remains is float32 summation order (and FMA vs separate rounding), which
//    now and then moves a value across an f16 or Q8_0 rounding boundary; one such flip changes
//    that value by an f16 ulp (2^-11 relative) and, through attention, the later positions.
//    Measured (AVX-512, AVX2 and scalar kernels alike): Q8_0 models ≤ 5e-7 relative to the
//    largest |logit|, F32 ≤ 7e-5, F16 ≤ 3e-4, stories260K (5 layers) 4e-4. Bound 1e-3.
//  - "float32": the plain model; the difference is the rounding itself (Q8_0 activations up to
//    1e-2 relative, f16 3e-4, stories260K 1.5e-3). Bound 5e-2, a sanity check only.
// The emulated graph must also bring the median |Δ| down by a stated factor (10× for F32 and
// one-layer F16 models, 100× for Q8_0, 1.5× for two-layer F16 where flips cascade, 3× for
// stories260K): evidence that the rounding points named above are the ones the native code has.
// With the scalar kernels the F16 models agree bit for bit (last test).
// A graph with the other RoPE style misses by far more than the bound (stories260K: 0.83
// relative, qwen2: 1.1), so the comparison tells a wrong rotation from rounding.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';

import { GgmlType } from '../../engine/model/ggml-types';
import { readGguf, type GgufFile } from '../../engine/model/gguf';
import { readHparams, type ModelHparams } from '../../engine/model/hparams';
import { writeSyntheticModel, type SyntheticModelSpec } from '../../engine/model/synthetic';
import { createNativeModel } from '../../engine/native/model';
import { nativeConfig } from '../../engine/runtime/engine';
import { buildDecoderOnnx, LOGITS_OUTPUT, TOKENS_INPUT } from '../helpers/onnx/decoder-graph';
import { sharedPath, skipUnlessShared, tempDir } from '../helpers/shared';

type Ort = typeof import('onnxruntime-node');

let ortLoadError = '';
const ort: Ort | undefined = (() => {
  try {
    return require('onnxruntime-node') as Ort;
  } catch (e) {
    ortLoadError = `onnxruntime-node failed to load: ${(e as Error).message}`;
    return undefined;
  }
})();

const EMULATED_TOLERANCE = 1e-3;
const FLOAT32_TOLERANCE = 5e-2;
const N_TOKENS = 32;
const THREADS = 2;

interface Agreement {
  maxAbs: number;
  /** Median |Δ| over all logits: what most values agree to, apart from rare rounding flips. */
  medianAbs: number;
  scale: number;
  relative: number;
}

function compare(ours: Float32Array, ref: Float32Array): Agreement {
  assert.equal(ours.length, ref.length, 'logit counts differ');
  const diffs = new Float64Array(ours.length);
  let maxAbs = 0, scale = 0;
  for (let i = 0; i < ours.length; i++) {
    const d = Math.abs(ours[i]! - ref[i]!);
    diffs[i] = d;
    if (!(d <= maxAbs)) maxAbs = d; // NaN propagates and fails the bound
    scale = Math.max(scale, Math.abs(ref[i]!));
  }
  diffs.sort();
  return { maxAbs, medianAbs: diffs[diffs.length >> 1]!, scale, relative: maxAbs / scale };
}

async function onnxLogits(o: Ort, file: GgufFile, hp: ModelHparams, tokens: number[], emulate: boolean, ropeStyle?: ModelHparams['ropeStyle']): Promise<Float32Array> {
  const bytes = buildDecoderOnnx(file, hp, { nTokens: tokens.length, emulateNativeRounding: emulate, ...(ropeStyle ? { ropeStyle } : {}) });
  const session = await o.InferenceSession.create(bytes, { executionProviders: ['cpu'], intraOpNumThreads: THREADS, graphOptimizationLevel: 'disabled' });
  try {
    const feeds = { [TOKENS_INPUT]: new o.Tensor('int64', BigInt64Array.from(tokens.map(BigInt)), [tokens.length]) };
    const out = (await session.run(feeds))[LOGITS_OUTPUT];
    assert.ok(out, 'ONNX graph produced no logits');
    assert.deepEqual(out.dims, [tokens.length, hp.nVocab]);
    return out.data as Float32Array;
  } finally {
    await session.release();
  }
}

function nativeLogits(file: GgufFile, hp: ModelHparams, tokens: number[]): Float32Array {
  const tensors = file.tensors.map((t) => ({ name: t.name, type: t.type, dims: t.dims, offset: t.absOffset }));
  const model = createNativeModel(file.path, tensors, nativeConfig(file, hp, 64, THREADS));
  try {
    return model.eval(Int32Array.from(tokens), 0, true);
  } finally {
    model.dispose();
  }
}

function fmt(a: Agreement): string {
  return `max |Δ| ${a.maxAbs.toExponential(2)}, median |Δ| ${a.medianAbs.toExponential(2)} (max |logit| ${a.scale.toFixed(3)}, relative ${a.relative.toExponential(2)})`;
}

/** Ordinary tokens spread over the vocabulary (ids below ~260 are control/byte tokens in SPM vocabularies). */
function sequence(nVocab: number): number[] {
  const lo = Math.min(259, nVocab >> 1);
  return [1, ...Array.from({ length: N_TOKENS - 1 }, (_, i) => lo + ((i * 37 + 11) % (nVocab - lo)))];
}

async function checkModel(t: TestContext, o: Ort, modelPath: string, label: string, minMedianGain: number, checkRopeStyle = false): Promise<void> {
  const file = readGguf(modelPath);
  const hp = readHparams(file);
  const tokens = sequence(hp.nVocab);
  const ours = nativeLogits(file, hp, tokens);
  const emulated = compare(ours, await onnxLogits(o, file, hp, tokens, true));
  const plain = compare(ours, await onnxLogits(o, file, hp, tokens, false));
  t.diagnostic(`${label}: ${N_TOKENS} positions × ${hp.nVocab} logits; vs emulated-rounding ONNX: ${fmt(emulated)}; vs float32 ONNX: ${fmt(plain)}`);
  assert.ok(emulated.relative < EMULATED_TOLERANCE, `${label}: logits differ from the emulated-rounding ONNX graph by ${emulated.relative} relative (bound ${EMULATED_TOLERANCE})`);
  assert.ok(plain.relative < FLOAT32_TOLERANCE, `${label}: logits differ from the float32 ONNX graph by ${plain.relative} relative (bound ${FLOAT32_TOLERANCE})`);
  assert.ok(emulated.medianAbs * minMedianGain <= plain.medianAbs,
    `${label}: emulating the native rounding should bring ONNX ${minMedianGain}× closer (median |Δ| emulated ${emulated.medianAbs}, float32 ${plain.medianAbs})`);
  if (checkRopeStyle) {
    const wrong = hp.ropeStyle === 'normal' ? 'neox' : 'normal';
    const miss = compare(ours, await onnxLogits(o, file, hp, tokens, true, wrong));
    t.diagnostic(`${label}: with ${wrong} RoPE instead of ${hp.ropeStyle}: ${fmt(miss)}`);
    assert.ok(miss.relative > 10 * EMULATED_TOLERANCE, `${label}: a graph with the wrong RoPE style should not agree (${miss.relative})`);
  }
}

const STORIES = sharedPath('models', 'stories260K.gguf');
const skipOrt = ort ? false : ortLoadError;

test('ONNX reference: stories260K (real F32 weights), logits at every position', { skip: skipOrt || skipUnlessShared(STORIES), timeout: 60_000 }, async (t) => {
  await checkModel(t, ort!, STORIES, 'stories260K', 3, true);
});

const base = { nLayers: 2, nEmbd: 128, nHeads: 4, nKvHeads: 2, nFf: 256, nVocab: 512, contextLength: 64, seed: 4321 };
const SYNTHETIC: { label: string; spec: SyntheticModelSpec; minMedianGain: number; ropeCheck?: boolean }[] = [
  { label: 'llama F32', spec: { ...base, architecture: 'llama', weightType: GgmlType.F32 }, minMedianGain: 10 },
  // One layer: f16 rounding flips cannot cascade through a second layer's attention, so most
  // logits show float32-level agreement.
  { label: 'llama F16 one layer', spec: { ...base, nLayers: 1, architecture: 'llama', weightType: GgmlType.F16 }, minMedianGain: 10 },
  { label: 'llama F16', spec: { ...base, architecture: 'llama', weightType: GgmlType.F16 }, minMedianGain: 1.5 },
  { label: 'llama Q8_0 tied output', spec: { ...base, architecture: 'llama', weightType: GgmlType.Q8_0, tiedOutput: true }, minMedianGain: 100 },
  // Larger weights sharpen attention, so the positions (and the RoPE style) matter more.
  { label: 'qwen2 F32', spec: { ...base, architecture: 'qwen2', weightType: GgmlType.F32, weightStd: 0.08 }, minMedianGain: 10, ropeCheck: true },
  { label: 'qwen2 F16', spec: { ...base, architecture: 'qwen2', weightType: GgmlType.F16 }, minMedianGain: 1.5 },
  { label: 'qwen2 Q8_0', spec: { ...base, architecture: 'qwen2', weightType: GgmlType.Q8_0 }, minMedianGain: 100 },
];

test('ONNX reference: synthetic llama/qwen2 models, logits at every position', { skip: skipOrt, timeout: 120_000 }, async (t) => {
  const { dir, cleanup } = tempDir('fulcrum-onnx-');
  try {
    for (const c of SYNTHETIC) {
      await t.test(c.label, async (st) => {
        const file = path.join(dir, `${c.label.replace(/\W+/g, '-')}.gguf`);
        writeSyntheticModel(file, c.spec);
        await checkModel(st, ort!, file, c.label, c.minMedianGain, c.ropeCheck ?? false);
      });
    }
  } finally {
    cleanup();
  }
});

// With the scalar kernels (FULCRUM_ISA=scalar) an F16 model's whole forward pass is bit-for-bit
// the emulated graph: f16×f16 products are exact in float32, the scalar dot sums them in order
// over the row as onnxruntime's SGEMM does for these sizes, and exponentials, the RMSNorm and
// softmax sums are computed as the native code computes them. Any difference in where or how
// the native code rounds shows up here as a non-zero difference.
const NATIVE_LOGITS_CLI = path.join(__dirname, '..', 'helpers', 'onnx', 'native-logits-cli.ts');

function scalarNativeLogits(modelPath: string, tokens: number[]): Float32Array {
  const out = execFileSync(process.execPath, ['--import', 'tsx', NATIVE_LOGITS_CLI, modelPath, String(THREADS), tokens.join(',')], {
    env: { ...process.env, FULCRUM_ISA: 'scalar' },
    maxBuffer: 64 << 20,
  });
  const parsed = JSON.parse(out.toString('utf8')) as { isa: string; logits: string };
  assert.equal(parsed.isa, 'scalar', 'FULCRUM_ISA=scalar was not honoured by the child process');
  const bytes = Buffer.from(parsed.logits, 'base64');
  return new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
}

test('ONNX reference: with the scalar kernels, F16 models agree bit for bit', { skip: skipOrt, timeout: 60_000 }, async (t) => {
  const { dir, cleanup } = tempDir('fulcrum-onnx-scalar-');
  try {
    for (const arch of ['llama', 'qwen2'] as const) {
      const label = `${arch} F16 (scalar kernels)`;
      const modelPath = path.join(dir, `${arch}-f16.gguf`);
      writeSyntheticModel(modelPath, { ...base, architecture: arch, weightType: GgmlType.F16 });
      const file = readGguf(modelPath);
      const hp = readHparams(file);
      const tokens = sequence(hp.nVocab);
      const ours = scalarNativeLogits(modelPath, tokens);
      const ref = await onnxLogits(ort!, file, hp, tokens, true);
      const agreement = compare(ours, ref);
      let differing = 0;
      for (let i = 0; i < ours.length; i++) if (ours[i] !== ref[i]) differing++;
      t.diagnostic(`${label}: ${differing} of ${ours.length} logits differ from the emulated-rounding ONNX graph; ${fmt(agreement)}`);
      assert.equal(differing, 0, `${label}: expected bit-identical logits, ${differing} differ (max |Δ| ${agreement.maxAbs})`);
    }
  } finally {
    cleanup();
  }
});
