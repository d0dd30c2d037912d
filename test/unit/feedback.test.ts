// Measured feedback (issue 21 item 4): the running correction's math, the 25 % window decision,
// the cost model applying it, the plan's cost source, persistence next to the profile cache.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';

import {
  checkCorrection, correctionKey, describeDisagreement, MeasuredCorrection, rowBucket, type FeedbackSample,
} from '../../engine/cost/feedback';
import { feedbackPath, readFeedback, writeFeedback } from '../../engine/cost/feedback-store';
import { ProfileCostModel } from '../../engine/cost/model';
import { layerWork } from '../../engine/cost/ops';
import { hardwarePreset } from '../../engine/hardware/presets';
import type { HardwareProfile } from '../../engine/hardware/types';
import { modelPreset } from '../../engine/model/model-presets';
import { explainRequest, planRequest } from '../../engine/plan/api';
import { tempDir } from '../helpers/shared';

const KEY = 'cpu matmul Q8_0 @1 <32MiB';
const one = (ratio: number, key = KEY, predictedMs = 2): FeedbackSample[] => [{ key, measuredMs: predictedMs * ratio, predictedMs }];

test('the factor is the exponentially weighted ratio in log space, applied from minSteps on', () => {
  const c = new MeasuredCorrection({ alpha: 0.5, minSteps: 3, window: 4 });
  c.fold(one(2));
  assert.equal(c.factor(KEY), 1, 'one step is not enough to apply');
  assert.equal(c.stepsOf(KEY), 1);
  c.fold(one(8));
  // log f = log 2 + 0.5 (log 8 − log 2) = log 4
  c.fold(one(4));
  // log f = log 4 + 0.5 (log 4 − log 4)
  assert.ok(Math.abs(c.factor(KEY) - 4) < 1e-9, `factor ${c.factor(KEY)}`);
  assert.deepEqual(c.snapshot(), { steps: 3, factors: { [KEY]: 4 } });
  // Samples of one key in one step are one ratio (sums), not several.
  const d = new MeasuredCorrection({ minSteps: 1 });
  d.fold([{ key: KEY, measuredMs: 1, predictedMs: 1 }, { key: KEY, measuredMs: 5, predictedMs: 1 }]);
  assert.ok(Math.abs(d.factor(KEY) - 3) < 1e-9);
  assert.equal(d.steps, 1);
});

test('a key below minSteps stays out of the snapshot; a stalled step is clamped to 10×', () => {
  const c = new MeasuredCorrection({ alpha: 1, minSteps: 2 });
  c.fold([...one(1.5), ...one(2, 'cpu attention @1')]);
  c.fold(one(1000));
  assert.deepEqual(Object.keys(c.snapshot().factors), [KEY]);
  assert.ok(Math.abs(c.factor(KEY) - 10) < 1e-9, `factor ${c.factor(KEY)}`);
  // Samples without a prediction (a lane the profile cannot time) are not folded.
  const d = new MeasuredCorrection();
  assert.deepEqual(d.fold([{ key: KEY, measuredMs: 1, predictedMs: Infinity }, { key: KEY, measuredMs: 1, predictedMs: 0 }]), []);
  assert.equal(d.steps, 0);
});

test('one noisy step in the window does not report; a whole window 40 % off does, once', () => {
  const c = new MeasuredCorrection({ window: 8, tolerance: 0.25 });
  for (let i = 0; i < 7; i++) assert.deepEqual(c.fold(one(1.02)), []);
  assert.deepEqual(c.fold(one(5)), [], 'a single 5× step among agreeing ones is noise');
  for (let i = 0; i < 3; i++) assert.deepEqual(c.fold(one(1.4)), [], 'still a minority of the window');
  const found = c.fold(one(1.4)).concat(...Array.from({ length: 4 }, () => c.fold(one(1.4))));
  assert.equal(found.length, 1, 'reported once, when the median crossed');
  const d = found[0]!;
  assert.equal(d.key, KEY);
  assert.ok(d.ratio > 1.25 && d.ratio <= 1.4 + 1e-9, `ratio ${d.ratio}`);
  assert.ok(Math.abs(d.predictedMs - 2) < 1e-9 && Math.abs(d.measuredMs - 2.8) < 1e-9, `${d.measuredMs} vs ${d.predictedMs}`);
  assert.match(describeDisagreement(d), /^cpu matmul Q8_0 @1 <32MiB: measured 2\.80 ms vs predicted 2\.00 ms per step \(\+40 %, median of the last 8 steps\)$/);
  // Back within 25 %: cleared; off again: reported again.
  for (let i = 0; i < 8; i++) c.fold(one(1.1));
  const again = Array.from({ length: 8 }, () => c.fold(one(0.5))).flat();
  assert.equal(again.length, 1);
  assert.ok(again[0]!.ratio < 0.75);
});

