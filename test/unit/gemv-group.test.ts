// A decode step runs matrices of one input (a layer's Q, K and V; its gate and up) as one grouped
// GEMV pass (kernels/matmul.h gemv_packed_group): one pool run, the row groups of all of them
// claimed from one counter. Each output must be the bits the matrix gives alone: the same packed
// GEMV over the same rows, only the split between threads differs. On every ISA with packed
// kernels this CPU runs (a child process per ISA), at 1-3 threads; bad groups are refused with
// a message.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';

import { GgmlType } from '../../engine/model/ggml-types';
import { writeSyntheticModel } from '../../engine/model/synthetic';
import { nativeKernels, type NativeModel } from '../../engine/native/model';
import { quantIsas } from '../../engine/native/quant';
import { Engine } from '../../engine/runtime/engine';
import { tempDir } from '../helpers/shared';
import type { GemvGroupCase } from '../helpers/gemv-group-child';

const root = path.resolve(__dirname, '..', '..');
const child = path.join(root, 'test', 'helpers', 'gemv-group-child.ts');

// The AVX-512 kernels on every AVX-512 host, AMX or not (the decode GEMVs are the same with
// AMX-INT8; its prefill tiles are tested against these in test/unit/repack.test.ts). Set before
// this process loads the addon (its kernel choice is made once, at load); the children inherit it.
process.env.FULCRUM_AMX = '0';

for (const isa of ['avx2', 'avxvnni', 'avx512'] as const) {
  test(`a grouped decode GEMV gives each matrix the bits it gets alone (FULCRUM_ISA=${isa})`, { skip: quantIsas().includes(isa) ? false : `this CPU does not run ${isa}` }, () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', child], {
      cwd: root, env: { ...process.env, FULCRUM_ISA: isa, FULCRUM_NO_REPACK: '' }, encoding: 'utf8', timeout: 120_000,
    });
    assert.equal(r.status, 0, `child (FULCRUM_ISA=${isa}) failed: ${r.stderr}`);
    const out = JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}') as { isa: string; cases: GemvGroupCase[]; errors: string[] };
    assert.equal(out.isa, isa);
    assert.equal(out.cases.length, 11 * 3);
    for (const c of out.cases) {
      assert.ok(c.packed, `${c.label}: every matrix must have a packed layout at ${isa}`);
      assert.ok(c.equal, `${c.label}, ${c.threads} thread(s): ${c.firstDiff}`);
    }
    const [none, tooMany, short, unpacked] = out.errors;
    assert.match(none ?? '', /1 to 32 items, got 0/);
    assert.match(tooMany ?? '', /got 33/);
    assert.match(short ?? '', /weights hold \d+ bytes/);
    assert.match(unpacked ?? '', /has no packed layout/);
  });
}

// Every packed GEMV (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the K-quants, at each ISA) comes in
// several walks: software prefetch as four streams (the 32-element formats) or two (Q4_K, Q5_K),
// software prefetch as the kernel's own walk (one stream for most), and the hardware prefetchers
// alone (core/isa.h KernelChoice::gemv_four_streams, k_gemv_two_streams, gemv_prefetch and
// q6_k_gemv_prefetch_bytes, chosen per CPU): prefetching and stream order move bytes, never
// sums, so all must give the same bits.
for (const isa of ['avx2', 'avxvnni', 'avx512'] as const) {
  test(`the packed GEMVs give the same bits in every walk: several streams, one, hardware prefetch (FULCRUM_ISA=${isa})`, { skip: quantIsas().includes(isa) ? false : `this CPU does not run ${isa}` }, () => {
    const walks = [{ prefetch: '1', streams: '4', kStreams: '2' }, { prefetch: '1', streams: '1', kStreams: '1' }, { prefetch: '0', streams: '4', kStreams: '2' }] as const;
    const runs = walks.map(({ prefetch, streams, kStreams }) => {
      const r = spawnSync(process.execPath, ['--import', 'tsx', child], {
        cwd: root,
        env: { ...process.env, FULCRUM_ISA: isa, FULCRUM_GEMV_PREFETCH: prefetch, FULCRUM_GEMV_PREFETCH_Q6_K: prefetch, FULCRUM_GEMV_STREAMS: streams, FULCRUM_GEMV_K_STREAMS: kStreams, FULCRUM_NO_REPACK: '' },
        encoding: 'utf8', timeout: 120_000,
      });
      assert.equal(r.status, 0, `child (FULCRUM_ISA=${isa}, FULCRUM_GEMV_PREFETCH(_Q6_K)=${prefetch}, FULCRUM_GEMV_STREAMS=${streams}, FULCRUM_GEMV_K_STREAMS=${kStreams}) failed: ${r.stderr}`);
      return JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}') as { isa: string; prefetch: string; prefetchQ6K: string; streams: number; streamsK: number; digest: string; cases: GemvGroupCase[] };
    });
    const [several, one, hardware] = runs;
    assert.equal(several?.prefetch, 'software');
    assert.equal(several?.streams, 4);
    assert.equal(several?.streamsK, 2);
    assert.equal(one?.prefetch, 'software');
    assert.equal(one?.streams, 1);
    assert.equal(one?.streamsK, 1);
    assert.equal(hardware?.prefetch, 'hardware');
    assert.equal(several?.prefetchQ6K, 'software');
    assert.equal(hardware?.prefetchQ6K, 'hardware');
    for (const run of runs) assert.ok(run!.cases.every((c) => c.packed && c.equal));
    assert.match(several!.digest, /^[0-9a-f]{64}$/);
    assert.equal(one!.digest, several!.digest, 'one stream and several gave different outputs');
    assert.equal(hardware!.digest, several!.digest, 'software and hardware prefetch gave different outputs');
  });
}

