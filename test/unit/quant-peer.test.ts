// Parity with llama.cpp's own kernels (the ggml CPU backend that node-llama-cpp ships), on the
// very same bytes: ggml's dequantize_row_* must decode our random raw blocks bit for bit like
// our decoder, and ggml's vec_dot must agree with ours on our weights and quantized activations
// (tolerance: 2e-5 * Σ|w_i a_i|, float32 summation order). Skipped where the library is absent.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';

import { addonPath } from '../../engine/native/addon';
import { absDot64, refDequantize, refFormat } from '../helpers/quant-reference';
import { Rng, firstBitMismatch, gaussianVector, randomBlocks } from '../helpers/quant-random';

const root = path.resolve(__dirname, '..', '..');
const binDir = path.join(root, 'node_modules', '@node-llama-cpp', 'linux-x64', 'bins', 'linux-x64');

function peerLibrary(isas: string[]): string | undefined {
  // haswell = AVX2/FMA/F16C build; x64 = baseline build
  const name = isas.includes('avx2') ? 'libggml-cpu-haswell.so' : 'libggml-cpu-x64.so';
  const p = path.join(binDir, name);
  return existsSync(p) ? p : undefined;
}

const built = existsSync(addonPath());
const skip = !built
  ? `native addon not built (${addonPath()})`
  : process.platform !== 'linux' || process.arch !== 'x64'
    ? `node-llama-cpp's linux-x64 ggml build does not run on ${process.platform}-${process.arch}`
    : !existsSync(binDir) ? `llama.cpp CPU libraries not found in ${binDir}` : false;

async function openPeer() {
  const q = await import('../../engine/native/quant');
  const lib = peerLibrary(q.quantIsas());
  if (!lib) return undefined;
  q.quantPeer.open(lib);
  return q;
}

const DEQUANT = ['Q4_0', 'Q4_1', 'Q5_0', 'Q5_1', 'Q8_0', 'Q4_K', 'Q5_K', 'Q6_K', 'Q8_K'];
const DOT: Record<string, string> = {
  Q4_0: 'Q8_0', Q4_1: 'Q8_1', Q5_0: 'Q8_0', Q5_1: 'Q8_1', Q8_0: 'Q8_0', Q4_K: 'Q8_K', Q5_K: 'Q8_K', Q6_K: 'Q8_K',
};

test('llama.cpp dequantize_row_* decodes random raw blocks exactly like ours', { skip }, async (t) => {
  const q = await openPeer();
  if (!q) return t.skip('no ggml CPU library for this CPU');
  for (const name of DEQUANT) {
    const ref = refFormat(name);
    const nBlocks = ref.blockSize === 32 ? 64 : 8;
    const data = randomBlocks(ref, nBlocks, new Rng(0x9e37 + ref.typeId));
    const n = nBlocks * ref.blockSize;
    const ours = q.dequantize(ref.typeId, data, n);
    const theirs = q.quantPeer.dequantize(ref.typeId, data, n);
    const i = firstBitMismatch(ours, theirs);
    assert.equal(i, -1, `${name}: element ${i}: ours ${ours[i]}, llama.cpp ${theirs[i]}`);
    assert.equal(firstBitMismatch(refDequantize(ref, data), theirs), -1, `${name}: TS reference vs llama.cpp`);
  }
});

test('llama.cpp vec_dot agrees with ours on the same weight and activation bytes', { skip }, async (t) => {
  const q = await openPeer();
  if (!q) return t.skip('no ggml CPU library for this CPU');
  const rng = new Rng(0x1234);
  for (const [name, actName] of Object.entries(DOT)) {
    const w = refFormat(name), a = refFormat(actName);
    for (const n of [w.blockSize * 2, 4096]) {
      const weights = [q.quantize(w.typeId, gaussianVector(n, rng, 0.05)), randomBlocks(w, n / w.blockSize, rng, [5, 15])];
      for (const wb of weights) {
        const act = gaussianVector(n, rng);
        const qa = q.quantize(a.typeId, act, 'scalar');
        const scale = absDot64(refDequantize(w, wb), refDequantize(a, qa));
        const theirs = q.quantPeer.vecDot(w.typeId, wb, qa, n);
        for (const isa of q.quantIsas()) {
          const ours = q.vecDot(w.typeId, wb, act, isa);
          const tol = 2e-5 * scale + 1e-30;
          assert.ok(Math.abs(ours - theirs) <= tol, `${name} n=${n} ${isa}: ours ${ours}, llama.cpp ${theirs} (tolerance ${tol})`);
        }
      }
    }
  }
});

test('quantize: Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 bytes equal llama.cpp reference quantizer; K-quants within 5 % of its RMS error', { skip }, async (t) => {
  const q = await openPeer();
  if (!q) return t.skip('no ggml CPU library for this CPU');
  const rng = new Rng(0x4242);
  const x = gaussianVector(256 * 64, rng);
  for (let i = 0; i < x.length; i += 1280) x[i + 3] = 20 * Math.sign(x[i + 3] ?? 1);  // outliers
  // Same rounding rules as ggml for the legacy formats (Q8_0: ggml rounds ties away from zero,
  // we round them to even; Gaussian data has no exact ties, so the bytes still agree).
  for (const name of ['Q4_0', 'Q4_1', 'Q5_0', 'Q5_1', 'Q8_0']) {
    const id = refFormat(name).typeId;
    assert.deepEqual(q.quantize(id, x), q.quantPeer.quantize(id, x), `${name} bytes`);
  }
  // K-quants: our least-squares search vs ggml's; compare the reconstruction error.
  const rms = (id: number, b: Uint8Array): number => {
    const y = q.dequantize(id, b, x.length);
    let s = 0;
    for (let i = 0; i < x.length; i++) s += ((x[i] ?? 0) - (y[i] ?? 0)) ** 2;
    return Math.sqrt(s / x.length);
  };
  for (const name of ['Q4_K', 'Q5_K', 'Q6_K']) {
    const id = refFormat(name).typeId;
    const ours = rms(id, q.quantize(id, x)), theirs = rms(id, q.quantPeer.quantize(id, x));
    t.diagnostic(`${name}: RMS error ours ${ours.toFixed(5)}, llama.cpp reference ${theirs.toFixed(5)}`);
    assert.ok(ours <= 1.05 * theirs, `${name}: RMS error ${ours} vs llama.cpp ${theirs}`);
  }
});