test('a window that is not full yet never reports, however far off', () => {
  const c = new MeasuredCorrection({ window: 16 });
  for (let i = 0; i < 15; i++) assert.deepEqual(c.fold(one(3)), []);
  assert.equal(c.fold(one(3)).length, 1);
});

test('keys: lane, class (matmul format, attention, other, copy) and the row bucket', () => {
  const w = layerWork(modelPreset('llama-2-7b:Q4_K'), { batch: 1, newTokens: 1, context: 100 });
  const by = (n: string) => w.find((x) => x.name === n)!;
  // A 4096² Q4_K matrix is 9 MiB: within a desktop's last-level cache bucket; the FFN's 24 MiB too.
  assert.equal(correctionKey('cpu', by('Q'), 1), 'cpu matmul Q4_K @1 <32MiB');
  // The three attention ops are one fused kernel: one size bucket for all three.
  assert.equal(correctionKey('device', by('Scores'), 30), 'device attention @9-64 <32MiB');
  assert.equal(correctionKey('cpu', by('Softmax'), 5), 'cpu attention @2-8 <32MiB');
  assert.equal(correctionKey('cpu', by('attn_norm'), 512), 'cpu other @65+ <1MiB');
  const big = layerWork(modelPreset('llama-2-7b'), { batch: 1, newTokens: 1, context: 1000 });
  assert.equal(correctionKey('cpu', big.find((x) => x.name === 'Gate')!, 1), 'cpu matmul F16 @1 ≥32MiB');
  assert.deepEqual(new Set(big.filter((x) => ['Scores', 'Softmax', 'WV'].includes(x.name)).map((x) => correctionKey('cpu', x, 1))), new Set(['cpu attention @1 <32MiB']));
  assert.equal(correctionKey('h2d', 'copy', 1), 'h2d copy @1');
  assert.equal(correctionKey('d2h', 'copy', 64), 'd2h copy @9-64');
  assert.deepEqual([1, 2, 8, 9, 64, 65].map(rowBucket), ['1', '2-8', '2-8', '9-64', '9-64', '65+']);
});

test('the cost model multiplies the times of a corrected class only, and says so', () => {
  const model = modelPreset('llama-2-7b');
  const hw = hardwarePreset('rtx4090+ryzen9-7950x');
  const step = { batch: 1, newTokens: 1, context: 512 };
  const plain = new ProfileCostModel(model, hw);
  const q = plain.layerWork(step).find((x) => x.name === 'Q')!;
  const norm = plain.layerWork(step).find((x) => x.name === 'attn_norm')!;
  const fixed = new ProfileCostModel(model, hw, undefined, { steps: 40, factors: { [correctionKey('cpu', q, 1)]: 1.5, 'h2d copy': 2, 'device attention @1': 3 } });
  assert.ok(Math.abs(fixed.opMs(q, 'cpu') - 1.5 * plain.opMs(q, 'cpu')) < 1e-12);
  // Beside a device the CPU is its own lane: the CPU-alone factor does not apply, its own does.
  assert.equal(fixed.opMs(q, 'cpu', true), plain.opMs(q, 'cpu', true));
  const beside = new ProfileCostModel(model, hw, undefined, { steps: 40, factors: { [correctionKey('cpu beside device', q, 1)]: 1.25 } });
  assert.ok(Math.abs(beside.opMs(q, 'cpu', true) - 1.25 * plain.opMs(q, 'cpu', true)) < 1e-12);
  assert.equal(beside.opMs(q, 'cpu'), plain.opMs(q, 'cpu'));
  assert.ok(Math.abs(beside.layerTimes(step, 'decode').ops.find((o) => o.name === 'Q')!.cpu! - 1.25 * plain.layerTimes(step, 'decode').ops.find((o) => o.name === 'Q')!.cpu!) < 1e-12);
  assert.equal(fixed.opMs(norm, 'cpu'), plain.opMs(norm, 'cpu'));
  assert.equal(fixed.opMs(q, 'gpu'), plain.opMs(q, 'gpu'));
  // A correction saved before copies had row buckets: its one rate still applies.
  assert.ok(Math.abs(fixed.transferMs(1e8, 'h2d') - 2 * plain.transferMs(1e8, 'h2d')) < 1e-12);
  assert.equal(fixed.transferMs(1e8, 'd2h'), plain.transferMs(1e8, 'd2h'));
  // Prefill rows fall in another bucket: the decode factor does not apply to them.
  const qPrefill = plain.layerWork({ batch: 1, newTokens: 512, context: 0 }).find((x) => x.name === 'Q')!;
  assert.equal(fixed.opMs(qPrefill, 'cpu'), plain.opMs(qPrefill, 'cpu'));
  // A bucket without a factor takes its neighbour's (2 rows of decode stream weights like 1), not one two away.
  const q2 = plain.layerWork({ batch: 2, newTokens: 1, context: 512 }).find((x) => x.name === 'Q')!;
  assert.ok(Math.abs(fixed.opMs(q2, 'cpu') - 1.5 * plain.opMs(q2, 'cpu')) < 1e-12);
  const q16 = plain.layerWork({ batch: 16, newTokens: 1, context: 512 }).find((x) => x.name === 'Q')!;
  assert.equal(fixed.opMs(q16, 'cpu'), plain.opMs(q16, 'cpu'));
  assert.equal(plain.source, 'model');
  assert.equal(fixed.source, 'profile + measured correction (40 steps)');
});

