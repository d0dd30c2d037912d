// Greedy sampling's native pick (kernels.argmaxFinite through greedyPick) equals the JS argmax,
// first index on ties, and refuses NaN and ±Inf, on every ISA path this CPU runs (a child process
// per FULCRUM_ISA: the float kernels are chosen once per process).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';

import { quantIsas } from '../../engine/native/quant';

const root = path.resolve(__dirname, '..', '..');
const child = path.join(root, 'test', 'helpers', 'argmax-child.ts');

for (const isa of ['scalar', 'avx2', 'avx512'] as const) {
  test(`greedyPick equals the JS argmax and refuses non-finite logits (FULCRUM_ISA=${isa})`, { skip: quantIsas().includes(isa) ? false : `this CPU does not run ${isa}` }, () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', child], { cwd: root, env: { ...process.env, FULCRUM_ISA: isa }, encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 0, `child failed: ${r.stderr}`);
    const out = JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}') as { isa: string; cases: number; failures: string[] };
    assert.equal(out.isa, isa);
    assert.ok(out.cases > 100, `${out.cases} cases ran`);
    assert.deepEqual(out.failures, []);
  });
}

test('argmaxFinite: an empty row or a non-Float32Array is refused with a message', async () => {
  const { nativeKernels } = await import('../../engine/native/model');
  assert.throws(() => nativeKernels().argmaxFinite(new Float32Array(0)), /argmaxFinite: x is empty/);
  assert.throws(() => nativeKernels().argmaxFinite([1, 2] as unknown as Float32Array), /x must be a Float32Array/);
});
