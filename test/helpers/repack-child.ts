// Child process of test/unit/repack.test.ts, run once per ISA (FULCRUM_ISA set by the parent):
// multiplies random Q4_0, Q5_0, Q8_0, Q4_K and Q6_K matrices through kernels.matmul with the weights repacked as the model's
// load copy repacks them (path 'packed') and with one vec_dot per output (path 'vecdot'), for
// batches and for each token alone. Prints one JSON line.
import { loadAddon } from '../../engine/native/addon';
import { quantize } from '../../engine/native/quant';

interface Kernels {
  matmul(type: number, w: Uint8Array, rows: number, cols: number, x: Float32Array, nTokens: number, threads: number, path?: 'auto' | 'vecdot' | 'packed'): Float32Array;
  isaLevel(): string;
  amxInt8(): boolean;
  packedLayout(type: number, rows: number, cols: number): string | null;
}

export interface RepackCase {
  type: string;
  rows: number;
  cols: number;
  nTokens: number;
  threads: number;
  layout: string | null;
  /** max over outputs of |packed − vecdot| / (max |vecdot| of that token's outputs) */
  packedVsVecdot: number;
  /** every token's outputs in the batch equal, bit for bit, that token multiplied alone */
  batchEqualsAlone: boolean;
  /** FNV-1a of the packed path's and the vec_dot path's output bytes: the same at two ISA levels
   *  only if they give the same bits */
  packedBits: string;
  vecdotBits: string;
}

function fnv1a(x: Float32Array): string {
  const bytes = new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
  let h = 0x811c9dc5;
  for (const b of bytes) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  return h.toString(16).padStart(8, '0');
}

const Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q4_K = 12, Q5_K = 13, Q6_K = 14;

function gaussian(n: number, seed: number, scale: number): Float32Array {
  let s = seed >>> 0;
  const next = (): number => { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; return (s + 1) / 4294967297; };
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = scale * Math.sqrt(-2 * Math.log(next())) * Math.cos(2 * Math.PI * next());
  return out;
}

function main(): void {
  const k = loadAddon<{ kernels: Kernels }>().kernels;
  const cases: RepackCase[] = [];
  // The 32-element formats in groups of 16 rows on AVX-512 and 8 on AVX2 (block by block: any
  // multiple of 32 columns): 3 and 5 groups (odd counts split across two threads) and one; 896 and
  // 4864 are the 0.5B shape's.
  const shapes16 = [{ rows: 48, cols: 128 }, { rows: 128, cols: 896 }, { rows: 16, cols: 4864 }, { rows: 80, cols: 512 }];
  const shapes8 = [{ rows: 24, cols: 128 }, { rows: 128, cols: 896 }, { rows: 8, cols: 4864 }, { rows: 40, cols: 512 }];
  const avx512 = k.isaLevel() === 'avx512';
  // Q4_K, Q5_K and Q6_K: super-blocks of 256 columns; 4864 is the 0.5B shape's ffn_down, 2048 the 1.3B's.
  // Q6_K in groups of 4 rows; Q4_K and Q5_K in groups of 16 on AVX-512 and 8 on AVX2: 3, 5 and 1
  // groups there too.
  const shapesK = [{ rows: 36, cols: 256 }, { rows: 128, cols: 2048 }, { rows: 8, cols: 4864 }, { rows: 68, cols: 512 }];
  const shapesK16 = [{ rows: 48, cols: 256 }, { rows: 128, cols: 2048 }, { rows: 16, cols: 4864 }, { rows: 80, cols: 512 }];
  const shapesK8 = [{ rows: 24, cols: 256 }, { rows: 128, cols: 2048 }, { rows: 8, cols: 4864 }, { rows: 40, cols: 512 }];
  const shapesOf = (type: number) =>
    (type === Q6_K ? shapesK : type === Q4_K || type === Q5_K ? (avx512 ? shapesK16 : shapesK8) : avx512 ? shapes16 : shapes8);
  const unpackable = [
    ...[Q4_0, Q4_1, Q5_0, Q5_1, Q8_0].flatMap((type) => [{ rows: 37, cols: 512 }, { rows: 36, cols: 160 }, { rows: 36, cols: 96 }].map(({ rows, cols }) => ({ rows, cols, layout: k.packedLayout(type, rows, cols) }))),
    ...[Q4_K, Q5_K, Q6_K].flatMap((type) => [{ rows: 37, cols: 512 }, { rows: 38, cols: 256 }].map(({ rows, cols }) => ({ rows, cols, layout: k.packedLayout(type, rows, cols) }))),
    // Whole groups of 4 rows but not of 16 (AVX-512) or 8 (AVX2).
    ...(k.isaLevel() === 'scalar' ? [] : [Q4_K, Q5_K].map((type) => ({ rows: 36, cols: 256, layout: k.packedLayout(type, 36, 256) }))),
  ];
  for (const [name, type] of [['Q4_0', Q4_0], ['Q4_1', Q4_1], ['Q5_0', Q5_0], ['Q5_1', Q5_1], ['Q8_0', Q8_0], ['Q4_K', Q4_K], ['Q5_K', Q5_K], ['Q6_K', Q6_K]] as const)
  for (const { rows, cols } of shapesOf(type)) {
    const w = quantize(type, gaussian(rows * cols, 7 + rows + cols + type, 0.05));
    const layout = k.packedLayout(type, rows, cols);
    if (layout === null) {
      cases.push({ type: name, rows, cols, nTokens: 0, threads: 0, layout, packedVsVecdot: 0, batchEqualsAlone: true, packedBits: '', vecdotBits: '' });
      continue;
    }
    // 32 and 33: either side of the matmul's change of work split at one token block (kernels/matmul.cc).
    for (const nTokens of [1, 2, 3, 5, 8, 17, 32, 33, 64]) {
      const x = gaussian(nTokens * cols, 1000 + nTokens + cols, 1);
      for (const threads of [1, 2]) {
        const packed = k.matmul(type, w, rows, cols, x, nTokens, threads, 'packed');
        const ref = k.matmul(type, w, rows, cols, x, nTokens, threads, 'vecdot');
        let packedVsVecdot = 0, batchEqualsAlone = true;
        for (let tok = 0; tok < nTokens; tok++) {
          const alone = k.matmul(type, w, rows, cols, x.subarray(tok * cols, (tok + 1) * cols), 1, threads, 'packed');
          let scale = 0;
          for (let r = 0; r < rows; r++) scale = Math.max(scale, Math.abs(ref[tok * rows + r]!));
          for (let r = 0; r < rows; r++) {
            const p = packed[tok * rows + r]!;
            if (p !== alone[r]) batchEqualsAlone = false;
            packedVsVecdot = Math.max(packedVsVecdot, Math.abs(p - ref[tok * rows + r]!) / Math.max(scale, 1e-30));
          }
        }
        cases.push({ type: name, rows, cols, nTokens, threads, layout, packedVsVecdot, batchEqualsAlone, packedBits: fnv1a(packed), vecdotBits: fnv1a(ref) });
      }
    }
  }
  console.log(JSON.stringify({ isa: k.isaLevel(), amx: k.amxInt8(), cases, unpackable }));
}

main();
