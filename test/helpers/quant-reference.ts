// An independent decoder of ggml's block formats, written from the format definitions (byte
// offsets and bit layouts below), to check the native kernels against. Arithmetic is done the
// way the format defines it, in float32 (Math.fround after every operation), so dequantized
// values must match the native scalar code bit for bit.
//
// Layouts (little-endian; f16 = IEEE binary16, f32 = binary32):
//   Q4_0 18 B: d f16 | qs[16]            x[j] = (lo(qs[j]) - 8)*d, x[j+16] = (hi(qs[j]) - 8)*d
//   Q4_1 20 B: d f16 | m f16 | qs[16]    x = q*d + m (q as Q4_0, no offset)
//   Q5_0 22 B: d f16 | qh u32 | qs[16]   q = nibble | bit(j or j+16 of qh) << 4; x = (q - 16)*d
//   Q5_1 24 B: d f16 | m f16 | qh u32 | qs[16]   x = q*d + m
//   Q8_0 34 B: d f16 | qs i8[32]         x = d*q
//   Q8_1 36 B: d f16 | s f16 | qs i8[32] x = d*q   (s = d*Σq, carried for dot products)
//   Q8_K 292 B: d f32 | qs i8[256] | bsums i16[16]   x = d*q
//   Q4_K 144 B: d f16 | dmin f16 | scales[12] | qs[128]
//        chunk c (0..3) of 64: sub-block 2c = low nibbles of qs[32c..32c+31], 2c+1 = high nibbles;
//        x = (d*sc)*q - (dmin*m), sc/m 6-bit from scales (see scaleMinK4)
//   Q5_K 176 B: d f16 | dmin f16 | scales[12] | qh[32] | qs[128]
//        as Q4_K, q += 16 if bit 2c (first 32 of the chunk) / 2c+1 (second 32) of qh[l] is set
//   Q6_K 210 B: ql[128] | qh[64] | scales i8[16] | d f16
//        half h (128 elements), l < 32: q of element l+32k = (nibble k of ql) | (bits 2k..2k+1 of
//        qh[32h+l]) << 4 where nibble 0 = lo(ql[64h+l]), 1 = lo(ql[64h+l+32]),
//        2 = hi(ql[64h+l]), 3 = hi(ql[64h+l+32]); x = (d*scales[e/16])*(q - 32)

const f = Math.fround;

export interface RefFormat {
  name: string;
  typeId: number;
  blockSize: number;
  typeSize: number;
  /** Byte offsets of the f16 fields that hold scales (so tests can keep them finite). */
  f16Fields: number[];
  /** Byte offsets of f32 scale fields. */
  f32Fields: number[];
  decodeBlock(b: Uint8Array, off: number, out: Float32Array, o: number): void;
}

export function f16ToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 31) return m === 0 ? sign * Infinity : NaN;
  return sign * (1 + m / 1024) * 2 ** (e - 15);
}

function u8(b: Uint8Array, i: number): number {
  const v = b[i];
  if (v === undefined) throw new RangeError(`byte ${i} is past the end (${b.length} bytes)`);
  return v;
}
function i8(b: Uint8Array, i: number): number {
  const v = u8(b, i);
  return v >= 128 ? v - 256 : v;
}
function rf16(b: Uint8Array, i: number): number {
  return f16ToF32(u8(b, i) | (u8(b, i + 1) << 8));
}
function rf32(b: Uint8Array, i: number): number {
  return new DataView(b.buffer, b.byteOffset + i, 4).getFloat32(0, true);
}
function ru32(b: Uint8Array, i: number): number {
  return (u8(b, i) | (u8(b, i + 1) << 8) | (u8(b, i + 2) << 16) | (u8(b, i + 3) << 24)) >>> 0;
}

/** The 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes at `s`. */
export function scaleMinK4(b: Uint8Array, s: number, j: number): [number, number] {
  if (j < 4) return [u8(b, s + j) & 63, u8(b, s + j + 4) & 63];
  const sc = (u8(b, s + j + 4) & 0x0f) | ((u8(b, s + j - 4) >> 6) << 4);
  const m = (u8(b, s + j + 4) >> 4) | ((u8(b, s + j) >> 6) << 4);
  return [sc, m];
}

