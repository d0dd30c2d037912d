// Prefill attention (native/src/kernels/attention.cc: blocked kernels kq_block_f16 / pv_block_f16)
// through kernels.attention, on every ISA this CPU runs (each in a child process with FULCRUM_ISA
// set, as the ISA is chosen once per process), for 1..40 query tokens from positions 0 and 37,
// over head sizes with and without a blocked register layout.
// The blocked kernels reproduce decode's rounding (kq_f16's per-lane sums and reduction tree,
// pv_f16's FMA chain in position order), so prefill must equal decode of each token alone bit for
// bit, and must not depend on the page size, the thread count or the token block size (a long
// context shrinks it). Against a float64 reference with the same f16 roundings (q, K, V, the
// probabilities), only f32 rounding remains: a flipped f16 rounding of one probability moves an
// output by at most 2^-11 · p · |v|, so 1e-3 bounds the error with room (measured: ~2e-4).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';

import { loadAddon } from '../../engine/native/addon';
import { quantIsas } from '../../engine/native/quant';
import { Q8_0_SHAPES, SHAPES, START_POSITIONS, TOKEN_COUNTS, type AttentionCase, type KvFormat } from '../helpers/attention-child';

const root = path.resolve(__dirname, '..', '..');
const child = path.join(root, 'test', 'helpers', 'attention-child.ts');

function runIsa(isa: string, format: KvFormat = 'F16'): { isa: string; format: KvFormat; cases: AttentionCase[] } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', child], {
    cwd: root, env: { ...process.env, FULCRUM_ISA: isa, FULCRUM_TEST_KV_FORMAT: format }, encoding: 'utf8', timeout: 120_000,
  });
  assert.equal(r.status, 0, `child (FULCRUM_ISA=${isa}, ${format}) failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}') as { isa: string; format: KvFormat; cases: AttentionCase[] };
}

// Head sizes with a blocked register layout per ISA (AVX-512: multiples of 16 up to 256; AVX2:
// multiples of 8 up to 128, as kq_f16 / pv_f16 have); the others run the per-token kernels.
const BLOCKED: Record<string, number[]> = { scalar: [], avx2: [8, 16, 32, 64, 80, 96, 128], avx512: [16, 32, 64, 80, 96, 128, 256] };

for (const isa of ['scalar', 'avx2', 'avx512'] as const) {
  const runs = quantIsas().includes(isa);
  test(`prefill attention equals decode bit for bit and a float64 reference to 1e-3 (FULCRUM_ISA=${isa})`, { skip: runs ? false : `this CPU does not run ${isa}` }, () => {
    const out = runIsa(isa);
    assert.equal(out.isa, isa);
    assert.equal(out.cases.length, SHAPES.length * START_POSITIONS.length * TOKEN_COUNTS.length);
    const blocked = [...new Set(out.cases.filter((c) => c.blocked).map((c) => c.headDim))].sort((a, b) => a - b);
    assert.deepEqual(blocked, BLOCKED[isa], 'head sizes taking the blocked kernels');
    for (const c of out.cases) {
      const label = `heads ${c.nHeads}/${c.nKvHeads}×${c.headDim}, ${c.nTokens} tokens from ${c.pos0}`;
      assert.ok(c.sameAsDecode, `${label}: prefill differs from decode of each token alone`);
      assert.ok(c.samePages, `${label}: result depends on the page size`);
      assert.ok(c.sameThreads, `${label}: result depends on the thread count`);
      assert.ok(c.sameLongContext, `${label}: result depends on the token block size`);
      assert.ok(c.refError <= 1e-3, `${label}: off the float64 reference by ${c.refError}`);
    }
  });
}

// A Q8_0 cache (KvFormat::Q8_0): the same bit-identities, the reference fed the values the cache
// stores (each block's f16 scale times its int8 values, which the kernels use exactly), so only
// f32 rounding and the probabilities' f16 rounding remain, as above.
for (const isa of ['scalar', 'avx2', 'avx512'] as const) {
  const runs = quantIsas().includes(isa);
  test(`Q8_0 KV cache: prefill equals decode bit for bit and a float64 reference to 1e-3 (FULCRUM_ISA=${isa})`, { skip: runs ? false : `this CPU does not run ${isa}` }, () => {
    const out = runIsa(isa, 'Q8_0');
    assert.equal(out.isa, isa);
    assert.equal(out.format, 'Q8_0');
    assert.equal(out.cases.length, Q8_0_SHAPES.length * START_POSITIONS.length * TOKEN_COUNTS.length);
    for (const c of out.cases) {
      const label = `Q8_0, heads ${c.nHeads}/${c.nKvHeads}×${c.headDim}, ${c.nTokens} tokens from ${c.pos0}`;
      assert.ok(c.sameAsDecode, `${label}: prefill differs from decode of each token alone`);
      assert.ok(c.samePages, `${label}: result depends on the page size`);
      assert.ok(c.sameThreads, `${label}: result depends on the thread count`);
      assert.ok(c.sameLongContext, `${label}: result depends on the token block size`);
      assert.ok(c.refError <= 1e-3, `${label}: off the float64 reference by ${c.refError}`);
    }
  });
}

test('kernels.attention rejects inconsistent shapes with a clear error', () => {
  const k = loadKernels();
  const q = new Float32Array(2 * 4 * 8), kv = new Float32Array(3 * 2 * 8);
  assert.throws(() => k.attention(q, kv, kv, 4, 3, 8, 64, 1), /nHeads is not a multiple of nKvHeads/);
  assert.throws(() => k.attention(q, kv, new Float32Array(8), 4, 2, 8, 64, 1), /k and v must both hold whole positions/);
  assert.throws(() => k.attention(new Float32Array(4 * 4 * 8), kv, kv, 4, 2, 8, 64, 1), /fewer positions than q has tokens/);
  assert.throws(() => k.attention(q, kv, kv, 4, 2, 8, 0, 1), /pageTokens = 0 is outside/);
  assert.equal(k.attention(q, kv, kv, 4, 2, 8, 64, 1).length, q.length);
  assert.throws(() => k.attention(q, kv, kv, 4, 2, 8, 64, 1, undefined, 'Q8_0'), /Q8_0 KV cache needs a head size that is a multiple of 32 up to 256.*is 8/);
  assert.throws(() => k.attention(q, kv, kv, 4, 2, 8, 64, 1, undefined, 'Q4_0' as 'Q8_0'), /kvFormat must be 'F16' or 'Q8_0', got 'Q4_0'/);
});

interface AttentionKernels {
  attention(q: Float32Array, k: Float32Array, v: Float32Array, nHeads: number, nKvHeads: number, headDim: number, pageTokens: number, threads: number,
    context?: number, kvFormat?: KvFormat): Float32Array;
}
function loadKernels(): AttentionKernels {
  return loadAddon<{ kernels: AttentionKernels }>().kernels;
}
