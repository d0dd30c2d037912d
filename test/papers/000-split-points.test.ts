// Paper 000 (Park & Egger, "CPU-GPU Workload Distribution during Throughput-Oriented LLM
// Inference on Single-GPU Systems", TACO 2026) reproduction: the device-map search (§2.2,
// Eq. 5–14) on the paper's own per-operation tables for one OPT-30B layer (Fig. 6a, 7a, 8a,
// printed verbatim in digest 000 §4), through the search and through `--costs` planning.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { kindOfOpName, parseCostsJson } from '../../engine/cost/costs-file';
import type { OpTimes } from '../../engine/cost/types';
import { evaluateCandidate, searchSplits, splitEntries } from '../../engine/plan/split-search';
import { planRequest, simulateRequest } from '../../engine/plan/api';
import { makeContext } from '../../engine/plan/context';
import { hardwarePreset } from '../../engine/hardware/presets';
import { modelPreset } from '../../engine/model/model-presets';

const NAMES = ['LN.0', 'Q', 'K', 'V', 'Scores', 'Softmax', 'WV', 'Output', 'LN.1', 'FC.0', 'FC.1'];
// Fig. 6a, batch 1x50 (ms): H2D and CPU per op.
const FIG6A_H2D = [0.001, 4.214, 4.214, 4.214, 15.344, 0.000, 15.344, 4.214, 0.001, 16.856, 16.856];
const FIG6A_CPU = [0.255, 5.775, 5.775, 5.775, 77.527, 0.776, 77.527, 5.775, 0.255, 23.216, 24.193];
// Fig. 7a, batches 2x25 (ms): H2D, CPU, GPU per op.
const FIG7A_H2D = [0.001, 4.214, 4.214, 4.214, 7.884, 0.000, 7.884, 4.214, 0.001, 16.856, 16.856];
const FIG7A_CPU = [0.255, 5.030, 5.030, 5.030, 36.450, 0.491, 36.450, 5.030, 0.255, 18.910, 19.891];
const FIG7A_GPU = [0.038, 0.323, 0.323, 0.323, 0.463, 0.066, 0.463, 0.323, 0.038, 1.097, 1.174];
// Fig. 8a, 1x50 with compression: compressed H2D, decompression, storage→device (GDS).
const FIG8A_H2DC = [0.001, 1.083, 1.083, 1.083, 4.110, 0.000, 4.110, 1.083, 0.001, 4.332, 4.332];
const FIG8A_DC = [0.000, 6.623, 6.623, 6.623, 10.963, 0.000, 10.963, 6.623, 0.000, 11.446, 11.446];
const FIG8A_S2D = [0.000, 20.700, 20.700, 20.700, 0.000, 0.000, 0.000, 20.700, 0.000, 82.798, 82.798];

function table(cols: { cpu?: number[]; gpu?: number[]; h2d?: number[]; dc?: number[]; s2d?: number[] }): OpTimes[] {
  return NAMES.map((name, k) => {
    const t: OpTimes = { name, kind: kindOfOpName(name) };
    if (cols.cpu) t.cpu = cols.cpu[k]!;
    if (cols.gpu) t.gpu = cols.gpu[k]!;
    if (cols.h2d) t.h2d = cols.h2d[k]!;
    if (cols.dc) t.dc = cols.dc[k]!;
    if (cols.s2d) t.s2d = cols.s2d[k]!;
    // §2.1: for Scores and WV the H entry is the K or V cache.
    if ((name === 'Scores' || name === 'WV') && cols.h2d) t.h2dKv = cols.h2d[k]!;
    return t;
  });
}

const close = (a: number, b: number, tol = 5e-4): void => assert.ok(Math.abs(a - b) <= tol, `${a} ≠ ${b} (±${tol})`);

test('Fig. 6a (1x50), Eq. 5–7: GPU-only 81.258 ms, best CPU-prefix split 68.615 ms, best split 47.546 ms (−41 %)', () => {
  const r = searchSplits(splitEntries(table({ cpu: FIG6A_CPU, h2d: FIG6A_H2D })));
  // GPU-only streams every weight and the KV: L = ΣH (digest 000 §4 worked search: 81.26 ms).
  close(r.gpuOnly.L, 81.258);
  // Best single split (CPU does LN.0–V, GPU the rest): 68.6 ms in the worked search.
  assert.equal(r.bestSingle!.i, 4);
  assert.equal(r.bestSingle!.j, 11);
  close(r.bestSingle!.terms.cpu, 17.58);
  close(r.bestSingle!.L, 68.615);
  // Best overall: GPU does LN.0–LN.1, CPU does FC.0 + FC.1 → 47.5 ms, 41 % below GPU-only.
  assert.deepEqual([r.best.i, r.best.j], [0, 9]);
  close(r.best.terms.cpu, 47.409);
  close(r.best.terms.h2d, 47.546);
  close(r.best.L, 47.546);
  assert.equal(Math.round((1 - r.best.L / r.gpuOnly.L) * 100), 41);
});