const Q4_0: RefFormat = {
  name: 'Q4_0', typeId: 2, blockSize: 32, typeSize: 18, f16Fields: [0], f32Fields: [],
  decodeBlock(b, off, out, o) {
    const d = rf16(b, off);
    for (let j = 0; j < 16; j++) {
      const q = u8(b, off + 2 + j);
      out[o + j] = f(((q & 0x0f) - 8) * d);
      out[o + j + 16] = f(((q >> 4) - 8) * d);
    }
  },
};

const Q4_1: RefFormat = {
  name: 'Q4_1', typeId: 3, blockSize: 32, typeSize: 20, f16Fields: [0, 2], f32Fields: [],
  decodeBlock(b, off, out, o) {
    const d = rf16(b, off), m = rf16(b, off + 2);
    for (let j = 0; j < 16; j++) {
      const q = u8(b, off + 4 + j);
      out[o + j] = f(f((q & 0x0f) * d) + m);
      out[o + j + 16] = f(f((q >> 4) * d) + m);
    }
  },
};

function q5Values(b: Uint8Array, qhOff: number, qsOff: number): number[] {
  const qh = ru32(b, qhOff);
  const q: number[] = new Array<number>(32);
  for (let j = 0; j < 16; j++) {
    const v = u8(b, qsOff + j);
    q[j] = (v & 0x0f) | (((qh >>> j) & 1) << 4);
    q[j + 16] = (v >> 4) | (((qh >>> (j + 16)) & 1) << 4);
  }
  return q;
}

const Q5_0: RefFormat = {
  name: 'Q5_0', typeId: 6, blockSize: 32, typeSize: 22, f16Fields: [0], f32Fields: [],
  decodeBlock(b, off, out, o) {
    const d = rf16(b, off);
    const q = q5Values(b, off + 2, off + 6);
    for (let j = 0; j < 32; j++) out[o + j] = f(((q[j] ?? 0) - 16) * d);
  },
};

const Q5_1: RefFormat = {
  name: 'Q5_1', typeId: 7, blockSize: 32, typeSize: 24, f16Fields: [0, 2], f32Fields: [],
  decodeBlock(b, off, out, o) {
    const d = rf16(b, off), m = rf16(b, off + 2);
    const q = q5Values(b, off + 4, off + 8);
    for (let j = 0; j < 32; j++) out[o + j] = f(f((q[j] ?? 0) * d) + m);
  },
};

const Q8_0: RefFormat = {
  name: 'Q8_0', typeId: 8, blockSize: 32, typeSize: 34, f16Fields: [0], f32Fields: [],
  decodeBlock(b, off, out, o) {
    const d = rf16(b, off);
    for (let j = 0; j < 32; j++) out[o + j] = f(d * i8(b, off + 2 + j));
  },
};

const Q8_1: RefFormat = {
  name: 'Q8_1', typeId: 9, blockSize: 32, typeSize: 36, f16Fields: [0, 2], f32Fields: [],
  decodeBlock(b, off, out, o) {
    const d = rf16(b, off);
    for (let j = 0; j < 32; j++) out[o + j] = f(d * i8(b, off + 4 + j));
  },
};

const Q8_K: RefFormat = {
  name: 'Q8_K', typeId: 15, blockSize: 256, typeSize: 292, f16Fields: [], f32Fields: [0],
  decodeBlock(b, off, out, o) {
    const d = rf32(b, off);
    for (let j = 0; j < 256; j++) out[o + j] = f(d * i8(b, off + 4 + j));
  },
};

