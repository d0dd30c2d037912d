// Native kernels against plain TypeScript references: matmul for each float format and Q8_0
// (activations rounded/quantized the way the weight format's vec_dot expects), RMSNorm, RoPE in
// both styles, and thread-count independence.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { GgmlType } from '../../engine/model/ggml-types';
import { convertF32, dequantizeQ8_0, f16BitsToF32, f32ToF16Bits, f32ToBf16Bits, bf16BitsToF32, quantizeQ8_0 } from '../../engine/model/quantize-ts';
import { nativeKernels } from '../../engine/native/model';

function rand(n: number, seed: number): Float32Array {
  let s = seed >>> 0;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = (s / 4294967296) * 2 - 1;
  }
  return out;
}

/** What the weights and activations become before the dot product, per format. */
function asComputed(type: GgmlType, v: Float32Array): Float32Array {
  switch (type) {
    case GgmlType.F32: return v;
    case GgmlType.F16: return v.map((x) => f16BitsToF32(f32ToF16Bits(x)));
    case GgmlType.BF16: return v.map((x) => bf16BitsToF32(f32ToBf16Bits(x)));
    case GgmlType.Q8_0: return dequantizeQ8_0(quantizeQ8_0(v));
    default: throw new Error(`no reference for type ${type}`);
  }
}

function refMatmul(type: GgmlType, w: Float32Array, rows: number, cols: number, x: Float32Array, nTokens: number): Float64Array {
  const wq = asComputed(type, w);
  const y = new Float64Array(rows * nTokens);
  for (let t = 0; t < nTokens; t++) {
    const xq = asComputed(type, x.subarray(t * cols, (t + 1) * cols));
    for (let r = 0; r < rows; r++) {
      let s = 0;
      for (let c = 0; c < cols; c++) s += wq[r * cols + c]! * xq[c]!;
      y[t * rows + r] = s;
    }
  }
  return y;
}

for (const type of [GgmlType.F32, GgmlType.F16, GgmlType.BF16, GgmlType.Q8_0]) {
  test(`matmul ${GgmlType[type]}: decode and prefill shapes match the reference, any thread count`, () => {
    const k = nativeKernels();
    const rows = 37, cols = 160;
    const w = rand(rows * cols, 1 + type);
    const bytes = convertF32(type, w)!;
    for (const nTokens of [1, 3, 17]) {
      const x = rand(cols * nTokens, 100 + nTokens);
      const ref = refMatmul(type, w, rows, cols, x, nTokens);
      const y1 = k.matmul(type, bytes, rows, cols, x, nTokens, 1);
      const y2 = k.matmul(type, bytes, rows, cols, x, nTokens, 2);
      // More threads than cores: shares whose worker is not scheduled yet run on the caller.
      const y5 = k.matmul(type, bytes, rows, cols, x, nTokens, 5);
      for (let i = 0; i < ref.length; i++) {
        assert.equal(y5[i], y1[i], 'result depends on the thread count (5 threads)');
        assert.ok(Math.abs(y1[i]! - ref[i]!) < 1e-4 * (1 + Math.abs(ref[i]!)), `${GgmlType[type]} n=${nTokens} [${i}]: ${y1[i]} vs ${ref[i]}`);
        assert.equal(y2[i], y1[i], 'result depends on the thread count');
      }
    }
  });
}

test('matmul rejects sizes that do not match the buffers', () => {
  const k = nativeKernels();
  assert.throws(() => k.matmul(GgmlType.F32, new Uint8Array(10), 2, 4, new Float32Array(4), 1, 1), /bytes/);
  assert.throws(() => k.matmul(GgmlType.Q8_0, new Uint8Array(34), 1, 33, new Float32Array(33), 1, 1), /block size/);
});

test('rmsnorm matches the definition (whole vectors, a tail, a model-sized row)', () => {
  // 96: whole vectors of every ISA; 37 and 4861: tails past the last vector; 896: the 0.5B width.
  for (const n of [96, 37, 896, 4861]) {
    const x = rand(n, 5), w = rand(n, 6);
    const y = nativeKernels().rmsnorm(x, w, 1e-5);
    const ms = x.reduce((s, v) => s + v * v, 0) / x.length;
    const scale = 1 / Math.sqrt(ms + 1e-5);
    for (let i = 0; i < x.length; i++) {
      const want = x[i]! * scale * w[i]!;
      assert.ok(Math.abs(y[i]! - want) <= 1e-6 * Math.abs(want) + 1e-7, `n ${n} element ${i}: ${y[i]} against ${want}`);
    }
  }
});

test('rope: normal pairs adjacent dims, neox pairs halves; position 0 is the identity', () => {
  const k = nativeKernels();
  const heads = 2, hd = 8, pos = 5, base = 10000;
  const x = rand(heads * hd, 9);
  assert.deepEqual(Array.from(k.rope(x, heads, hd, 0, hd, base, 1, false)), Array.from(x));
  for (const neox of [false, true]) {
    const y = k.rope(x, heads, hd, pos, hd, base, 0.5, neox);
    for (let h = 0; h < heads; h++) {
      for (let i = 0; i < hd / 2; i++) {
        const theta = pos * 0.5 * Math.pow(base, (-2 * i) / hd);
        const [a, b] = neox ? [h * hd + i, h * hd + i + hd / 2] : [h * hd + 2 * i, h * hd + 2 * i + 1];
        const ea = x[a]! * Math.cos(theta) - x[b]! * Math.sin(theta);
        const eb = x[a]! * Math.sin(theta) + x[b]! * Math.cos(theta);
        assert.ok(Math.abs(y[a]! - ea) < 1e-5 && Math.abs(y[b]! - eb) < 1e-5, `neox=${neox} h=${h} i=${i}`);
      }
    }
  }
});

test('ISA level and core count are reported', () => {
  const k = nativeKernels();
  // One of the levels the kernels dispatch to (QuantIsa, engine/native/quant.ts): FULCRUM_ISA=avxvnni
  // reports 'avxvnni'.
  assert.match(k.isaLevel(), /^(scalar|avx2|avxvnni|avx512)$/);
  assert.ok(k.physicalCores() >= 1);
});
