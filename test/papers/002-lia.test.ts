// Paper 002 (LIA, ISCA'25) reproduction: Table 1 sizes, the Fig. 9 policy regions and thresholds,
// memory sizes of §1/§6, Table 3's "Offloaded %", Opt-1 residency (§5.2) and the Table 4
// ablation ratios. Every asserted number cites where the paper prints it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { optLayerShape, sublayerSizes, producedKvBytes, layerWeightBytesLia } from '../../engine/plan/lia/sublayers';
import { FULL_CPU, FULL_GPU, PARTIAL_CPU, type LiaSystem, optimalPolicy, parsePolicyVector, policyVector } from '../../engine/plan/lia/cost';
import { batchAtSameDdr, cxlOffloadedFraction, totalKvBytes } from '../../engine/plan/lia/memory';
import { predictLia } from '../../engine/plan/lia/latency';
import { residentLayers } from '../../engine/plan/lia/residency';
import { planRequest } from '../../engine/plan/api';

// OPT configs (OPT paper; LIA prints only d_m = 12288 for 175B, §2).
const OPT = {
  '30B': { d: 7168, layers: 48, vocab: 50272 },
  '66B': { d: 9216, layers: 64, vocab: 50272 },
  '175B': { d: 12288, layers: 96, vocab: 50272 },
};
/** Parameters: 12·d² per layer (+ biases, norms) + token and position embeddings (2050 rows). */
function optParams(m: { d: number; layers: number; vocab: number }): number {
  const perLayer = 12 * m.d * m.d + 13 * m.d;
  return m.layers * perLayer + (m.vocab + 2050) * m.d;
}

// SPR (Table 2; §4: AMX ≈ 20 TFLOPS measured, 260 GB/s) with A100 / H100 (public specs).
// Decision: BW_PCIe is the paper's only free parameter (never printed). 23.5 GB/s (effective
// PCIe 4.0 x16) is the value at which the SPR-A100 decode threshold lands on the printed B ≈ 858;
// the prefill threshold, the three policy regimes and L-independence are then predictions.
const SPR_A100: LiaSystem = { pcieGBps: 23.5, cpuGBps: 260, gpuGBps: 1555, cpuTflops: 20, gpuTflops: 312 };
const SPR_H100: LiaSystem = { pcieGBps: 2 * 23.5, cpuGBps: 260, gpuGBps: 2000, cpuTflops: 20, gpuTflops: 756 };

/**
 * Smallest n in [1, 4096] whose optimal policy is not full CPU, by bisection; checks that the
 * switch is clean (full CPU just below, not just above) so a non-monotone map would fail.
 */
function firstNotFullCpu(policyAt: (n: number) => number): number {
  let lo = 1, hi = 4096; // policyAt(lo) is full CPU, policyAt(hi) is not
  assert.equal(policyAt(lo), FULL_CPU);
  assert.notEqual(policyAt(hi), FULL_CPU);
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (policyAt(mid) === FULL_CPU) lo = mid; else hi = mid;
  }
  for (const n of [hi - 20, hi - 5, hi - 1]) if (n >= 1) assert.equal(policyAt(n), FULL_CPU, `n=${n}`);
  for (const n of [hi, hi + 5, hi + 20]) assert.notEqual(policyAt(n), FULL_CPU, `n=${n}`);
  return hi;
}

test('Table 1: sublayer operand sizes and FLOPs for OPT BF16 (prefill and decode)', () => {
  const d = 12288, B = 7, L = 300;
  const pre = sublayerSizes(optLayerShape(d), 'prefill', B, L).map((s) => [s.dx, s.dy, s.flops]);
  assert.deepEqual(pre, [
    [2 * B * L * d, 6 * d * d, 6 * B * L * d * d],
    [2 * B * L * d, 2 * B * L * d, 2 * B * L * L * d],
    [2 * B * L * d, 2 * B * L * d, 2 * B * L * L * d],
    [2 * B * L * d, 2 * d * d, 2 * B * L * d * d],
    [2 * B * L * d, 8 * d * d, 8 * B * L * d * d],
    [8 * B * L * d, 8 * d * d, 8 * B * L * d * d],
  ]);
  const dec = sublayerSizes(optLayerShape(d), 'decode', B, L).map((s) => [s.dx, s.dy, s.flops]);
  assert.deepEqual(dec, [
    [2 * B * d, 6 * d * d, 6 * B * d * d],
    [2 * B * d, 2 * B * L * d, 2 * B * L * d],
    [2 * B * d, 2 * B * L * d, 2 * B * L * d],
    [2 * B * d, 2 * d * d, 2 * B * d * d],
    [2 * B * d, 8 * d * d, 8 * B * d * d],
    [8 * B * d, 8 * d * d, 8 * B * d * d],
  ]);
  // Eq. (9) D_KV (paper: not given) = K + V of the new tokens.
  assert.equal(producedKvBytes(optLayerShape(d), 'prefill', B, L), 4 * B * L * d);
  assert.equal(producedKvBytes(optLayerShape(d), 'decode', B, L), 4 * B * d);
});

