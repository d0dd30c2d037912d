// Paper 004 (APEX) reproduction: the analytical mode condition (Eqs. 1–6, Algorithm 1) on the
// paper's own numbers, the scheduler's mode choice, and the asynchronous-overlap gain over NEO in
// simulation (Fig. 7's direction). Every asserted number cites where the paper prints it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type ApexRates, apBeatsGpuOnly, apBeatsGpuOnlyMixed, apConditionHolds, apRatioBound, apThroughputs } from '../../engine/plan/apex/condition';
import { ApexScheduler } from '../../engine/plan/apex/scheduler';
import { hardwarePreset } from '../../engine/hardware/presets';
import { modelPreset } from '../../engine/model/model-presets';
import { profilePredictors, rooflineOnlineCosts } from '../../engine/plan/neo/costs';
import { NeoScheduler } from '../../engine/plan/neo/scheduler';
import { generateWorkload } from '../../engine/plan/online/workload';
import { runOnline } from '../../engine/plan/online/loop';
import { planRequest, simulateRequest } from '../../engine/plan/api';

const GiB = 2 ** 30;

test('§3.2 Eq. (6): right-hand side over the "typical" T_gatt/T_glinear range 0.5–1.5', () => {
  // "For typical T_gatt/T_glinear ratios (between 0.5 and 1.5), N_G/N_C must generally be less than ~7.5."
  assert.equal(apRatioBound(1, 0.5), 7.5);
  assert.equal(apRatioBound(1, 1), 6);
  assert.ok(Math.abs(apRatioBound(1, 1.5) - 5.8333) < 1e-3);
  // The bound is smallest at T_gatt/T_glinear = √2 (2√2 + 3 ≈ 5.83) — digest 004's check.
  assert.ok(Math.abs(apRatioBound(1, Math.SQRT2) - (3 + 2 * Math.SQRT2)) < 1e-12);
  // "CPU attention speed (N_C) must be at least ~13% of GPU attention speed (N_G)": 1/7.5 = 13.3 %.
  assert.ok(Math.abs(100 / apRatioBound(1, 0.5) - 13.3) < 0.05);
});

test('§3.2: inequality (5) and its algebraic form (6) agree everywhere', () => {
  for (const l of [0.1, 0.5, 1, 2, 5]) {
    for (const g of [0.05, 0.5, 1, 1.5, 4]) {
      for (const ratio of [1, 3, 5.9, 6.1, 7.4, 7.6, 12, 40]) {
        const r: ApexRates = { gpuTokensPerMs: ratio, cpuTokensPerMs: 1, linearMs: l, gpuAttnMs: g };
        const rhs = apRatioBound(l, g);
        if (Math.abs(ratio - rhs) < 1e-9) continue;
        assert.equal(apBeatsGpuOnly(r), apConditionHolds(r), `l=${l} g=${g} N_G/N_C=${ratio}`);
      }
    }
  }
});

test('§2.4 Fig. 1b: CPU 3031 µs vs GPU 170 µs per layer (batch 4) → pipelining cannot pay off; AO is chosen', () => {
  // Same work on both: N_G/N_C = 3031/170 ≈ 17.8 ("CPU attention performance is typically < 10% of the GPU's").
  const ratio = 3031 / 170;
  assert.ok(ratio > 10);
  for (const attnOverLinear of [0.5, 1, 1.5]) {
    const r: ApexRates = { gpuTokensPerMs: ratio, cpuTokensPerMs: 1, linearMs: 1, gpuAttnMs: attnOverLinear };
    assert.equal(apConditionHolds(r), false, `T_gatt/T_glinear=${attnOverLinear}`);
    const t = apThroughputs(r);
    assert.ok(t.ap < t.gpuOnly); // (5) fails: AP is slower than GPU-only
  }
});

test('Algorithm 1 mixed branch: prefill lengthens the CPU window, so AP pays off where decode-only does not', () => {
  // N_G/N_C = 8 > 7.5 at T_gatt/T_glinear = 0.5: decode-only (5) fails …
  const r: ApexRates = { gpuTokensPerMs: 8, cpuTokensPerMs: 1, linearMs: 1, gpuAttnMs: 0.5 };
  assert.equal(apBeatsGpuOnly(r), false);
  // … but with a prefill tripling the linear stage the mixed inequality holds ("speedup more achievable").
  assert.equal(apBeatsGpuOnlyMixed(r, 3, 0.7), true);
  // With no extra prefill work the mixed window (T_glinear + T_glinear + T_gatt) equals (2), so
  // the two branches agree.
  assert.equal(apBeatsGpuOnlyMixed(r, 1, 0.5), apBeatsGpuOnly(r));
});

