// Weights repacked at load (native/src/quant/packed/repack.h): Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 in groups of 16 rows (AVX-512) or
// 8 (AVX2), Q4_K and Q5_K in groups of 16 rows (AVX-512) or 8 (AVX2), Q6_K in groups of four rows, read by the
// packed GEMV (one token) and tile (several) kernels, against one vec_dot per output on the GGUF
// bytes, on every ISA this CPU runs (a child process per ISA: the ISA is chosen once per process).
// Both paths compute the same integer block sums and scale products; only the float summation
// order differs (by block, not by block pair), so outputs agree to ~1e-6 of the token's largest
// output. The packed GEMV and tile share their arithmetic: each token's outputs in a batch are
// bit for bit its outputs alone — what exact speculative verification needs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';

import { quantIsas } from '../../engine/native/quant';
import type { RepackCase } from '../helpers/repack-child';

const root = path.resolve(__dirname, '..', '..');
const child = path.join(root, 'test', 'helpers', 'repack-child.ts');

interface ChildOut {
  isa: string;
  amx: boolean;
  cases: RepackCase[];
  unpackable: { rows: number; cols: number; layout: string | null }[];
}

// FULCRUM_AMX=0: the AVX-512 prefill tiles on every AVX-512 host, AMX or not (with AMX-INT8 the
// 16-row groups' prefill runs on AMX tiles, which the last test compares with these). `amx` runs
// the process's own choice.
function runIsa(isa: string, amx = false): ChildOut {
  const r = spawnSync(process.execPath, ['--import', 'tsx', child], {
    cwd: root, env: { ...process.env, FULCRUM_ISA: isa, FULCRUM_NO_REPACK: '', FULCRUM_AMX: amx ? '' : '0' }, encoding: 'utf8', timeout: 120_000,
  });
  assert.equal(r.status, 0, `child (FULCRUM_ISA=${isa}) failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}') as ChildOut;
}

const outputs = new Map<string, ChildOut>();

// Rows per group of each layout (repack.h): Q6_K 4; the others 16 on AVX-512, 8 on AVX2.
function groupRows(isa: string, type: string): number {
  if (type === 'Q6_K') return 4;
  if (isa === 'avx512') return 16;
  return 8;
}

// How far the packed path may be from vec_dot, relative to the token's largest output: float
// summation order. Q5_1's value is d·q + m with q in 0..31 (Q4_1's 0..15): its d·Σq·y and m·s
// terms are each many times the output and cancel, so the same reordering shows about twice as
// large (measured: median 4-5e-7, largest 2.3e-6 against 0.9e-6 for Q5_0 on the same shapes;
// Q4_1 largest 1.4e-6 at avx512, 2.8e-6 at avx2).
function tolerance(type: string): number {
  return type === 'Q5_1' || type === 'Q4_1' ? 4e-6 : 2e-6;
}

// A repacked case: the layout of its format at `isa`, within tolerance of vec_dot, and each
// token's outputs in a batch the bits it gets alone.
function assertRepacked(c: RepackCase, isa: string, label: string): void {
  assert.equal(c.layout, `${c.type.toLowerCase()}x${groupRows(isa, c.type)}`, label);
  assert.ok(c.packedVsVecdot <= tolerance(c.type), `${label}: packed path off the vec_dot path by ${c.packedVsVecdot}`);
  assert.ok(c.batchEqualsAlone, `${label}: a token's outputs in the batch differ from its outputs alone`);
}

for (const isa of ['scalar', 'avx2', 'avxvnni', 'avx512'] as const) {
  const runs = quantIsas().includes(isa);
  test(`Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K repacked in row groups equals vec_dot, and a batch equals each token alone (FULCRUM_ISA=${isa})`, { skip: runs ? false : `this CPU does not run ${isa}` }, () => {
    const out = runIsa(isa);
    outputs.set(isa, out);
    assert.equal(out.isa, isa);
    assert.equal(out.amx, false, 'FULCRUM_AMX=0 must turn the AMX tiles off');
    // Shapes that are not whole row groups (and, for the K-quants, super-blocks of 256 columns) stay in the GGUF layout.
    for (const u of out.unpackable) assert.equal(u.layout, null, `${u.rows}x${u.cols} must not be repacked`);
    if (isa === 'scalar') {
      // No packed kernels below AVX2: nothing is repacked.
      assert.ok(out.cases.every((c) => c.layout === null));
      return;
    }
    assert.equal(out.cases.length, 8 * 4 * 9 * 2);
    for (const c of out.cases) assertRepacked(c, isa, `${c.type} ${c.rows}x${c.cols} nTokens=${c.nTokens} threads=${c.threads}`);
  });
}

// avxvnni is the AVX2 kernels compiled with AVX-VNNI (vpdpbusd where AVX2 has vpmaddubsw +
// vpmaddwd): the integer sums are the same, so every output must be the same bits as avx2's.
test('avxvnni gives avx2\'s bits on the packed and the vec_dot path', { skip: quantIsas().includes('avxvnni') ? false : 'this CPU does not run avxvnni' }, () => {
  const plain = outputs.get('avx2') ?? runIsa('avx2');
  const vnni = outputs.get('avxvnni') ?? runIsa('avxvnni');
  assert.equal(vnni.cases.length, plain.cases.length);
  vnni.cases.forEach((c, i) => {
    const p = plain.cases[i]!;
    const label = `${c.type} ${c.rows}x${c.cols} nTokens=${c.nTokens} threads=${c.threads}`;
    assert.equal(c.packedBits, p.packedBits, `${label}: packed outputs differ from avx2's`);
    assert.equal(c.vecdotBits, p.vecdotBits, `${label}: vec_dot outputs differ from avx2's`);
  });
});

// On a CPU with AMX-INT8 the process's own choice at avx512: every format stays in its row groups,
// and the 16-row groups' prefill tiles run on AMX (packed_x16_amx_avx512.cc,
// packed_k16_amx_avx512.cc). They must give the AVX-512 kernels' bits: each token's outputs in a
// batch are the bits of its decode GEMV alone, and the same bits as with AMX off.
test('with AMX-INT8 the row groups\' AMX tiles give the AVX-512 kernels\' bits', { skip: quantIsas().includes('avx512') ? false : 'this CPU does not run avx512' }, (t) => {
  const out = runIsa('avx512', true);
  if (!out.amx) {
    t.skip('this CPU has no AMX-INT8 (or the process was told not to use it)');
    return;
  }
  const noAmx = outputs.get('avx512') ?? runIsa('avx512');
  assert.equal(out.cases.length, noAmx.cases.length);
  out.cases.forEach((c, i) => {
    const label = `${c.type} ${c.rows}x${c.cols} nTokens=${c.nTokens} threads=${c.threads}`;
    assertRepacked(c, 'avx512', label);
    assert.equal(c.packedBits, noAmx.cases[i]!.packedBits, `${label}: with AMX the packed outputs differ from the AVX-512 kernels'`);
  });
});