test('Eq. 13: search-space size for n = 11 operations', () => {
  const r = searchSplits(splitEntries(table({ cpu: FIG6A_CPU, h2d: FIG6A_H2D })));
  const n = 11;
  // Eq. 13 counts (n−1) + (n−1)(n−2)/2 = 55 split candidates; we also evaluate the n−1 splits with
  // a GPU prefix and CPU suffix (i = 0, 0 < j < n), GPU-only and CPU-only: 55 + 10 + 2.
  assert.equal((n - 1) + ((n - 1) * (n - 2)) / 2, 55);
  assert.equal(r.evaluated, 55 + (n - 1) + 2);
  // Intra-op split of Scores into 8 chunks (§2.2): 18 entries → 18·19/2 + 1 candidates.
  const chunked = searchSplits(splitEntries(table({ cpu: FIG6A_CPU, h2d: FIG6A_H2D }), { Scores: 8 }));
  assert.equal(chunked.evaluated, (18 * 19) / 2 + 1);
  assert.ok(chunked.best.L <= r.best.L + 1e-9, 'more split points can only help');
});

test('Eq. 14 (multi-batch 2x25, Fig. 7a): H2D adds (n−1)(ΣG + KV) for the extra batch', () => {
  const r = searchSplits(splitEntries(table({ cpu: FIG7A_CPU, h2d: FIG7A_H2D, gpu: FIG7A_GPU })), { batches: 2 });
  // GPU-only: ΣH = 66.338, ΣG = 4.631, KV = 2 × 7.884 → 66.338 + 4.631 + 15.768.
  close(r.gpuOnly.terms.h2d, 86.737);
  // Best: CPU does LN.0, Q, K and FC.1 for both batches (2 × 30.206 = 60.412 ms), H2D 59.594 ms.
  assert.deepEqual([r.best.i, r.best.j], [3, 10]);
  close(r.best.terms.cpu, 60.412);
  close(r.best.terms.h2d, 59.594);
  close(r.best.L, 60.412);
});

test('Eq. 8–12 (compression and GDS, Fig. 8a with Fig. 6a CPU times)', () => {
  const ops = table({ cpu: FIG6A_CPU, h2d: FIG8A_H2DC, dc: FIG8A_DC, s2d: FIG8A_S2D });
  const r = searchSplits(splitEntries(ops), { compressed: true });
  // GPU-only compressed: H2D = Σ H(C) = 21.218 ms, DC = ΣD + H[first] = 71.311 ms → DC-bound.
  close(r.gpuOnly.terms.h2d, 21.218);
  close(r.gpuOnly.terms.dc, 71.311);
  // Best: GPU does Scores…FC.0; DC = 44.105 ms (Eq. 8) binds, CPU 41.773 ms.
  assert.deepEqual([r.best.i, r.best.j], [4, 10]);
  close(r.best.terms.dc, 44.105);
  close(r.best.terms.cpu, 41.773);
  // With NVMe (Eq. 10–12): moving a weight to S2D lowers H2D by its H and adds its S; here S2D
  // (≥ 20.7 ms per weight at 4.96 GB/s) never beats the DC-bound optimum, so the choice stays.
  const n = searchSplits(splitEntries(ops), { compressed: true, nvme: true });
  close(n.best.L, 44.105);
  assert.ok(n.evaluated > r.evaluated, 'NVMe subsets are enumerated');
});

test('Eq. 10–12 (GDS without compression): NVMe takes weights off H2D', () => {
  // Uncompressed transfers (Fig. 6a H2D) with Fig. 8a's S2D column (GDS reads uncompressed weights).
  const entries = splitEntries(table({ cpu: FIG6A_CPU, h2d: FIG6A_H2D, s2d: FIG8A_S2D }));
  // GPU-only with Q, K, V from NVMe: H2D = 81.258 − 3 × 4.214 (Eq. 11), S2D = 3 × 20.7 (Eq. 12).
  const c = evaluateCandidate(entries, 0, 11, [1, 2, 3]);
  close(c.terms.h2d, 68.616);
  close(c.terms.s2d, 62.1);
  close(c.L, 68.616);
  const plain = searchSplits(entries);
  const gds = searchSplits(entries, { nvme: true });
  assert.ok(gds.best.L <= plain.best.L + 1e-9);
  // With the split, NVMe can still shave the H2D side: the optimum moves below 47.546 ms.
  assert.ok(gds.best.L < 47.546, `${gds.best.L}`);
  assert.ok(gds.best.nvme.length > 0);
});