test('§5.2 Opt-1: OPT-30B adds ≈1.2 GB per resident decoder layer (24·d_m² bytes)', () => {
  const bytes = layerWeightBytesLia(optLayerShape(OPT['30B'].d));
  assert.equal(bytes, 24 * 7168 * 7168);
  assert.ok(Math.abs(bytes / 1e9 - 1.2) < 0.05, `${bytes / 1e9} GB`);
});

test('Fig. 9 / §7.1: OPT-175B on SPR-A100 — decode threshold B ≈ 858, independent of L', () => {
  const shape = optLayerShape(OPT['175B'].d);
  const threshold = (L: number): number => firstNotFullCpu((B) => optimalPolicy(shape, SPR_A100, 'decode', B, L).policy);
  const t = [64, 512, 2048].map(threshold);
  assert.equal(new Set(t).size, 1, `decode threshold depends on L: ${t.join(', ')}`); // "independent of L"
  // "When B is less than 858 ... all sublayers are offloaded to the CPU" → first non-CPU B ≈ 859.
  assert.ok(Math.abs(t[0]! - 858) <= 5, `decode threshold ${t[0]} vs paper 858`);
  // "As B exceeds this threshold, the GPU computes the QKV mapping, output projection, FC1, and FC2".
  assert.equal(policyVector(optimalPolicy(shape, SPR_A100, 'decode', 900, 1024).policy), '(0,1,1,0,0,0)');
  assert.equal(optimalPolicy(shape, SPR_A100, 'decode', 100, 1024).policy, FULL_CPU);
});

test('Fig. 9 / §7.1: OPT-175B on SPR-A100 — prefill switches full CPU → full GPU at B·L ≈ 850', () => {
  const shape = optLayerShape(OPT['175B'].d);
  for (const B of [1, 2, 4, 8]) {
    const L = firstNotFullCpu((l) => optimalPolicy(shape, SPR_A100, 'prefill', B, l).policy);
    assert.equal(optimalPolicy(shape, SPR_A100, 'prefill', B, L).policy, FULL_GPU, `B=${B} L=${L}`);
    const BL = B * L;
    // Prediction (not calibrated): within 3 % of the printed "BL ≈ 850".
    assert.ok(Math.abs(BL - 850) / 850 < 0.03, `B=${B}: threshold BL=${BL} vs paper 850`);
  }
});

test('§7.1: only the three printed policies appear over the Fig. 9 grid (30B, 66B, 175B)', () => {
  const seen = new Set<string>();
  for (const m of Object.values(OPT)) {
    const shape = optLayerShape(m.d);
    for (const sys of [SPR_A100, SPR_H100]) {
      for (const B of [1, 4, 16, 64, 256, 512, 900, 1200, 1600]) {
        for (const L of [32, 128, 512, 1024, 2016]) {
          seen.add(policyVector(optimalPolicy(shape, sys, 'prefill', B, L).policy));
          seen.add(policyVector(optimalPolicy(shape, sys, 'decode', B, L).policy));
        }
      }
    }
  }
  // "LIA identifies three primary policies ... (0,1,1,0,0,0), (1,1,1,1,1,1), (0,0,0,0,0,0)".
  assert.deepEqual([...seen].sort(), ['(0,0,0,0,0,0)', '(0,1,1,0,0,0)', '(1,1,1,1,1,1)']);
  assert.equal(parsePolicyVector('(0,1,1,0,0,0)'), PARTIAL_CPU);
});

