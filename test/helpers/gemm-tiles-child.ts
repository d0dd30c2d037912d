// Child process of test/unit/gemm-tiles.test.ts, run once per ISA (FULCRUM_ISA set by the
// parent): multiplies random matrices through kernels.matmul twice — the default path (prefill
// tile kernels where the format has them) and path 'vecdot' (one vec_dot per output) — and
// against a float64 dot of the dequantized weights and dequantized quantized activations.
// Prints one JSON line: the ISA level and, per case, the worst deviations found.
import { loadAddon } from '../../engine/native/addon';
import { dequantize, quantize } from '../../engine/native/quant';
import { bf16BitsToF32, f16BitsToF32, f32ToBf16Bits, f32ToF16Bits } from '../../engine/model/quantize-ts';

interface Kernels {
  matmul(type: number, w: Uint8Array, rows: number, cols: number, x: Float32Array, nTokens: number, threads: number, path?: 'auto' | 'vecdot'): Float32Array;
  isaLevel(): string;
  gemmTile(type: number): { rows: number; cols: number } | null;
  gemvRows(type: number): number | null;
}

export interface GemmCase {
  type: string;
  rows: number;
  cols: number;
  nTokens: number;
  threads: number;
  /** The tile kernel's shape for this format on this ISA (rows × tokens), or null (vec_dot only). */
  tile: { rows: number; cols: number } | null;
  /** Rows per pass of the format's decode GEMV kernel on this ISA, or null (vec_dot per row). */
  gemvRows: number | null;
  /** max over outputs of |tile − vecdot| / (max |vecdot| of that token's outputs) */
  tileVsVecdot: number;
  identical: boolean;
  /** max over outputs of |vecdot − f64 reference| / Σ|w·a| */
  vecdotVsRef: number;
}

// Weight formats with their activation format (the type vec_dot quantizes activations to).
const TYPES: { name: string; id: number; act: number }[] = [
  { name: 'Q8_0', id: 8, act: 8 },
  { name: 'Q4_0', id: 2, act: 8 },
  { name: 'Q4_1', id: 3, act: 9 },
  { name: 'Q5_0', id: 6, act: 8 },
  { name: 'Q4_K', id: 12, act: 15 },
  { name: 'Q6_K', id: 14, act: 15 },
  // The float formats (activations in the weights' own format, as llama.cpp rounds them).
  { name: 'F32', id: 0, act: 0 },
  { name: 'F16', id: 1, act: 1 },
  { name: 'BF16', id: 30, act: 30 },
];
const FLOAT_IDS = new Set([0, 1, 30]);

// Rows in format `type`: the addon's quantizer for the block formats, the float formats' bits here.
function encode(type: number, v: Float32Array): Uint8Array {
  if (!FLOAT_IDS.has(type)) return quantize(type, v);
  if (type === 0) return new Uint8Array(Float32Array.from(v).buffer);
  const bits = Uint16Array.from(v, (x) => (type === 1 ? f32ToF16Bits(x) : f32ToBf16Bits(x)));
  return new Uint8Array(bits.buffer);
}
function decode(type: number, bytes: Uint8Array, n: number): Float32Array {
  if (!FLOAT_IDS.has(type)) return dequantize(type, bytes, n);
  if (type === 0) return new Float32Array(bytes.buffer, bytes.byteOffset, n).slice();
  const bits = new Uint16Array(bytes.buffer, bytes.byteOffset, n);
  return Float32Array.from(bits, (h) => (type === 1 ? f16BitsToF32(h) : bf16BitsToF32(h)));
}

function gaussian(n: number, seed: number, scale: number): Float32Array {
  let s = seed >>> 0;
  const next = (): number => { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; return (s + 1) / 4294967297; };
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = scale * Math.sqrt(-2 * Math.log(next())) * Math.cos(2 * Math.PI * next());
  return out;
}

function main(): void {
  const k = loadAddon<{ kernels: Kernels }>().kernels;
  const cases: GemmCase[] = [];
  const tokenCounts = [1, 2, 3, 5, 8, 17, 64];
  for (const t of TYPES) {
    // Row counts end in partial tiles (37 = 9×4 + 1 for the 4-row tiles; for AMX's 16-row groups
    // 21, 37, 53 and 70 give 1, 2, 3 and 4 groups plus leftover rows); 160 columns = an odd number
    // of 32-blocks (the VNNI kernels' tail path; for the Q4_0 GEMV one step of four blocks and a
    // tail block), 32/64/512 = even; K-quants need 256 multiples.
    // (Q4_1 has no tile kernel: two shapes suffice to see it stays on vec_dot.) The float
    // formats: 100 columns end in 4 values past the last vector (the tiles' scalar tail).
    const shapes = t.id === 12 || t.id === 14
      ? [{ rows: 37, cols: 512 }]
      : FLOAT_IDS.has(t.id)
        ? [{ rows: 37, cols: 160 }, { rows: 70, cols: 512 }, { rows: 21, cols: 100 }]
        : [{ rows: 37, cols: 160 }, { rows: 70, cols: 512 }, ...(t.id === 3 ? [] : [{ rows: 53, cols: 64 }, { rows: 21, cols: 32 }])];
    for (const { rows, cols } of shapes) {
      const wf = gaussian(rows * cols, 7 + rows + cols + t.id, 0.05);
      const w = encode(t.id, wf);
      const wd = decode(t.id, w, rows * cols);
      for (const nTokens of tokenCounts) {
        const x = gaussian(nTokens * cols, 1000 + nTokens + t.id, 1);
        const xd = new Float32Array(nTokens * cols);
        for (let tok = 0; tok < nTokens; tok++) {
          const row = x.subarray(tok * cols, (tok + 1) * cols);
          xd.set(decode(t.act, encode(t.act, row), cols), tok * cols);
        }
        for (const threads of [1, 2]) {
          const tile = k.matmul(t.id, w, rows, cols, x, nTokens, threads);
          const ref = k.matmul(t.id, w, rows, cols, x, nTokens, threads, 'vecdot');
          let tileVsVecdot = 0, vecdotVsRef = 0, identical = true;
          for (let tok = 0; tok < nTokens; tok++) {
            let scale = 0;
            for (let r = 0; r < rows; r++) scale = Math.max(scale, Math.abs(ref[tok * rows + r]!));
            for (let r = 0; r < rows; r++) {
              const a = tile[tok * rows + r]!, b = ref[tok * rows + r]!;
              if (a !== b) identical = false;
              tileVsVecdot = Math.max(tileVsVecdot, Math.abs(a - b) / Math.max(scale, 1e-30));
              let dot = 0, mag = 0;
              for (let c = 0; c < cols; c++) {
                const p = wd[r * cols + c]! * xd[tok * cols + c]!;
                dot += p;
                mag += Math.abs(p);
              }
              vecdotVsRef = Math.max(vecdotVsRef, Math.abs(b - dot) / Math.max(mag, 1e-30));
            }
          }
          cases.push({ type: t.name, rows, cols, nTokens, threads, tile: k.gemmTile(t.id), gemvRows: k.gemvRows(t.id), tileVsVecdot, identical, vecdotVsRef });
        }
      }
    }
  }
  console.log(JSON.stringify({ isa: k.isaLevel(), cases }));
}

main();