test('--costs planning with Fig. 6a reproduces the split in the plan (paper-exact: every layer streamed)', () => {
  const costs = { unit: 'ms' as const, ops: NAMES.map((name, k) => ({ name, cpu: FIG6A_CPU[k]!, h2d: FIG6A_H2D[k]! })) };
  const plan = planRequest({ model: 'opt-30b', hardware: 'paper000', workload: 'batch=50,prompt=512,gen=32', policy: 'split-points', costs });
  assert.equal(plan.policy, 'split-points');
  assert.equal(plan.costSource, 'costs');
  // Eq. 5's L is the policy's analytic figure (details.analytic); the plan prints the simulator's
  // figure for the same placement (engine/plan/predict.ts), which adds the hand-offs L omits.
  close((plan.details!.analytic as { layerMs: number }).layerMs, 47.546);
  assert.ok(plan.predicted.layerMs >= 47.546 - 1e-6 && plan.predicted.layerMs <= 47.546 * 1.05, `${plan.predicted.layerMs}`);
  const ops = plan.stages.decode.layers[0]!.ops;
  assert.deepEqual(ops.map((o) => o.name), NAMES);
  assert.deepEqual(ops.map((o) => o.device), ['gpu', 'gpu', 'gpu', 'gpu', 'gpu', 'gpu', 'gpu', 'gpu', 'gpu', 'cpu', 'cpu']);
  assert.ok(plan.stages.decode.layers.every((l) => l.ops[9]!.device === 'cpu' && l.weights === 'pinned-host'));
  assert.ok(plan.predicted.stepMs >= 48 * 47.546);
  // The simulator plays the same plan: per layer ≥ L (it adds hand-offs the equations omit) and
  // within 5 % of it, since H2D (47.5) and CPU (47.4) overlap almost perfectly.
  const sim = simulateRequest({ model: 'opt-30b', hardware: 'paper000', workload: 'batch=50,prompt=512,gen=32', policy: 'split-points', costs });
  assert.ok(sim.simulation.layerMs >= 47.546 - 1e-6, `${sim.simulation.layerMs}`);
  assert.ok(sim.simulation.layerMs <= 47.546 * 1.05, `${sim.simulation.layerMs}`);
  // One number per question: plan and simulate print the same figures.
  assert.equal(sim.simulation.layerMs, plan.predicted.layerMs);
  assert.equal(sim.simulation.tokensPerSecond, plan.predicted.tokensPerSecond);
});

test('--costs table errors name the field', () => {
  assert.throws(() => parseCostsJson('{"unit":"s","ops":[]}', 'x.json'), /x.json: field "unit" must be "ms"/);
  assert.throws(() => parseCostsJson('{"unit":"ms","ops":[{"name":"Q","cpu":-1}]}', 'x.json'), /ops\[0\] \(Q\)\.cpu must be a finite number/);
  assert.throws(() => parseCostsJson('{"unit":"ms","ops":[{"name":"Q","gpus":1}]}', 'x.json'), /unknown field "gpus"/);
  assert.throws(() => parseCostsJson('{"unit":"ms",', 'x.json'), /x.json: not valid JSON/);
  assert.throws(() => parseCostsJson('{"unit":"ms","ops":[{"name":"Q"},{"name":"Q"}]}', 'x.json'), /ops\[1\].name "Q" appears twice/);
  assert.throws(() => parseCostsJson(JSON.stringify({ unit: 'ms', ops: Array.from({ length: 300 }, (_, i) => ({ name: `op${i}` })) }), 'x.json'), /limit 256/);
});