// A10 + Llama-3.1-8B (APEX Table 1, §5.4). Decisions, not in the paper: usable VRAM 0.9 × 24 GiB;
// CPU attention 10 % of the A10's attention bandwidth (0.6 × 600 GB/s), as §2.4 reports
// "CPU attention performance is typically < 10% of the GPU's"; input 1000 (Fig. 7 caption);
// 500 requests queued at once (enough CPU requests for the 8× rule); the 8× CPU:GPU request threshold of §4.2.
function a10() {
  const costs = rooflineOnlineCosts(modelPreset('llama-3.1-8b'), hardwarePreset('apex-a10'), { vramBytes: 0.9 * 24 * GiB, cpuAttnGBps: 36 });
  const P = profilePredictors(costs);
  const limits = { nLayers: costs.nLayers, gpuKvTokens: costs.gpuKvTokens, cpuKvTokens: costs.cpuKvTokens, maxBatchTokens: costs.maxBatchTokens };
  return { costs, P, limits };
}

test('Fig. 7 (A10): APEX\'s gain over NEO grows with the average output length, using asynchronous overlap', () => {
  const { costs, P, limits } = a10();
  const run = (out: number) => {
    const w = generateWorkload({ rate: Infinity, count: 500, prompt: { kind: 'uniform-10pct', mean: 1000 }, output: { kind: 'uniform-10pct', mean: out }, seed: 1 });
    const neo = runOnline(w, new NeoScheduler('neo', limits, P), costs);
    const apex = runOnline(w, new ApexScheduler(limits, P), costs);
    return { gain: apex.throughputTokensPerS / neo.throughputTokensPerS, ao: apex.modes['async-overlap'] };
  };
  const short = run(100);
  const long = run(800);
  console.log(`# APEX/NEO on A10 at outputs 100, 800: ${short.gain.toFixed(3)}, ${long.gain.toFixed(3)} (paper Fig. 7: +5 % at 50–200, up to +37 % beyond 500)`);
  assert.ok(long.gain > short.gain, `${short.gain} → ${long.gain}`);
  assert.ok(long.gain > 1.03, `long-output gain ${long.gain}`);
  assert.ok(short.gain > 0.98); // never clearly worse than NEO
  assert.ok(long.ao > 0, 'asynchronous overlap should run in the long-output case');
});

// Through the CLI's code path (`fulcrum simulate --policy apex|neo`, simulateRequest) on the
// apex-a10 preset as shipped: its CPU attention is 170/3031 of the A10's (Fig. 1b's ratio,
// engine/hardware/presets.ts). Decisions: prompt 1000 (Fig. 7 caption), 500 requests queued at
// once (rate 1e6), vram=22G (0.9 of the A10's 24 GiB after the reserve).
test('Fig. 7 (CLI path, apex-a10 preset): N_G/N_C as Fig. 1b, (6) fails, asynchronous overlap runs, gain over NEO grows with output', () => {
  const run = (policy: 'neo' | 'apex', gen: number) => simulateRequest({
    model: 'llama-3.1-8b', hardware: 'apex-a10', policy,
    workload: `batch=64,prompt=1000,gen=${gen},rate=1000000,requests=500,vram=22G`,
  });
  const gains: number[] = [];
  let aoIterations = 0;
  for (const gen of [100, 1600]) {
    const neo = run('neo', gen);
    const apex = run('apex', gen);
    gains.push(apex.simulation.online!.throughputTokensPerS / neo.simulation.online!.throughputTokensPerS);
    aoIterations = ((apex.simulation.online!.extra!.modes as Record<string, number>)['async-overlap']) ?? 0;
    // The plan states Eq. (6) with the ratio the preset gives: N_G/N_C ≈ 3031/170 = 17.8 (±10 %).
    const d = apex.plan.explanation.decisions.find((x) => x.id === 'apex-mode')!;
    const m = /N_G\/N_C = ([0-9.]+) vs .* = ([0-9.]+) \(Eq\. 6\)/.exec(d.chosen);
    assert.ok(m, d.chosen);
    const ratio = Number(m[1]), bound = Number(m[2]);
    assert.ok(Math.abs(ratio / (3031 / 170) - 1) < 0.1, `N_G/N_C ${ratio}`);
    assert.ok(ratio > bound, `(6) must fail: ${ratio} vs ${bound}`);
  }
  console.log(`# APEX/NEO on apex-a10 at outputs 100, 1600: ${gains.map((g) => g.toFixed(3)).join(', ')}; AO iterations at 1600: ${aoIterations} (paper Fig. 7: +5 % at 50–200, up to +37 % beyond 500)`);
  assert.ok(aoIterations > 0, 'asynchronous overlap must run where (6) fails');
  assert.ok(gains[1]! > gains[0]!, `gain must grow with output length: ${gains.join(', ')}`);
  assert.ok(gains[0]! > 0.99 && gains[1]! > 1.03, `gains ${gains.join(', ')}`);
  // Inconsistency documented: §5.4's speed-up model S ≈ b/a with a = N_G/N_C = 17.8 (Fig. 1b)
  // bounds the extra throughput by b/a ≤ 1/17.8 ≈ 5.6 % of the decode-intensive time, yet the
  // abstract reports up to +37 % on the A10. Fulcrum follows the mechanism: the gain stays near b/a.
  assert.ok(gains[1]! < 1 + 2 / (3031 / 170), `gain ${gains[1]} above twice the b/a bound`);
});