const Q4_K: RefFormat = {
  name: 'Q4_K', typeId: 12, blockSize: 256, typeSize: 144, f16Fields: [0, 2], f32Fields: [],
  decodeBlock(b, off, out, o) {
    const d = rf16(b, off), dmin = rf16(b, off + 2);
    for (let c = 0; c < 4; c++) {
      const [sc0, m0] = scaleMinK4(b, off + 4, 2 * c);
      const [sc1, m1] = scaleMinK4(b, off + 4, 2 * c + 1);
      const d0 = f(d * sc0), mm0 = f(dmin * m0), d1 = f(d * sc1), mm1 = f(dmin * m1);
      for (let l = 0; l < 32; l++) {
        const q = u8(b, off + 16 + 32 * c + l);
        out[o + 64 * c + l] = f(f(d0 * (q & 0x0f)) - mm0);
        out[o + 64 * c + 32 + l] = f(f(d1 * (q >> 4)) - mm1);
      }
    }
  },
};

const Q5_K: RefFormat = {
  name: 'Q5_K', typeId: 13, blockSize: 256, typeSize: 176, f16Fields: [0, 2], f32Fields: [],
  decodeBlock(b, off, out, o) {
    const d = rf16(b, off), dmin = rf16(b, off + 2);
    for (let c = 0; c < 4; c++) {
      const [sc0, m0] = scaleMinK4(b, off + 4, 2 * c);
      const [sc1, m1] = scaleMinK4(b, off + 4, 2 * c + 1);
      const d0 = f(d * sc0), mm0 = f(dmin * m0), d1 = f(d * sc1), mm1 = f(dmin * m1);
      for (let l = 0; l < 32; l++) {
        const q = u8(b, off + 48 + 32 * c + l);
        const h = u8(b, off + 16 + l);
        const lo = (q & 0x0f) | (((h >> (2 * c)) & 1) << 4);
        const hi = (q >> 4) | (((h >> (2 * c + 1)) & 1) << 4);
        out[o + 64 * c + l] = f(f(d0 * lo) - mm0);
        out[o + 64 * c + 32 + l] = f(f(d1 * hi) - mm1);
      }
    }
  },
};

const Q6_K: RefFormat = {
  name: 'Q6_K', typeId: 14, blockSize: 256, typeSize: 210, f16Fields: [208], f32Fields: [],
  decodeBlock(b, off, out, o) {
    const d = rf16(b, off + 208);
    for (let h = 0; h < 2; h++) {
      for (let l = 0; l < 32; l++) {
        const a = u8(b, off + 64 * h + l), c = u8(b, off + 64 * h + l + 32);
        const qh = u8(b, off + 128 + 32 * h + l);
        const nib = [a & 0x0f, c & 0x0f, a >> 4, c >> 4];
        for (let k = 0; k < 4; k++) {
          const q = ((nib[k] ?? 0) | (((qh >> (2 * k)) & 3) << 4)) - 32;
          const e = 128 * h + 32 * k + l;
          const sc = i8(b, off + 192 + (e >> 4));
          out[o + e] = f(f(d * sc) * q);
        }
      }
    }
  },
};

export const REF_FORMATS: readonly RefFormat[] = [Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q8_K, Q4_K, Q5_K, Q6_K];

export function refFormat(name: string): RefFormat {
  const r = REF_FORMATS.find((x) => x.name === name);
  if (!r) throw new Error(`no reference decoder for ${name}`);
  return r;
}

/** Decodes `data` (whole blocks of `fmt`) into float32. */
export function refDequantize(fmt: RefFormat, data: Uint8Array): Float32Array {
  if (data.length % fmt.typeSize !== 0) {
    throw new Error(`${fmt.name}: ${data.length} bytes is not a whole number of ${fmt.typeSize}-byte blocks`);
  }
  const nb = data.length / fmt.typeSize;
  const out = new Float32Array(nb * fmt.blockSize);
  for (let i = 0; i < nb; i++) fmt.decodeBlock(data, i * fmt.typeSize, out, i * fmt.blockSize);
  return out;
}

/** Σ a[i]*b[i] in float64. */
export function dot64(a: Float32Array, b: Float32Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += (a[i] ?? 0) * (b[i] ?? 0);
  return s;
}

/** Σ |a[i]*b[i]| in float64: the scale against which dot-product rounding is judged. */
export function absDot64(a: Float32Array, b: Float32Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += Math.abs((a[i] ?? 0) * (b[i] ?? 0));
  return s;
}