test('a decode step groups Q/K/V and gate/up into one pass each, with the logits of ungrouped matmuls, and profiles split a pass by weight bytes', async () => {
  const { dir, cleanup } = tempDir();
  const engines: Engine[] = [];
  try {
    const file = path.join(dir, 'm.gguf');
    // Q8_0 at 512 columns: Q/K/V 420 KiB and gate/up 1.6 MiB a layer, over the 192 KiB under which
    // a group runs on the calling thread alone, so the pool's shared claims are what is compared.
    writeSyntheticModel(file, { architecture: 'llama', nLayers: 2, nEmbd: 512, nHeads: 8, nKvHeads: 2, nFf: 1536, nVocab: 1024, contextLength: 256, seed: 3, weightType: GgmlType.Q8_0 });
    const load = async (noGroups: boolean) => {
      // Read by the addon when it compiles the model's programs.
      if (noGroups) process.env.FULCRUM_NO_GEMV_GROUPS = '1';
      try {
        const e = await Engine.load(file, { threads: 2, contextLength: 256, device: 'cpu' });
        engines.push(e);
        return (e as unknown as { native: NativeModel }).native;
      } finally {
        delete process.env.FULCRUM_NO_GEMV_GROUPS;
      }
    };
    const grouped = await load(false), alone = await load(true);
    assert.equal(nativeKernels().amxInt8(), false, 'FULCRUM_AMX=0 was set after this process chose its kernels');
    const groupsOf = (m: NativeModel, l: number) => {
      const decode = m.compiledOps().filter((o) => o.stage === 'decode' && o.weight);
      const g = (w: string) => decode.find((o) => o.weight === `blk.${l}.${w}.weight`)?.gemvGroup ?? 0;
      return [g('attn_q'), g('attn_k'), g('attn_v'), g('ffn_gate'), g('ffn_up'), g('ffn_down')];
    };
    for (let l = 0; l < 2; l++) {
      assert.deepEqual(groupsOf(grouped, l), [2, 0, 0, 1, 0, 0], `layer ${l}'s groups`);
      assert.deepEqual(groupsOf(alone, l), [0, 0, 0, 0, 0, 0], `layer ${l} with FULCRUM_NO_GEMV_GROUPS=1`);
    }
    const prompt = Int32Array.from({ length: 40 }, (_, i) => 1 + ((i * 37 + 11) % 1000));
    const next = [5, 900, 17, 333, 64, 2];
    const run = (m: NativeModel, profiling: boolean) => {
      m.clearKv(0);
      m.eval(prompt, 0, false);
      m.profiling = profiling;
      const out = next.map((t, i) => m.eval(Int32Array.of(t), prompt.length + i, false));
      const profile = m.opProfile();
      m.profiling = false;
      return { out, profile };
    };
    const a = run(grouped, false), b = run(alone, false), c = run(grouped, true);
    for (let i = 0; i < next.length; i++) {
      assert.deepEqual(a.out[i], b.out[i], `decode step ${i}: grouped logits differ from ungrouped matmuls'`);
      assert.deepEqual(c.out[i], a.out[i], `decode step ${i}: profiling changed the grouped logits`);
    }
    assert.deepEqual(groupsOf(alone, 0), [0, 0, 0, 0, 0, 0], 'still ungrouped after its steps (no recompile brought the groups back)');
    // Profiling a grouped step: every op of a pass keeps an entry, its share of the pass's span by
    // its weight bytes (Q 512 rows, K and V 128 each; gate and up alike).
    const ns = (w: string) => c.profile.filter((p) => p.weight === w).reduce((t, p) => t + p.ns, 0);
    for (let l = 0; l < 2; l++) {
      const q = ns(`blk.${l}.attn_q.weight`), k = ns(`blk.${l}.attn_k.weight`), v = ns(`blk.${l}.attn_v.weight`);
      const gate = ns(`blk.${l}.ffn_gate.weight`), up = ns(`blk.${l}.ffn_up.weight`);
      assert.ok(q > 0 && k > 0 && v > 0 && gate > 0 && up > 0, `layer ${l}: every grouped op is timed (${q}, ${k}, ${v}, ${gate}, ${up} ns)`);
      assert.ok(Math.abs(k / q - 0.25) < 0.01 && Math.abs(v / q - 0.25) < 0.01, `layer ${l}: K and V get a quarter of Q's time (${k}, ${v} of ${q} ns)`);
      assert.ok(Math.abs(up / gate - 1) < 0.01, `layer ${l}: gate and up split their pass evenly (${gate}, ${up} ns)`);
    }
  } finally {
    for (const e of engines) e.dispose();
    cleanup();
  }
});

