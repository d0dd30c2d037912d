// Float32 -> GGUF tensor bytes for the formats simple enough to convert in TypeScript (F32, F16,
// BF16, Q8_0), following ggml's reference definitions. Used for fixtures and synthetic models;
// other block formats go through the native addon's quantize().

import { GgmlType } from './ggml-types';

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

/** IEEE half-precision bits of `x`, rounded to nearest, ties to even (as F16C does). */
export function f32ToF16Bits(x: number): number {
  f32Scratch[0] = x;
  const b = u32Scratch[0]!;
  const sign = (b >>> 16) & 0x8000;
  const exp = (b >>> 23) & 0xff;
  let mant = b & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    // Subnormal half (or zero): value = half × 2^-24.
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rem > halfway || (rem === halfway && (half & 1) !== 0)) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  // A carry out of the mantissa correctly bumps the exponent (up to infinity).
  if (rem > 0x1000 || (rem === 0x1000 && (half & 1) !== 0)) half++;
  return sign | half;
}

export function f16BitsToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? Number.NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** bfloat16 bits of `x`: round to nearest even; NaN stays a (quiet) NaN, as ggml does. */
export function f32ToBf16Bits(x: number): number {
  f32Scratch[0] = x;
  const u = u32Scratch[0]!;
  if ((u & 0x7fffffff) > 0x7f800000) return ((u >>> 16) | 64) & 0xffff;
  return ((u + (0x7fff + ((u >>> 16) & 1))) >>> 16) & 0xffff;
}

export function bf16BitsToF32(h: number): number {
  u32Scratch[0] = h << 16;
  return f32Scratch[0]!;
}

/** C's roundf: halves away from zero. */
function roundHalfAway(x: number): number {
  return x < 0 ? -Math.floor(-x + 0.5) : Math.floor(x + 0.5);
}

const Q8_0_BLOCK = 32;
const Q8_0_BYTES = 34;

/** Q8_0: per 32 values, an f16 scale d = max|x| / 127 and 32 int8 round(x / d). */
export function quantizeQ8_0(src: Float32Array): Uint8Array {
  if (src.length % Q8_0_BLOCK !== 0) throw new Error(`quantizeQ8_0: ${src.length} values is not a multiple of ${Q8_0_BLOCK}`);
  const nBlocks = src.length / Q8_0_BLOCK;
  const out = new Uint8Array(nBlocks * Q8_0_BYTES);
  const view = new DataView(out.buffer);
  const quants = new Int8Array(out.buffer);
  for (let b = 0; b < nBlocks; b++) {
    const base = b * Q8_0_BLOCK;
    let amax = 0;
    for (let i = 0; i < Q8_0_BLOCK; i++) amax = Math.max(amax, Math.abs(src[base + i]!));
    // Single-precision arithmetic as in ggml's reference, so results match it bit for bit.
    const d = Math.fround(amax / 127);
    const id = d !== 0 ? Math.fround(1 / d) : 0;
    const at = b * Q8_0_BYTES;
    view.setUint16(at, f32ToF16Bits(d), true);
    for (let i = 0; i < Q8_0_BLOCK; i++) quants[at + 2 + i] = roundHalfAway(Math.fround(src[base + i]! * id));
  }
  return out;
}

export function dequantizeQ8_0(bytes: Uint8Array): Float32Array {
  const nBlocks = Math.floor(bytes.length / Q8_0_BYTES);
  const out = new Float32Array(nBlocks * Q8_0_BLOCK);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let b = 0; b < nBlocks; b++) {
    const d = f16BitsToF32(view.getUint16(b * Q8_0_BYTES, true));
    for (let i = 0; i < Q8_0_BLOCK; i++) out[b * Q8_0_BLOCK + i] = d * view.getInt8(b * Q8_0_BYTES + 2 + i);
  }
  return out;
}

/** The types this module converts to. */
export const TS_CONVERTIBLE_TYPES: readonly GgmlType[] = [GgmlType.F32, GgmlType.F16, GgmlType.BF16, GgmlType.Q8_0];

/** Converts float32 values to the bytes of `type`, or returns undefined when TS cannot. */
export function convertF32(type: GgmlType, src: Float32Array): Uint8Array | undefined {
  switch (type) {
    case GgmlType.F32:
      return new Uint8Array(src.buffer.slice(src.byteOffset, src.byteOffset + src.byteLength));
    // Typed arrays are host-endian; every platform Fulcrum builds for is little-endian like GGUF.
    case GgmlType.F16: {
      const out = new Uint16Array(src.length);
      for (let i = 0; i < src.length; i++) out[i] = f32ToF16Bits(src[i]!);
      return new Uint8Array(out.buffer);
    }
    case GgmlType.BF16: {
      const out = new Uint16Array(src.length);
      for (let i = 0; i < src.length; i++) out[i] = f32ToBf16Bits(src[i]!);
      return new Uint8Array(out.buffer);
    }
    case GgmlType.Q8_0:
      return quantizeQ8_0(src);
    default:
      return undefined;
  }
}
