// Prefill tile kernels (TypeTraits::gemm_tile, native/src/quant/tiles/gemm_*.cc) against the one
// vec_dot per output path they replace, through kernels.matmul, for token counts that hit full
// tiles, partial tiles and the single-token (vec_dot only) case, on every ISA this CPU runs
// (each in a child process with FULCRUM_ISA set, as the ISA is chosen once per process).
// Tolerances: both paths compute the same integer block sums and the same float scale products;
// only the float summation order may differ, so outputs agree to ~1e-6 of the token's largest
// output. The avx512 VNNI 4×4 tiles keep vec_dot's lanes and reduction: results are identical.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';

import { quantIsas } from '../../engine/native/quant';
import type { GemmCase } from '../helpers/gemm-tiles-child';

const root = path.resolve(__dirname, '..', '..');
const child = path.join(root, 'test', 'helpers', 'gemm-tiles-child.ts');

function runIsa(isa: string): { isa: string; cases: GemmCase[] } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', child], {
    cwd: root, env: { ...process.env, FULCRUM_ISA: isa }, encoding: 'utf8', timeout: 120_000,
  });
  assert.equal(r.status, 0, `child (FULCRUM_ISA=${isa}) failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}') as { isa: string; cases: GemmCase[] };
}

for (const isa of ['scalar', 'avx2', 'avxvnni', 'avx512'] as const) {
  const runs = quantIsas().includes(isa);
  // avxvnni is the AVX2 kernels compiled with AVX-VNNI: the same tiles, GEMVs and bits as avx2.
  const avx2Level = isa === 'avx2' || isa === 'avxvnni';
  test(`matmul tiles equal per-token vec_dot (FULCRUM_ISA=${isa})`, { skip: runs ? false : `this CPU does not run ${isa}` }, () => {
    const out = runIsa(isa);
    assert.equal(out.isa, isa);
    // The formats with tile kernels on this ISA must really take them (else this tests nothing).
    const tiled = new Set(out.cases.filter((c) => c.tile !== null).map((c) => c.type));
    const expected = isa === 'scalar' ? [] : ['BF16', 'F16', 'F32', 'Q4_0', 'Q4_K', 'Q5_0', 'Q6_K', 'Q8_0'];
    assert.deepEqual([...tiled].sort(), expected);
    assert.equal(out.cases.length, 2 * 7 * (4 + 4 + 2 + 4 + 1 + 1 + 3 * 3));  // threads × token counts × shapes
    // Likewise the decode GEMV kernels (one token).
    const gemv = new Set(out.cases.filter((c) => c.gemvRows !== null).map((c) => c.type));
    // (AVX-512 decodes the K-quants with their tile kernels at one token.)
    assert.deepEqual([...gemv].sort(), isa === 'scalar' ? [] : avx2Level ? ['Q4_0', 'Q8_0'] : ['Q4_0', 'Q4_K', 'Q6_K', 'Q8_0']);
    for (const c of out.cases) {
      const label = `${c.type} ${c.rows}x${c.cols} nTokens=${c.nTokens} threads=${c.threads}`;
      // Q4_1 adds m·s with s = d·Σq stored as f16 in the Q8_1 block: its rounding is not in the
      // dequantized activations, so that format gets a looser bound.
      assert.ok(c.vecdotVsRef <= (c.type === 'Q4_1' ? 1e-3 : 2e-5), `${label}: vec_dot path off the float64 reference by ${c.vecdotVsRef}`);
      assert.ok(c.tileVsVecdot <= 2e-6, `${label}: tile path off the vec_dot path by ${c.tileVsVecdot}`);
      // One token never takes the tile path, nor do formats without a tile kernel on this ISA
      // (Q4_1 anywhere); the avx512 VNNI 4×4 tiles (Q8_0/Q4_0/Q5_0 without AMX)
      // the Q6_K tile and the GEMVs other than AVX-512 Q4_0 keep vec_dot's lanes and order. AMX (64×16), Q4_K and
      // the AVX-512 Q4_0 GEMV (float sums grouped by block, not by block pair) reorder float sums.
      // The AVX-512 Q4_K GEMV is its tile at one token, which sums like the tile, not like vec_dot.
      const reorderingGemv = c.nTokens === 1 && c.gemvRows !== null && (c.type === 'Q4_0' || c.type === 'Q4_K') && isa === 'avx512';
      // The AVX2 K-quant tiles keep vec_dot's two accumulators and order: identical too.
      // The float formats' tile and vec_dot are one order (kernels/float_simd.h gemm_tile_float).
      const exactTile = c.tile !== null && ((isa === 'avx512' && ((c.tile.rows === 4 && c.tile.cols === 4) || c.type === 'Q6_K')) ||
        (avx2Level && (c.type === 'Q4_K' || c.type === 'Q6_K')) || ['F32', 'F16', 'BF16'].includes(c.type));
      if (!reorderingGemv && (c.nTokens === 1 || c.tile === null || exactTile)) {
        assert.ok(c.identical, `${label}: expected bit-identical results`);
      }
    }
  });
}