test('Eq. 14 through the CLI path: batch=50,batches=2 with the Fig. 7a --costs table plans the paper\'s 2×25 split', () => {
  // Fig. 7a's table holds the times of one batch of 25; batches=2 says the 50 sequences run as 2×25.
  const costs = { unit: 'ms' as const, ops: NAMES.map((name, k) => ({ name, cpu: FIG7A_CPU[k]!, h2d: FIG7A_H2D[k]!, gpu: FIG7A_GPU[k]! })) };
  const plan = planRequest({ model: 'opt-30b', hardware: 'paper000', workload: 'batch=50,batches=2,prompt=512,gen=32', policy: 'split-points', costs });
  assert.equal(plan.details!.batches, 2);
  assert.equal(plan.stages.decode.subBatches?.length, 2);
  assert.deepEqual(plan.stages.decode.subBatches!.map((b) => b.size), [25, 25]);
  close((plan.details!.analytic as { layerMs: number }).layerMs, 60.412);
  // The same workload as one batch is the Fig. 6a problem, not this one: batches is not ignored.
  const one = planRequest({ model: 'opt-30b', hardware: 'paper000', workload: 'batch=50,batches=1,prompt=512,gen=32', policy: 'split-points', costs });
  assert.equal(one.details!.batches, 1);
  assert.notEqual((one.details!.analytic as { layerMs: number }).layerMs, 60.412);
  // Without --costs the cost model plans exactly the batches asked for.
  const modelled = planRequest({ model: 'opt-30b', hardware: 'paper000', workload: 'batch=50,batches=2,prompt=512,gen=32', policy: 'split-points' });
  assert.equal(modelled.details!.batches, 2);
  assert.throws(() => planRequest({ model: 'opt-30b', hardware: 'paper000', workload: 'batch=50,batches=3,prompt=512,gen=32', policy: 'split-points' }), /does not split into 3 equal batches/);
});

test('the paper000 preset reproduces Fig. 6a\'s measured per-op CPU and H2D times (OPT-30B, batch 50) within 5 %', () => {
  // The preset's CPU GEMV and attention rates come from these measurements (engine/hardware/presets.ts
  // PAPER000_*): Q and FC.0 give 33.8 GB/s alone, Scores 9.3 GB/s, with Fig. 10a's 1.9 contention.
  const ctx = makeContext(modelPreset('opt-30b'), hardwarePreset('paper000'), { batch: 50, prompt: 512, gen: 32 });
  const ops = ctx.cost.layerTimes({ batch: 50, newTokens: 1, context: 512 }, 'decode').ops;
  for (const name of ['Q', 'K', 'V', 'Output', 'Scores', 'WV', 'FC.0', 'FC.1']) {
    const k = NAMES.indexOf(name);
    const o = ops.find((x) => x.name === name)!;
    assert.ok(Math.abs(o.cpu! / FIG6A_CPU[k]! - 1) < 0.05, `${name} CPU ${o.cpu!.toFixed(3)} ms vs paper ${FIG6A_CPU[k]} ms`);
    assert.ok(Math.abs(o.h2d! / FIG6A_H2D[k]! - 1) < 0.05, `${name} H2D ${o.h2d!.toFixed(3)} ms vs paper ${FIG6A_H2D[k]} ms`);
  }
});

// Eq. 14 from the paper's own columns for a CPU prefix [0, i), GPU middle [i, j), CPU suffix [j, n)
// over `nb` batches, written out here rather than taken from the search (digest 000 §2.2; the
// ranges are [i..j−1] as in Eq. 7). KV is the K and V cache of the GPU range (Scores, WV).
function eq14(cpu: number[], h2d: number[], gpu: number[], i: number, j: number, nb: number): { cpu: number; h2d: number; L: number } {
  let c = 0, h = 0, g = 0, kv = 0;
  for (let k = 0; k < NAMES.length; k++) {
    if (k < i || k >= j) { c += cpu[k]!; continue; }
    h += h2d[k]!;
    g += gpu[k]!;
    if (NAMES[k] === 'Scores' || NAMES[k] === 'WV') kv += h2d[k]!;
  }
  const H = h + (nb - 1) * g + (nb - 1) * kv;
  const C = nb * c; // every batch's CPU ops run on the one CPU
  return { cpu: C, h2d: H, L: Math.max(C, H) };
}