test('a plan made with a correction reports it as its cost source and predicts with it', () => {
  const params = { model: 'llama-2-7b:Q4_K', hardware: 'ryzen9-7950x', workload: 'batch=1,prompt=512,gen=64', policy: 'cpu-only' };
  const before = planRequest(params);
  assert.equal(before.costSource, 'model');
  const after = planRequest({ ...params, correction: { steps: 24, factors: { 'cpu matmul Q4_K @1 <32MiB': 2 } } });
  assert.equal(after.costSource, 'profile + measured correction (24 steps)');
  assert.ok(after.predicted.stepMs > 1.6 * before.predicted.stepMs, `${after.predicted.stepMs} vs ${before.predicted.stepMs}`);
  // Prefill's matmuls are another row bucket; only its one-row LM head is corrected.
  assert.ok(after.predicted.prefillMs < 1.01 * before.predicted.prefillMs, `${after.predicted.prefillMs} vs ${before.predicted.prefillMs}`);
  assert.throws(() => planRequest({ ...params, correction: { steps: 1, factors: { x: 0 } } as never }), /correction\.factors\["x"\] must be a number in \[0\.1, 10\], got 0/);
  assert.throws(() => checkCorrection({ steps: -1, factors: {} }, 'c'), /c\.steps must be an integer ≥ 0, got -1/);
});

test('what-ifs are planned with the same correction as the plan they change', () => {
  const params = { model: 'llama-2-7b:Q4_K', hardware: 'ryzen9-7950x', workload: 'batch=1,prompt=512,gen=64', policy: 'cpu-only' };
  const speedups = (p: ReturnType<typeof explainRequest>) => new Map(p.explanation.whatIf!.map((w) => [w.change, w.speedup]));
  const plain = speedups(explainRequest(params));
  const corrected = speedups(explainRequest({ ...params, correction: { steps: 30, factors: { 'cpu matmul Q4_K @1 <32MiB': 2 } } }));
  // Uncorrected what-ifs next to a corrected plan would all look about twice as fast.
  const batch = [...corrected.keys()].find((k) => k.startsWith('batch'))!;
  assert.ok(batch && plain.has(batch));
  assert.ok(corrected.get(batch)! < 1.2, `batch ×2 what-if: ${corrected.get(batch)} (without the correction ${plain.get(batch)})`);
  for (const [change, s] of corrected) assert.ok(s < 1.2, `${change}: ${s}`);
});