test('§7.1: H100 picks GPU-centric policies for a broader range than A100', () => {
  const shape = optLayerShape(OPT['175B'].d);
  const first = (sys: LiaSystem): number => firstNotFullCpu((B) => optimalPolicy(shape, sys, 'decode', B, 1024).policy);
  assert.ok(first(SPR_H100) < first(SPR_A100), `H100 ${first(SPR_H100)} vs A100 ${first(SPR_A100)}`);
});

test('§1/§6: OPT-175B host memory — 330 GB at B=1, L=1024; 1.6 TB at B=256; "1.4 TB" at B=1024, L=256', () => {
  const m = OPT['175B'];
  const params = 2 * optParams(m);
  const total = (B: number, L: number): number => params + totalKvBytes(optLayerShape(m.d), m.layers, B, L);
  // The paper mixes units: 330 "GB" is GiB, 1.6 "TB" is 1e12 bytes, 1.4 "TB" is TiB.
  assert.ok(Math.abs(total(1, 1024) / 2 ** 30 - 330) < 5, `${total(1, 1024) / 2 ** 30} GiB`);
  assert.ok(Math.abs(total(256, 1024) / 1e12 - 1.6) < 0.05, `${total(256, 1024) / 1e12} TB`);
  assert.ok(Math.abs(total(1024, 256) / 2 ** 40 - 1.4) < 0.05, `${total(1024, 256) / 2 ** 40} TiB`);
});

test('Table 3: OPT-30B, B=900, L_in=32 — CXL "Offloaded %" and the larger batches at the same DDR', () => {
  const m = OPT['30B'];
  const shape = optLayerShape(m.d);
  const params = 2 * optParams(m);
  // [L_out, Offloaded % at B=900, B in parentheses, Offloaded % at that B] (Table 3).
  const rows: [number, number, number, number][] = [[32, 43.1, 1580, 30.1], [64, 33.5, 1350, 25.2], [128, 23.2, 1150, 19.1], [256, 14.4, 1050, 12.6]];
  for (const [lOut, pct, bigB, bigPct] of rows) {
    const f = cxlOffloadedFraction(params, shape, m.layers, 900, 32 + lOut);
    assert.ok(Math.abs(100 * f - pct) < 0.1, `L_out=${lOut}: ${(100 * f).toFixed(2)} % vs ${pct} %`);
    const g = cxlOffloadedFraction(params, shape, m.layers, bigB, 32 + lOut);
    assert.ok(Math.abs(100 * g - bigPct) < 0.1, `L_out=${lOut}, B=${bigB}: ${(100 * g).toFixed(2)} % vs ${bigPct} %`);
    // The printed larger batches are ≈ B/(1−f) (within 2 %: 1581, 1354, 1172, 1051).
    assert.ok(Math.abs(batchAtSameDdr(900, f) - bigB) / bigB < 0.02);
  }
});

test('§5.2 Opt-1: OPT-30B, B=1, L=2016 on A100-40GB keeps ≈62 % of the layers resident', () => {
  const shape = optLayerShape(OPT['30B'].d);
  const pre = optimalPolicy(shape, SPR_A100, 'prefill', 1, 2016).policy;
  const dec = optimalPolicy(shape, SPR_A100, 'decode', 1, 2016).policy;
  // A100 40 GB; decision: 1.5 GiB kept by the CUDA context and allocator (not in the paper).
  const r = residentLayers({ shape, nLayers: 48, vramBytes: 40 * 2 ** 30 - 1.5 * 2 ** 30, batch: 1, maxContext: 2016 + 32, promptTokens: 2016, prefillPolicy: pre, decodePolicy: dec });
  // Paper: 62 % of layers (≈30 of 48). One layer = 2.1 %; we allow ±2 layers for the unknown reserve.
  assert.ok(Math.abs(r.residentLayers - 30) <= 2, `${r.residentLayers} layers resident`);
});

