// quantize -> dequantize error bounds per format, and bit-identical activation quantization
// (Q8_0, Q8_1, Q8_K) across ISA paths. Bounds are derived from each format's rounding rule
// (see `bounds` below); RMS limits are relative to the Gaussian input's sigma (= 1).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';

import { addonPath } from '../../engine/native/addon';
import { f16ToF32, refDequantize, refFormat, scaleMinK4 } from '../helpers/quant-reference';
import { Rng, gaussianVector } from '../helpers/quant-random';

const built = existsSync(addonPath());
const skip = built ? false : `native addon not built (${addonPath()}); run node scripts/build-native.mjs`;
const f = Math.fround;

async function quant() {
  return import('../../engine/native/quant');
}

function rf16(b: Uint8Array, i: number): number {
  return f16ToF32((b[i] ?? 0) | ((b[i + 1] ?? 0) << 8));
}

/**
 * Per-element error allowance for element e of the input, from the block that encodes it.
 * `amax` is the block's largest |x| (what the quantizer derived its scale from).
 *  Q8_0/Q8_1: q = round(x/d) with d = amax/127 in f32, stored as f16 d16:
 *             |x - d16*q| <= d/2 + 127*|d - d16|.
 *  Q8_K:      d is stored as f32: |err| <= d/2.
 *  Q4_0/Q5_0: the largest-magnitude element maps to the most negative level, so its opposite
 *             clamps one level short: |err| <= |d| + L*|d - d16| (L = 8 or 16).
 *  Q4_1/Q5_1: nearest of 16/32 levels between min and max: d/2 + L*|d - d16| + |min - m16|.
 *  Q6_K:      half a step, a full step where +32 clamps to 31, plus the int8 rounding of the
 *             sub-block scale (<= d/2 per unit of q, |q| <= 32): step + 16*d.
 *  Q4_K/Q5_K: least-squares scale/min per sub-block (outliers may clamp) and 6-bit rounding of
 *             both against the super-block d/dmin: 2*step + (L/2)*d + dmin (L = 15 or 31).
 */
type Bound = (blocks: Uint8Array, x: Float32Array, e: number) => number;

function blockAmax(x: Float32Array, start: number, len: number): number {
  let a = 0;
  for (let i = start; i < start + len; i++) a = Math.max(a, Math.abs(x[i] ?? 0));
  return a;
}

const bounds: Record<string, Bound> = {
  Q8_0: (b, x, e) => {
    const k = Math.floor(e / 32), d = f(blockAmax(x, k * 32, 32) / 127), d16 = rf16(b, k * 34);
    return d / 2 + 127 * Math.abs(d - d16);
  },
  Q8_1: (b, x, e) => {
    const k = Math.floor(e / 32), d = f(blockAmax(x, k * 32, 32) / 127), d16 = rf16(b, k * 36);
    return d / 2 + 127 * Math.abs(d - d16);
  },
  Q8_K: (b, _x, e) => {
    const k = Math.floor(e / 256);
    return new DataView(b.buffer, b.byteOffset + k * 292, 4).getFloat32(0, true) / 2;
  },
  Q4_0: (b, x, e) => {
    const k = Math.floor(e / 32), d16 = Math.abs(rf16(b, k * 18)), d = f(blockAmax(x, k * 32, 32) / 8);
    return d16 + 8 * Math.abs(d - d16);
  },
  Q5_0: (b, x, e) => {
    const k = Math.floor(e / 32), d16 = Math.abs(rf16(b, k * 22)), d = f(blockAmax(x, k * 32, 32) / 16);
    return d16 + 16 * Math.abs(d - d16);
  },
  Q4_1: (b, x, e) => minMaxBound(b, x, e, 20, 15),
  Q5_1: (b, x, e) => minMaxBound(b, x, e, 24, 31),
  Q6_K: (b, _x, e) => {
    const k = Math.floor(e / 256), off = k * 210, d = Math.abs(rf16(b, off + 208));
    const sc = (((b[off + 192 + ((e % 256) >> 4)] ?? 0) << 24) >> 24);
    return Math.abs(d * sc) + 16 * d;
  },
  Q4_K: (b, _x, e) => kBound(b, e, 144, 15),
  Q5_K: (b, _x, e) => kBound(b, e, 176, 31),
};

function minMaxBound(b: Uint8Array, x: Float32Array, e: number, size: number, levels: number): number {
  const k = Math.floor(e / 32);
  let mn = Infinity, mx = -Infinity;
  for (let i = k * 32; i < k * 32 + 32; i++) {
    mn = Math.min(mn, x[i] ?? 0);
    mx = Math.max(mx, x[i] ?? 0);
  }
  const d = f(f(mx - mn) / levels), d16 = rf16(b, k * size), m16 = rf16(b, k * size + 2);
  return d / 2 + levels * Math.abs(d - d16) + Math.abs(mn - m16);
}

