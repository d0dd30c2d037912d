// SwiGLU (silu(gate)·up) on every ISA path this CPU runs, against float64: the vector versions
// compute exp(−|g|) with a polynomial (relative error ~2e-7) and one division, so each output is
// within a few float ulps of the exact value.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';

import { quantIsas } from '../../engine/native/quant';

const root = path.resolve(__dirname, '..', '..');
const child = path.join(root, 'test', 'helpers', 'swiglu-child.ts');

for (const isa of ['scalar', 'avx2', 'avx512'] as const) {
  test(`swiglu matches silu(g)·u in float64 (FULCRUM_ISA=${isa})`, { skip: quantIsas().includes(isa) ? false : `this CPU does not run ${isa}` }, () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', child], { cwd: root, env: { ...process.env, FULCRUM_ISA: isa }, encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 0, `child failed: ${r.stderr}`);
    const out = JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}') as { isa: string; worst: number; worstAt: number; gate: number; out: number };
    assert.equal(out.isa, isa);
    assert.ok(out.worst <= 1e-6, `worst relative error ${out.worst} at index ${out.worstAt} (gate ${out.gate}, out ${out.out})`);
  });
}
