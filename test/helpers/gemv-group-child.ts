// Child process of test/unit/gemv-group.test.ts, run once per ISA (FULCRUM_ISA set by the parent):
// one token times groups of repacked matrices through kernels.gemvGroup (one pool run for the
// whole group, as a decode step runs a layer's Q, K and V) and each matrix alone through
// kernels.matmul's packed path, at 1-3 threads. Prints one JSON line, with a digest of every
// output (so a parent can compare runs under different FULCRUM_GEMV_PREFETCH(_Q6_K) and FULCRUM_GEMV_STREAMS settings).
import { createHash } from 'node:crypto';

import { loadAddon } from '../../engine/native/addon';
import { quantize } from '../../engine/native/quant';

interface Kernels {
  matmul(type: number, w: Uint8Array, rows: number, cols: number, x: Float32Array, nTokens: number, threads: number, path?: 'auto' | 'vecdot' | 'packed'): Float32Array;
  gemvGroup(items: { type: number; weights: Uint8Array; rows: number }[], x: Float32Array, threads: number): Float32Array[];
  isaLevel(): string;
  gemvPrefetch(): 'software' | 'hardware';
  gemvPrefetchQ6K(): 'software' | 'hardware';
  gemvStreams(): 1 | 4;
  gemvStreamsK(): 1 | 2;
  packedLayout(type: number, rows: number, cols: number): string | null;
}

export interface GemvGroupCase {
  label: string;
  threads: number;
  /** every matrix's outputs from the group equal, bit for bit, its packed matmul alone */
  equal: boolean;
  /** the first differing output, when not equal */
  firstDiff?: string;
  packed: boolean;
}

const Q4_0 = 2, Q4_1 = 3, Q5_1 = 7, Q8_0 = 8, Q4_K = 12, Q5_K = 13, Q6_K = 14;

function values(n: number, seed: number, scale: number): Float32Array {
  let s = seed >>> 0;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = scale * ((s / 4294967296) * 2 - 1);
  }
  return out;
}

