// Seeded random data for the quant tests: raw blocks of random bytes with finite scale fields,
// and Gaussian float vectors. A fixed-seed generator keeps failures reproducible.
import type { RefFormat } from './quant-reference';

/** xorshift32: small, seedable, good enough for test data. */
export class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0 || 1;
  }
  u32(): number {
    let x = this.s;
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    this.s = x >>> 0;
    return this.s;
  }
  /** Uniform in [0, 1). */
  uniform(): number {
    return this.u32() / 2 ** 32;
  }
  int(n: number): number {
    return Math.floor(this.uniform() * n);
  }
  gaussian(): number {
    const u = Math.max(this.uniform(), 1e-12), v = this.uniform();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }
}

/** A random finite f16 bit pattern with exponent field in [eMin, eMax] (0 = subnormal). */
export function randomF16(rng: Rng, eMin = 0, eMax = 30): number {
  const e = eMin + rng.int(eMax - eMin + 1);
  return ((rng.int(2) << 15) | (e << 10) | rng.int(1024)) & 0xffff;
}

/** `nBlocks` blocks of random bytes whose f16/f32 scale fields are random finite values. */
export function randomBlocks(fmt: RefFormat, nBlocks: number, rng: Rng, f16Exp: [number, number] = [0, 30]): Uint8Array {
  const b = new Uint8Array(nBlocks * fmt.typeSize);
  for (let i = 0; i < b.length; i++) b[i] = rng.int(256);
  const dv = new DataView(b.buffer);
  for (let k = 0; k < nBlocks; k++) {
    const off = k * fmt.typeSize;
    for (const o of fmt.f16Fields) dv.setUint16(off + o, randomF16(rng, f16Exp[0], f16Exp[1]), true);
    for (const o of fmt.f32Fields) dv.setFloat32(off + o, (rng.uniform() * 2 - 1) * 2 ** (rng.int(40) - 20), true);
  }
  return b;
}

export function gaussianVector(n: number, rng: Rng, scale = 1): Float32Array {
  const v = new Float32Array(n);
  for (let i = 0; i < n; i++) v[i] = rng.gaussian() * scale;
  return v;
}

/** Index of the first element whose float32 bits differ, or -1. */
export function firstBitMismatch(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) return Math.min(a.length, b.length);
  const ua = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const ub = new Uint32Array(b.buffer, b.byteOffset, b.length);
  for (let i = 0; i < ua.length; i++) if (ua[i] !== ub[i]) return i;
  return -1;
}
