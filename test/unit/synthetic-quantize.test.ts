// The TypeScript converters synthetic models use: F16 and BF16 rounding, and Q8_0 blocks.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GgmlType } from '../../engine/model/ggml-types';
import {
  bf16BitsToF32,
  convertF32,
  dequantizeQ8_0,
  f16BitsToF32,
  f32ToBf16Bits,
  f32ToF16Bits,
  quantizeQ8_0,
} from '../../engine/model/quantize-ts';

test('f32 -> f16: exact values, rounding to nearest even, overflow, subnormals, specials', () => {
  const cases: Array<[number, number]> = [
    [1, 0x3c00], [-2, 0xc000], [0.5, 0x3800], [65504, 0x7bff],
    [65520, 0x7c00], // halfway between 65504 and 2^16: ties to even, which is infinity
    [1 + 2 ** -11, 0x3c00], // tie -> even mantissa 0
    [1 + 3 * 2 ** -11, 0x3c02], // tie -> even mantissa 2
    [1 + 2 ** -11 + 2 ** -20, 0x3c01], // just above the tie
    [2 ** -14, 0x0400], // smallest normal
    [2 ** -24, 0x0001], // smallest subnormal
    [2 ** -25, 0x0000], // tie with zero -> even (zero)
    [1.5 * 2 ** -25, 0x0001],
    [-0, 0x8000], [Infinity, 0x7c00], [-Infinity, 0xfc00], [1e-30, 0],
  ];
  for (const [x, bits] of cases) assert.equal(f32ToF16Bits(x), bits, `${x}`);
  assert.equal(f32ToF16Bits(Number.NaN) & 0x7c00, 0x7c00);
  assert.notEqual(f32ToF16Bits(Number.NaN) & 0x3ff, 0);
});

test('f16: every finite bit pattern survives f16 -> f32 -> f16', () => {
  for (let h = 0; h < 0x10000; h++) {
    if ((h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0) continue; // NaN payloads
    assert.equal(f32ToF16Bits(f16BitsToF32(h)), h, `0x${h.toString(16)}`);
  }
});

test('f32 -> bf16: rounding to nearest even, NaN stays NaN, every pattern round-trips', () => {
  assert.equal(f32ToBf16Bits(1), 0x3f80);
  assert.equal(f32ToBf16Bits(1 + 2 ** -8), 0x3f80); // tie -> even
  assert.equal(f32ToBf16Bits(1 + 3 * 2 ** -8), 0x3f82); // tie -> even
  assert.equal(f32ToBf16Bits(-2), 0xc000);
  assert.ok(Number.isNaN(bf16BitsToF32(f32ToBf16Bits(Number.NaN))));
  for (let h = 0; h < 0x10000; h++) {
    if ((h & 0x7f80) === 0x7f80 && (h & 0x7f) !== 0) continue;
    assert.equal(f32ToBf16Bits(bf16BitsToF32(h)), h, `0x${h.toString(16)}`);
  }
});

test('Q8_0: scale max|x|/127 as f16, int8 round-half-away quants, 34-byte blocks', () => {
  const x = new Float32Array(64);
  for (let i = 0; i < 32; i++) x[i] = i - 16; // amax 16
  x[32] = 127; x[33] = 2.5; x[34] = -2.5; x[35] = -127; // second block: d = 1 exactly
  const q = quantizeQ8_0(x);
  assert.equal(q.length, 68);
  const view = new DataView(q.buffer);
  assert.equal(view.getUint16(0, true), f32ToF16Bits(Math.fround(16 / 127)));
  assert.equal(view.getInt8(2 + 0), -127); // -16
  assert.equal(view.getInt8(2 + 16), 0); // 0
  assert.equal(view.getInt8(2 + 31), Math.round(15 * 127 / 16)); // 119
  assert.equal(view.getUint16(34, true), 0x3c00); // d = 1
  assert.deepEqual([view.getInt8(36), view.getInt8(37), view.getInt8(38), view.getInt8(39), view.getInt8(40)], [127, 3, -3, -127, 0]);
  const back = dequantizeQ8_0(q);
  for (let i = 0; i < 64; i++) assert.ok(Math.abs(back[i]! - x[i]!) <= 0.5 * (i < 32 ? 16 / 127 : 1) + 1e-3, `${i}: ${back[i]} vs ${x[i]}`);
  // An all-zero block has scale 0 and zero quants (no division by zero).
  assert.deepEqual(quantizeQ8_0(new Float32Array(32)), new Uint8Array(34));
  assert.throws(() => quantizeQ8_0(new Float32Array(33)), /33 values is not a multiple of 32/);
});

test('convertF32 sizes per type, undefined for formats TS does not convert', () => {
  const x = new Float32Array(64).fill(0.25);
  assert.equal(convertF32(GgmlType.F32, x)!.length, 256);
  assert.equal(convertF32(GgmlType.F16, x)!.length, 128);
  assert.equal(convertF32(GgmlType.BF16, x)!.length, 128);
  assert.equal(convertF32(GgmlType.Q8_0, x)!.length, 68);
  assert.equal(convertF32(GgmlType.Q4_K, x), undefined);
});