test('a profile whose probes disagreed is named in the plan\'s cost source', () => {
  const hw: HardwareProfile = { ...hardwarePreset('ryzen9-7950x') };
  hw.source = { ...hw.source, unsettled: 'calibration runs disagreed beyond their noise' };
  const plan = planRequest({ model: 'llama-2-7b:Q4_K', hardware: hw, workload: 'batch=1,prompt=512,gen=64', policy: 'cpu-only' });
  assert.equal(plan.costSource, 'model (the profile\'s probes disagreed: calibration runs disagreed beyond their noise)');
  const k = { model: 'm', format: 'Q8_0', threads: 2, promptTokens: 64, genTokens: 16, prefillTokensPerS: 100, decodeTokensPerS: 10, runs: 4, gemvScale: 1, gemmScale: 1, agreed: false };
  const byCalibration: HardwareProfile = { ...hardwarePreset('ryzen9-7950x') };
  byCalibration.cpu = { ...byCalibration.cpu, calibration: k };
  assert.match(new ProfileCostModel(modelPreset('llama-2-7b'), byCalibration, undefined, { steps: 9, factors: { a: 2 } }).source, /^profile \+ measured correction \(9 steps\) \(the profile's probes disagreed: its calibration runs disagreed \(4 runs\)\)$/);
});

test('--hardware this applies the correction saved beside the cached profile; --no-feedback plans from the profile alone', async (t) => {
  const { currentFingerprint } = await import('../../engine/hardware/machine');
  const { writeCachedProfile } = await import('../../engine/hardware/cache');
  const { parsePlanArgs } = await import('../../engine/cli/plan-format');
  let fp: string;
  try { fp = currentFingerprint().fingerprint; } catch (e) { t.skip(`no machine fingerprint (native addon not built?): ${(e as Error).message}`); return; }
  const saved = process.env.XDG_CACHE_HOME;
  const { dir, cleanup } = tempDir('fulcrum-feedback-this-');
  process.env.XDG_CACHE_HOME = dir;
  try {
    const p: HardwareProfile = { ...hardwarePreset('ryzen9-7950x'), name: 'this machine', source: { kind: 'measured', citation: 'test', fingerprint: fp, measuredAt: '2026-11-25T10:00:00.000Z' } };
    writeCachedProfile(p);
    const argv = ['--model', 'llama-2-7b:Q4_K', '--hardware', 'this', '--workload', 'batch=1,prompt=512,gen=64', '--policy', 'cpu-only'];
    const before = planRequest(parsePlanArgs(argv).params);
    assert.equal(before.costSource, 'model', 'no correction saved yet');
    const c = new MeasuredCorrection({ minSteps: 2 });
    // Applied from the reader's minimum of 8 steps on.
    for (let i = 0; i < 8; i++) c.fold([{ key: 'cpu matmul Q4_K @1 <32MiB', measuredMs: 2, predictedMs: 1 }]);
    writeFeedback(p, c);
    const after = planRequest(parsePlanArgs(argv).params);
    assert.equal(after.costSource, 'profile + measured correction (8 steps)');
    assert.ok(after.predicted.stepMs > 1.6 * before.predicted.stepMs);
    const without = planRequest(parsePlanArgs([...argv, '--no-feedback']).params);
    assert.equal(without.costSource, 'model');
    assert.equal(without.predicted.stepMs, before.predicted.stepMs);
  } finally {
    if (saved === undefined) delete process.env.XDG_CACHE_HOME; else process.env.XDG_CACHE_HOME = saved;
    cleanup();
  }
});

test('the correction persists beside the profile cache and belongs to one measurement of it', () => {
  const { dir, cleanup } = tempDir('fulcrum-feedback-');
  try {
    const profile: HardwareProfile = { ...hardwarePreset('ryzen9-7950x'), source: { kind: 'measured', citation: 't', fingerprint: '0123456789abcdef', measuredAt: '2026-11-25T10:00:00.000Z' } };
    assert.equal(feedbackPath(hardwarePreset('ryzen9-7950x'), dir), undefined, 'a preset has no file');
    assert.deepEqual(readFeedback(profile, {}, dir), { status: 'miss' });
    const c = new MeasuredCorrection({ minSteps: 2 });
    for (let i = 0; i < 3; i++) c.fold(one(1.5));
    const file = writeFeedback(profile, c, dir)!;
    assert.match(file, /0123456789abcdef\.feedback\.json$/);
    const back = readFeedback(profile, { minSteps: 2 }, dir);
    assert.equal(back.status, 'hit');
    if (back.status === 'hit') assert.deepEqual(back.correction.snapshot(), c.snapshot());
    const remeasured = { ...profile, source: { ...profile.source, measuredAt: '2026-11-25T11:00:00.000Z' } };
    const stale = readFeedback(remeasured, {}, dir);
    assert.equal(stale.status, 'stale');
    if (stale.status === 'stale') assert.match(stale.reason, /corrects the profile measured at "2026-11-25T10:00:00\.000Z"/);
    writeFileSync(file, JSON.stringify({ version: 1, fingerprint: '0123456789abcdef', profileMeasuredAt: profile.source.measuredAt, steps: 3, entries: { [KEY]: { factor: 50, steps: 3 } } }));
    const bad = readFeedback(profile, {}, dir);
    assert.equal(bad.status, 'stale');
    if (bad.status === 'stale') assert.match(bad.reason, /entries\["cpu matmul Q8_0 @1 <32MiB"\]\.factor must be a number in \[0\.1, 10\], got 50/);
  } finally {
    cleanup();
  }
});

test('a class with fewer steps than the window says "not enough steps", never "agrees"; a full window judges', () => {
  const c = new MeasuredCorrection({ window: 8, minSteps: 4 });
  const key = 'cpu matmul Q8_0 @65+ ≥32MiB';
  for (let i = 0; i < 5; i++) c.fold([{ key, measuredMs: 1.0, predictedMs: 1.0 }]);
  assert.deepEqual(c.verdict(key), { state: 'not enough steps', steps: 5, needed: 8 });
  assert.equal(c.describe()[0]!.verdict.state, 'not enough steps');
  for (let i = 0; i < 3; i++) c.fold([{ key, measuredMs: 1.0, predictedMs: 1.0 }]);
  assert.equal(c.verdict(key).state, 'agrees');
  for (let i = 0; i < 8; i++) c.fold([{ key, measuredMs: 1.5, predictedMs: 1.0 }]);
  assert.deepEqual(c.verdict(key), { state: 'disagrees', steps: 16, needed: 8, ratio: 1.5 });
  assert.equal(c.verdict('device attention @1 <1MiB').state, 'not enough steps');
});

test('weight copies are corrected per row bucket: prompt steps\' slow copies do not slow a decode plan\'s H2D (split-points after feedback)', async () => {
  const { StepFeedback } = await import('../../engine/runtime/feedback');
  const { measuredTrace } = await import('../../engine/runtime/trace');
  const model = modelPreset('llama-2-7b');
  const hw = hardwarePreset('rtx4090+ryzen9-7950x');
  const plain = new ProfileCostModel(model, hw);
  const gate = (rows: number) => plain.layerWork({ batch: 1, newTokens: rows, context: 512 }).find((x) => x.name === 'Gate')!;
  const copyMs = plain.transferMs(gate(1).weightBytes, 'h2d');
  // One layer whose Gate weights stream to the device: the copy, then the matmul.
  const op = (kind: string, lane: 'h2d' | 'device') => ({ stage: 'decode', kind, lane, layer: 0, planOp: 'Gate', loc: lane === 'h2d' ? 'host' : 'device', deps: [-1, -1, -1, -1], weight: 'blk.0.ffn_gate.weight' });
  const ops = [op('copy_weight', 'h2d'), op('matmul', 'device')] as never;
  // As measured on the loopback link: a prompt step's copy 3.8 × the profile's time, a decode step's 1.4 ×.
  const steps: { rows: number; ratio: number }[] = [...Array.from({ length: 12 }, () => ({ rows: 1, ratio: 1.4 })), ...Array.from({ length: 12 }, () => ({ rows: 64, ratio: 3.8 }))];
  const raw: number[] = [];
  let t = 0;
  steps.forEach((s, i) => {
    const copy = copyMs * s.ratio * 1e6;
    raw.push(i, 0, t, t + copy, i, 1, t + copy, t + copy + 1e5);
    t += copy + 2e5;
  });
  const trace = measuredTrace(ops, Float64Array.from(raw));
  const fb = new StepFeedback(model, hw, { correction: new MeasuredCorrection() });
  // Decode steps first, the prompt steps last (bench:plans folds its untimed prompts last).
  steps.forEach((s, i) => fb.correction.fold(fb.samples(trace, i, [{ rows: s.rows, context: 512 }], 1)));
  const fixed = new ProfileCostModel(model, hw, undefined, fb.correction.snapshot());
  const h2d = (m: ProfileCostModel, rows: number) => m.layerTimes({ batch: 1, newTokens: rows, context: 512 }, rows === 1 ? 'decode' : 'prefill').ops.find((o) => o.name === 'Gate')!.h2d!;
  const decodeRatio = h2d(fixed, 1) / h2d(plain, 1);
  const promptRatio = h2d(fixed, 64) / h2d(plain, 64);
  assert.ok(Math.abs(decodeRatio - 1.4) < 0.05, `a decode step's copy corrected by ${decodeRatio}, its steps measured 1.4`);
  assert.ok(Math.abs(promptRatio - 3.8) < 0.1, `a prompt step's copy corrected by ${promptRatio}, its steps measured 3.8`);
  // A transfer named without its step (a KV swap) is corrected at the decode rate.
  assert.ok(Math.abs(fixed.transferMs(1e8, 'h2d') / plain.transferMs(1e8, 'h2d') - 1.4) < 0.05);
});