// A MoE decode token's experts run as two grouped passes (model/moe.cc run_decode_grouped: the
// gates and ups of all its experts, then the downs) instead of three matmuls an expert: the
// logits must be the bits of the expert-by-expert path (FULCRUM_NO_GEMV_GROUPS=1), which the
// architecture parity tests hold against llama.cpp. Experts of 512 × 512 Q8_0 (256 KiB each, 4
// of 16 a token: a 2 MiB gate/up pass, so the pool's tapering claims cross expert boundaries),
// at 1 and 2 threads; a prompt of several tokens keeps the expert-by-expert path for prefill.
for (const threads of [1, 2]) {
  test(`a MoE decode token's experts in two grouped passes give the expert-by-expert logits (${threads} thread(s))`, async () => {
    const { dir, cleanup } = tempDir();
    const engines: Engine[] = [];
    try {
      const file = path.join(dir, 'moe.gguf');
      const [nEmbd, nFf] = [512, 512];
      writeSyntheticModel(file, {
        architecture: 'qwen3moe', nLayers: 2, nEmbd, nHeads: 8, nKvHeads: 2, nFf, nExpert: 16, nExpertUsed: 4, routerStd: 1,
        nVocab: 1024, contextLength: 256, seed: 5, weightType: GgmlType.Q8_0,
      });
      const kernels = nativeKernels() as unknown as { packedLayout(type: number, rows: number, cols: number): string | null };
      assert.notEqual(kernels.packedLayout(GgmlType.Q8_0, nFf, nEmbd), null, 'the experts must have a packed layout (the grouped passes take packed experts only)');
      const load = async (noGroups: boolean) => {
        if (noGroups) process.env.FULCRUM_NO_GEMV_GROUPS = '1';
        try {
          const e = await Engine.load(file, { threads, contextLength: 256, device: 'cpu' });
          engines.push(e);
          return (e as unknown as { native: NativeModel }).native;
        } finally {
          delete process.env.FULCRUM_NO_GEMV_GROUPS;
        }
      };
      const grouped = await load(false), alone = await load(true);
      const prompt = Int32Array.from({ length: 24 }, (_, i) => 1 + ((i * 53 + 7) % 1000));
      const next = [3, 700, 41, 255, 9, 612, 88, 1000];
      const run = (m: NativeModel) => {
        m.clearKv(0);
        const first = m.eval(prompt, 0, false);
        return [first, ...next.map((t, i) => m.eval(Int32Array.of(t), prompt.length + i, false))];
      };
      const a = run(grouped), b = run(alone);
      assert.deepEqual(a[0], b[0], 'prefill logits differ');
      for (let i = 0; i < next.length; i++) assert.deepEqual(a[i + 1], b[i + 1], `decode step ${i}: grouped experts' logits differ from expert-by-expert`);
      // Different tokens route differently: the steps compared are not one routing repeated.
      assert.notDeepEqual(a[1], a[2]);
    } finally {
      for (const e of engines) e.dispose();
      cleanup();
    }
  });
}