test('Table 4: OPT-30B, L_in=256, L_out=32, SPR-A100 — ablation ratios of Opt-1 and Opt-2', () => {
  const shape = optLayerShape(OPT['30B'].d);
  const vram = 40 * 2 ** 30 - 1.5 * 2 ** 30;
  const run = (B: number, o: { residency?: boolean; overlap?: boolean }): number =>
    predictLia(shape, 48, SPR_A100, { batch: B, promptTokens: 256, genTokens: 32 }, { vramBytes: vram, ...o }).totalMs;
  // B=1: "No Opt-2" = "All" (5.05 = 5.05): the full-CPU policy has nothing to overlap.
  assert.equal(run(1, { overlap: false }), run(1, {}));
  // B=1: Opt-1 halves latency (10.09 / 5.05 = 2.0); we predict more resident layers (33 vs ≈30),
  // hence a somewhat larger ratio — asserted within 1.6–2.5.
  const r1 = run(1, { residency: false }) / run(1, {});
  assert.ok(r1 > 1.6 && r1 < 2.5, `Opt-1 ratio at B=1: ${r1.toFixed(2)} (paper 2.00)`);
  // B=900: Opt-1 has ~no effect (297.13 / 291.02 = 1.02) and Opt-2 gives 443.61 / 291.02 = 1.52×.
  const r900o1 = run(900, { residency: false }) / run(900, {});
  assert.ok(r900o1 < 1.05, `Opt-1 ratio at B=900: ${r900o1.toFixed(3)} (paper 1.02)`);
  const r900o2 = run(900, { overlap: false }) / run(900, {});
  assert.ok(Math.abs(r900o2 - 1.52) < 0.1, `Opt-2 ratio at B=900: ${r900o2.toFixed(3)} (paper 1.52)`);
});

// Through the CLI's code path (`fulcrum plan --policy lia`, planRequest) on the spr-a100 preset
// as shipped (Table 2: SPR 40 cores 260 GB/s, AMX ≈ 20 TFLOPS measured; A100 40 GB; PCIe 4.0 at
// the nominal 32 GB/s the paper computes with).
test('Table 4 / §7.3 (CLI path): OPT-30B, L_in=256, L_out=32 on spr-a100 — policy regions incl. B=900, all fit', () => {
  // Decode: full CPU below the threshold (Fig. 9, §7.1), attention on the CPU and the rest on the
  // GPU at B=900 (Table 4: LIA = FlexGen's policy there, 291.02 s both).
  const expected: [number, string, number][] = [[1, '(1,1,1,1,1,1)', 5.05], [64, '(1,1,1,1,1,1)', 24.0], [900, '(0,1,1,0,0,0)', 291.02]];
  const got: string[] = [];
  for (const [B, decode, paperS] of expected) {
    const plan = planRequest({ model: 'opt-30b', hardware: 'spr-a100', workload: `batch=${B},prompt=256,gen=32`, policy: 'lia' });
    assert.equal(plan.details!.decodePolicy, decode, `B=${B}`);
    assert.ok(plan.memory.fits, `B=${B} must fit (the paper runs it on a 40 GB A100)`);
    const s = plan.predicted.totalMs / 1000;
    got.push(`B=${B}: ${decode} ${s.toFixed(1)} s (paper ${paperS} s)`);
    // Magnitude: within a factor 2 of Table 4 (Fulcrum is faster: roofline CPU/GPU times, no
    // framework overhead; Table 5 shows LIA's own CPU compute at 168.8 s for B=900).
    assert.ok(s > paperS / 2 && s < paperS * 2, `B=${B}: ${s.toFixed(1)} s vs ${paperS} s`);
    // §6: the CXL "Offloaded %" is printed with the plan.
    assert.match(plan.explanation.summary, /CXL .* would offload [0-9.]+ % of host memory/);
  }
  console.log(`# LIA via planRequest on spr-a100: ${got.join('; ')}`);
});

test('Table 3 (CLI path): OPT-30B B=900, L_in=32 — the plan prints the CXL "Offloaded %"', () => {
  for (const [lOut, pct] of [[32, 43.1], [256, 14.4]] as const) {
    const plan = planRequest({ model: 'opt-30b', hardware: 'spr-a100', workload: `batch=900,prompt=32,gen=${lOut}`, policy: 'lia' });
    const f = plan.details!.cxlOffloadedFraction as number;
    assert.ok(Math.abs(100 * f - pct) < 0.2, `L_out=${lOut}: ${(100 * f).toFixed(2)} % vs ${pct} %`);
    assert.match(plan.explanation.summary, new RegExp(`offload ${(100 * f).toFixed(1)} %`));
  }
});