test('Sec. 3.2 / Fig. 7b (2x25): the simulator pipelines the batches, so layerMs is Eq. 14\'s L plus at most one layer\'s tail', () => {
  const costs = { unit: 'ms' as const, ops: NAMES.map((name, k) => ({ name, cpu: FIG7A_CPU[k]!, h2d: FIG7A_H2D[k]!, gpu: FIG7A_GPU[k]! })) };
  const sim = simulateRequest({ model: 'opt-30b', hardware: 'paper000', workload: 'batch=50,batches=2,prompt=512,gen=32', policy: 'split-points', costs, trace: true });
  const split = sim.plan.details!.split as { i: number; j: number };
  const ref = eq14(FIG7A_CPU, FIG7A_H2D, FIG7A_GPU, split.i, split.j, 2);
  close(ref.h2d, 59.594);
  close(ref.L, 60.412);
  // 48 streamed layers (all of them with --costs): the span is ≥ 48 L, and the pipeline's fill and
  // drain add at most one layer (the first layer's CPU waits for its first transfer once).
  const nLayers = 48;
  const layerMs = sim.simulation.layerMs;
  assert.ok(layerMs >= ref.L - 1e-6, `${layerMs} < L ${ref.L}`);
  assert.ok(layerMs * nLayers <= ref.L * (nLayers + 1), `layerMs ${layerMs}: span ${layerMs * nLayers} > ${nLayers} L + one layer (${ref.L * (nLayers + 1)})`);
  assert.equal(sim.plan.predicted.layerMs, layerMs);
  // Fig. 7b's order in a middle layer: the CPU runs batch 1's prefix while the GPU runs batch 0's
  // middle, and only then the suffixes; batch 1's KV is sent after batch 0's GPU run of that op.
  type Ev = { name: string; ph: string; ts: number; dur: number; tid: number; args: { layer?: number; op?: string; subBatch?: number; stage: string } };
  const evs = (sim.trace!.traceEvents as unknown as Ev[]).filter((e) => e.ph === 'X' && e.args.stage === 'decode' && e.args.layer === 20);
  const cpuOrder = evs.filter((e) => e.tid === 1).sort((a, b) => a.ts - b.ts).map((e) => `${e.args.op}/b${e.args.subBatch}`);
  const prefix = NAMES.slice(0, split.i), suffix = NAMES.slice(split.j);
  assert.deepEqual(cpuOrder, [...prefix.map((o) => `${o}/b0`), ...prefix.map((o) => `${o}/b1`), ...suffix.map((o) => `${o}/b0`), ...suffix.map((o) => `${o}/b1`)]);
  const at = (tid: number, op: string, sb: number) => evs.find((e) => e.tid === tid && e.args.op === op && e.args.subBatch === sb)!;
  const gpuB0 = evs.filter((e) => e.tid === 2 && e.args.subBatch === 0);
  const cpuB1 = prefix.map((o) => at(1, o, 1));
  assert.ok(gpuB0.every((e) => e.ts >= at(1, prefix[prefix.length - 1]!, 0).ts + at(1, prefix[prefix.length - 1]!, 0).dur - 1e-3), 'batch 0 on the GPU after its CPU prefix');
  assert.ok(Math.min(...gpuB0.map((e) => e.ts)) < Math.max(...cpuB1.map((e) => e.ts + e.dur)), 'batch 0\'s GPU middle overlaps batch 1\'s CPU prefix');
  const kvB1 = evs.find((e) => e.tid === 3 && e.name.includes('KV:Scores b1'))!;
  assert.ok(kvB1.ts >= at(2, 'Scores', 0).ts + at(2, 'Scores', 0).dur - 1e-3, 'one batch\'s KV on the GPU at a time');
});

test('Eq. 14 with the cost model (paper000 preset, batch=50,batches=2): headline layerMs within one layer\'s tail of the layers\' Eq. 14 / resident times', () => {
  const sim = simulateRequest({ model: 'opt-30b', hardware: 'paper000', workload: 'batch=50,batches=2,prompt=512,gen=32', policy: 'split-points' });
  const layers = sim.plan.stages.decode.layers;
  const R = sim.plan.details!.residentLayers as number;
  // Eq. 14 from the streamed layer's own op times (per batch of 25), independent of the search.
  const ops = layers[layers.length - 1]!.ops;
  const i = ops.findIndex((o) => o.device !== 'cpu'), j = ops.length - [...ops].reverse().findIndex((o) => o.device !== 'cpu');
  // The preset's GDS NVMe takes weights off H2D (Eq. 10–12), paid once per layer like H2D weights.
  let c = 0, h = 0, g = 0, kv = 0, s2d = 0;
  ops.forEach((o, k) => {
    if (k < i || k >= j) { c += o.predictedMs.cpu ?? 0; return; }
    h += (o.predictedMs.h2d ?? 0); g += o.predictedMs.gpu ?? 0; kv += o.predictedMs.h2dKv ?? 0; s2d += o.predictedMs.s2d ?? 0;
  });
  const L14 = Math.max(2 * c, h + g + kv, s2d);
  close(L14, (sim.plan.details!.split as { L: number }).L, 1e-6);
  const residentMs = R > 0 ? layers[0]!.predictedMs : 0;
  const ideal = (R * residentMs + (48 - R) * L14) / 48;
  assert.ok(sim.simulation.layerMs >= ideal - 1e-6, `${sim.simulation.layerMs} vs ${ideal}`);
  assert.ok(sim.simulation.layerMs <= ideal + L14 / 48, `${sim.simulation.layerMs} vs ${ideal} + one layer ${L14}/48`);
});