function main(): void {
  const k = loadAddon<{ kernels: Kernels }>().kernels;
  // Groups as a decode step forms them: Q, K, V of one input (K and V a few row groups, so the
  // group's index space has padding between matrices when groups of 4 or 8 rows do not fill 16
  // rows), gate and up, and a Q4_K_M-style mix of formats. Sizes on every side of the 192 KiB
  // under which a group runs on the calling thread alone and of the 2 MiB under which it is cut
  // once per thread (kernels/matmul.cc).
  const groups: { label: string; cols: number; items: { type: number; rows: number }[] }[] = [
    { label: 'Q4_0 Q/K/V 896 columns', cols: 896, items: [{ type: Q4_0, rows: 896 }, { type: Q4_0, rows: 128 }, { type: Q4_0, rows: 128 }] },
    { label: 'Q8_0 Q/K/V, K and V of 48 rows', cols: 512, items: [{ type: Q8_0, rows: 512 }, { type: Q8_0, rows: 48 }, { type: Q8_0, rows: 48 }] },
    { label: 'Q8_0 gate/up 4864 rows', cols: 896, items: [{ type: Q8_0, rows: 4864 }, { type: Q8_0, rows: 4864 }] },
    // Q4_K's K a whole number of its groups on every ISA (16 rows at AVX-512, 8 at AVX2).
    { label: 'Q4_K Q/K with Q6_K V (Q4_K_M)', cols: 1024, items: [{ type: Q4_K, rows: 1024 }, { type: Q4_K, rows: 48 }, { type: Q6_K, rows: 36 }] },
    { label: 'Q4_0 with Q8_0 (one activation row, two arrangements)', cols: 512, items: [{ type: Q4_0, rows: 512 }, { type: Q8_0, rows: 64 }, { type: Q4_0, rows: 64 }] },
    // A Q5_K_M layer: Q5_1 (Q8_1 activations, arranged with their sums) beside Q5_K (Q8_K rows).
    { label: 'Q5_1 Q/K with Q5_K V (Q5_K_M)', cols: 1024, items: [{ type: Q5_1, rows: 1024 }, { type: Q5_1, rows: 128 }, { type: Q5_K, rows: 128 }] },
    // A Q4_1 model's layer (Q8_1 activations, as Q5_1's).
    { label: 'Q4_1 Q/K/V', cols: 512, items: [{ type: Q4_1, rows: 512 }, { type: Q4_1, rows: 64 }, { type: Q4_1, rows: 64 }] },
    // Q6_K's row groups count in units of 4, Q4_0's in 2 (AVX2) or 1 (AVX-512): an index space of
    // 258 or 257 groups, not a whole number of units, cut once per thread (small group).
    { label: 'Q6_K with a 16-row Q4_0 (a group space that ends inside a unit)', cols: 1024, items: [{ type: Q6_K, rows: 1024 }, { type: Q4_0, rows: 16 }] },
    { label: 'four small Q4_0 (inline)', cols: 256, items: [{ type: Q4_0, rows: 32 }, { type: Q4_0, rows: 64 }, { type: Q4_0, rows: 32 }, { type: Q4_0, rows: 16 }] },
    // A MoE decode step's pass (model/moe.cc): the gate and up of 8 experts, 16 matrices of one
    // input (Q4_K, 3.1 MiB: the tapering claims), and a full pass of 32 small ones.
    { label: 'MoE gate/up of 8 Q4_K experts', cols: 1024, items: Array.from({ length: 16 }, () => ({ type: Q4_K, rows: 384 })) },
    { label: '32 Q8_0 experts (a full pass)', cols: 256, items: Array.from({ length: 32 }, (_, i) => ({ type: Q8_0, rows: 32 * (1 + (i % 3)) })) },
  ];
  const cases: GemvGroupCase[] = [];
  const digest = createHash('sha256');
  for (const [gi, g] of groups.entries()) {
    const x = values(g.cols, 1000 + gi, 1);
    const items = g.items.map((it, i) => ({ ...it, weights: quantize(it.type, values(it.rows * g.cols, 7 * gi + i + 1, 0.1)) }));
    const packed = items.every((it) => k.packedLayout(it.type, it.rows, g.cols) !== null);
    for (const threads of [1, 2, 3]) {
      const got = packed ? k.gemvGroup(items, x, threads) : [];
      for (const out of got) digest.update(new Uint8Array(out.buffer, out.byteOffset, out.byteLength));
      let firstDiff: string | undefined;
      for (const [i, it] of items.entries()) {
        if (!packed || firstDiff) break;
        const alone = k.matmul(it.type, it.weights, it.rows, g.cols, x, 1, threads, 'packed');
        const mine = got[i] ?? new Float32Array(0);
        const a = new Uint32Array(alone.buffer), b = new Uint32Array(mine.buffer);
        if (a.length !== b.length) firstDiff = `matrix ${i}: ${b.length} outputs, expected ${a.length}`;
        for (let r = 0; r < a.length && !firstDiff; r++) if (a[r] !== b[r]) firstDiff = `matrix ${i} row ${r}: ${mine[r]} vs ${alone[r]} alone`;
      }
      cases.push({ label: g.label, threads, equal: packed && !firstDiff, firstDiff, packed });
    }
  }
  const errors: string[] = [];
  const w = quantize(Q4_0, values(32 * 256, 3, 0.1));
  const x = values(256, 4, 1);
  const w31 = quantize(Q4_0, values(31 * 256, 5, 0.1));  // 31 rows: no whole row group, not repacked
  for (const bad of [[], Array(33).fill({ type: Q4_0, weights: w, rows: 32 }), [{ type: Q4_0, weights: w.subarray(1), rows: 32 }], [{ type: Q4_0, weights: w31, rows: 31 }]]) {
    try {
      k.gemvGroup(bad, x, 2);
      errors.push('no error');
    } catch (e) {
      errors.push((e as Error).message);
    }
  }
  console.log(JSON.stringify({ isa: k.isaLevel(), prefetch: k.gemvPrefetch(), prefetchQ6K: k.gemvPrefetchQ6K(), streams: k.gemvStreams(), streamsK: k.gemvStreamsK(), digest: digest.digest('hex'), cases, errors }));
}

main();