test('a long serving run on the T4 preset completes (issue 21 item 5: a fixed 50,000-iteration cap called it stuck)', () => {
  // 200 requests of ~800 tokens at 2/s need about 58,000 iterations: more than the old cap.
  const r = simulateRequest({ model: 'llama-2-7b', hardware: 'apex-t4', workload: { batch: 1, prompt: 512, gen: 800, vramBytes: 14 * 2 ** 30, rate: 2, requests: 200 }, policy: 'apex' });
  const online = r.plan.predicted.online;
  assert.ok(online && online.throughputTokensPerS > 0, 'the online run finished with a throughput');
  assert.ok(online!.perTokenLatencyMs > 0);
});

// APEX on its T4 preset (Table 1: T4 + 2× Xeon 6130, LLaMa-2-7B; CPU attention 170/3031 of the
// T4's, Fig. 1b). Decisions: prompt 512, output 800 (OSC's long outputs, §5.2), 100 requests
// queued at once (rate 1e6), VRAM the preset's own (16 GB less the reserve).
test('T4 preset: asynchronous overlap wherever inequality (5) fails (and §4.2\'s 8× rule allows CPU attention); never below NEO', async () => {
  const { makeContext } = await import('../../engine/plan/context');
  const { onlineSetup } = await import('../../engine/plan/online/setup');
  const ctx = makeContext(modelPreset('llama-2-7b'), hardwarePreset('apex-t4'), { batch: 64, prompt: 512, gen: 800, rate: 1e6, requests: 100 });
  const s = onlineSetup(ctx);
  const w = generateWorkload({ rate: Infinity, count: 100, prompt: { kind: 'uniform-10pct', mean: 512 }, output: { kind: 'uniform-10pct', mean: 800 }, seed: 1 });
  const apex = new ApexScheduler(s.limits, s.predictors);
  let failing = 0, ao = 0, gated = 0, neoFaster = 0;
  runOnline(w, apex, s.truth, {
    onIteration: (plan) => {
      const d = apex.lastDecision;
      if (!d.rates || plan.batches.some((b) => b.gpuPrefills.length + b.cpuPrefills.length > 0)) return;
      // The decode-only branch of Algorithm 1, evaluated here from condition.ts, not the scheduler.
      if (apBeatsGpuOnly(d.rates)) { assert.notEqual(plan.mode, 'async-overlap', d.reason); return; }
      failing++;
      if (plan.mode === 'async-overlap') ao++;
      else if (/< 8× .* no CPU attention launched/.test(d.reason)) gated++;
      // Never below NEO: AO runs only when its estimate beats NEO's own schedule.
      else { neoFaster++; assert.match(d.reason, /NEO's schedule \((gpu-only|two-batch)\) is estimated faster than asynchronous overlap/); }
    },
  });
  assert.ok(failing > 100, `(5) fails in ${failing} iterations`);
  assert.equal(ao + gated + neoFaster, failing);
  console.log(`# T4 decode-only iterations where (5) fails: ${failing}; asynchronous overlap ${ao}, 8× rule ${gated}, NEO's schedule estimated faster ${neoFaster}`);
  assert.ok(ao > 0);
  // Through the CLI's path: throughput of both on the same arrivals.
  const run = (policy: 'neo' | 'apex', vram: string, rate: string, gen: number) => planRequest({
    model: 'llama-2-7b', hardware: 'apex-t4', policy, workload: `batch=64,prompt=512,gen=${gen},rate=${rate},requests=100${vram}`,
  }).predicted.online!.throughputTokensPerS;
  const own = { neo: run('neo', '', '1000000', 800), apex: run('apex', '', '1000000', 800) };
  console.log(`# T4 preset VRAM, output 800: APEX ${own.apex.toFixed(1)} vs NEO ${own.neo.toFixed(1)} tok/s (+${((own.apex / own.neo - 1) * 100).toFixed(1)} %; paper: up to +49 % (abstract), +71 % (§5.2, OSC))`);
  assert.ok(own.apex > own.neo * 1.03, `APEX ${own.apex} vs NEO ${own.neo}`);
  // vram=14G leaves GPU KV for about two requests: (5) holds in every iteration (GPU attention is
  // tiny beside the linear ops, so the RHS of (6) is large) and APEX runs NEO's own schedule
  // (before, its AP kept every overflowing prefill on the CPU and ran 0.03 % below NEO).
  for (const rate of ['2', '1000000']) {
    const neo = run('neo', ',vram=14G', rate, 800), ap = run('apex', ',vram=14G', rate, 800);
    console.log(`# T4 vram=14G rate ${rate}: APEX ${ap.toFixed(2)} vs NEO ${neo.toFixed(2)} tok/s`);
    assert.ok(ap >= neo, `rate ${rate}: APEX ${ap} vs NEO ${neo}`);
  }
});