function kBound(b: Uint8Array, e: number, size: number, levels: number): number {
  const k = Math.floor(e / 256), off = k * size;
  const d = rf16(b, off), dmin = rf16(b, off + 2);
  const [sc] = scaleMinK4(b, off + 4, Math.floor((e % 256) / 32));
  return 2 * d * sc + (levels / 2) * d + dmin;
}

// RMS error limits for unit Gaussian input. Rounding to the nearest of evenly spaced levels
// leaves RMS step/sqrt(12); the step is about (range of the block)/levels, so these are that
// with headroom (measured values are about 2/3 of each limit).
const rmsLimit: Record<string, number> = {
  Q8_0: 0.006, Q8_1: 0.006, Q8_K: 0.01, Q4_0: 0.12, Q5_0: 0.06, Q4_1: 0.1, Q5_1: 0.05,
  Q4_K: 0.1, Q5_K: 0.05, Q6_K: 0.025,
};

for (const name of Object.keys(bounds)) {
  test(`quantize -> dequantize ${name}: per-element bound and RMS error`, { skip }, async (t) => {
    const q = await quant();
    const ref = refFormat(name);
    const rng = new Rng(0xabc + ref.typeId);
    const n = ref.blockSize * (ref.blockSize === 32 ? 128 : 16);
    const x = gaussianVector(n, rng);
    // a few blocks with a wide dynamic range (outliers), as real weights have
    for (let i = 0; i < n; i += 5 * ref.blockSize) x[i + 3] = 20 * Math.sign(x[i + 3] ?? 1);
    const blocks = q.quantize(ref.typeId, x);
    assert.equal(blocks.length, (n / ref.blockSize) * ref.typeSize);
    const y = q.dequantize(ref.typeId, blocks, n);
    assert.deepEqual(y, refDequantize(ref, blocks), 'native and reference decode of the quantized bytes');
    const bound = bounds[name];
    assert.ok(bound);
    let se = 0, counted = 0;
    for (let e = 0; e < n; e++) {
      const err = Math.abs((x[e] ?? 0) - (y[e] ?? 0));
      // RMS over the plain Gaussian blocks only (the outlier blocks have coarser steps)
      if (Math.floor(e / ref.blockSize) % 5 !== 0) {
        se += err * err;
        counted++;
      }
      const allowed: number = bound(blocks, x, e) * (1 + 1e-5) + 1e-6 * Math.abs(x[e] ?? 0);
      if (err > allowed) assert.fail(`${name}: element ${e} = ${x[e]} decodes to ${y[e]} (error ${err} > ${allowed})`);
    }
    const rms = Math.sqrt(se / counted);
    const limit = rmsLimit[name] ?? 0;
    t.diagnostic(`${name}: RMS error ${rms.toFixed(5)} (limit ${limit}) for unit Gaussian input`);
    assert.ok(rms <= limit, `${name}: RMS error ${rms.toFixed(5)} > ${limit}`);
  });
}

test('quantize: all-zero input encodes zero blocks that decode to zeros', { skip }, async () => {
  const q = await quant();
  for (const f0 of q.quantFormats()) {
    const x = new Float32Array(f0.blockSize * 2);
    const y = q.dequantize(f0.typeId, q.quantize(f0.typeId, x), x.length);
    assert.ok(y.every((v) => v === 0), `${f0.name}`);
  }
});

test('quantize: activation formats (Q8_0, Q8_1, Q8_K) are bit-identical on every ISA path', { skip }, async () => {
  const q = await quant();
  const rng = new Rng(7);
  const n = 4096;
  const inputs: Float32Array[] = [gaussianVector(n, rng), gaussianVector(n, rng, 1e-6), gaussianVector(n, rng, 3e4)];
  // ties: values exactly halfway between levels (amax 127 => d = 1), and a lone spike
  const ties = new Float32Array(n);
  for (let i = 0; i < n; i++) ties[i] = i % 32 === 0 ? 127 : ((i % 254) - 127) + 0.5;
  inputs.push(ties);
  const spike = new Float32Array(n);
  spike[100] = -5;
  inputs.push(spike);
  for (const name of ['Q8_0', 'Q8_1', 'Q8_K']) {
    const ref = refFormat(name);
    for (const [k, x] of inputs.entries()) {
      const scalar = q.quantize(ref.typeId, x, 'scalar');
      for (const isa of q.quantIsas()) {
        assert.deepEqual(q.quantize(ref.typeId, x, isa), scalar, `${name} input ${k} on ${isa}`);
      }
    }
  }
});

test('quantize Q8_K: bsums are the sums of each 16 quants', { skip }, async () => {
  const q = await quant();
  const x = gaussianVector(1024, new Rng(99));
  for (const isa of q.quantIsas()) {
    const b = q.quantize(15, x, isa);
    const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
    for (let k = 0; k < 4; k++) {
      for (let g = 0; g < 16; g++) {
        let s = 0;
        for (let j = 0; j < 16; j++) s += dv.getInt8(k * 292 + 4 + g * 16 + j);
        assert.equal(dv.getInt16(k * 292 + 260 + 2 * g, true), s, `${isa} block ${k} group ${g}`);
      }
    }
  }
});
