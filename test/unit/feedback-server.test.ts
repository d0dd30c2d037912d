// Measured feedback on the server (issue 21 item 4): a disagreement is logged and sent with both
// figures, and starts one background re-measure of the profile's calibration at most once per
// interval, without the step that found it waiting, and only while the engine is idle.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { hardwarePreset } from '../../engine/hardware/presets';
import { BackgroundRemeasure, type RemeasureResult } from '../../engine/profile/remeasure';
import type { HardwareProfile } from '../../engine/hardware/types';
import { ServerFeedback } from '../../engine/server/feedback';
import type { FeedbackParams } from '../../engine/server/protocol';
import { tempDir } from '../helpers/shared';

const profile: HardwareProfile = { ...hardwarePreset('ryzen9-7950x'), source: { kind: 'measured', citation: 't', fingerprint: '0123456789abcdef', measuredAt: '2026-11-25T10:00:00.000Z' } };

test('the re-measure starts at once without being awaited, runs one at a time, at most once per interval', async () => {
  let clock = 0;
  let runs = 0;
  let finish: (r: RemeasureResult) => void = () => {};
  const r = new BackgroundRemeasure(() => { runs++; return new Promise((resolve) => { finish = resolve; }); }, 60_000, () => clock);
  const done: (RemeasureResult | Error)[] = [];
  assert.equal(r.request(profile, (x) => done.push(x)), 'started');
  assert.equal(runs, 0, 'the run starts after the caller returned');
  await new Promise((res) => setImmediate(res));
  assert.equal(runs, 1);
  assert.equal(r.request(profile, (x) => done.push(x)), 'running');
  finish({ profile, cached: true, note: 'calibration re-measured and cached' });
  await new Promise((res) => setImmediate(res));
  assert.equal(done.length, 1);
  clock = 59_999;
  assert.equal(r.request(profile, (x) => done.push(x)), 'too soon');
  clock = 60_000;
  assert.equal(r.request(profile, (x) => done.push(x)), 'started');
  await new Promise((res) => setImmediate(res));
  assert.equal(runs, 2);
});

test('the re-measure waits for the engine to be idle and gives way to a step that starts while it runs', async () => {
  let clock = 100_000;
  const signals: AbortSignal[] = [];
  const finishers: ((r: RemeasureResult) => void)[] = [];
  const r = new BackgroundRemeasure((p, signal) => {
    signals.push(signal);
    return new Promise((resolve, reject) => {
      finishers.push(resolve);
      signal.addEventListener('abort', () => reject(new Error('aborted')));
    });
  }, 60_000, () => clock, 5_000);
  const done: (RemeasureResult | Error)[] = [];
  r.activity(); // the engine evaluated a step just now
  assert.equal(r.request(profile, (x) => done.push(x)), 'started');
  await new Promise((res) => setImmediate(res));
  assert.equal(signals.length, 0, 'not started while the engine was busy less than idleMs ago');
  assert.equal(r.request(profile, (x) => done.push(x)), 'running', 'a queued re-measure counts as running');
  clock += 5_000;
  r.activity(); // another step: the idle wait starts again
  clock += 4_999;
  // The timer set for the old idle moment finds the engine busy again and waits on.
  (r as unknown as { startQueued(): void }).startQueued();
  assert.equal(signals.length, 0);
  clock += 1;
  (r as unknown as { startQueued(): void }).startQueued();
  assert.equal(signals.length, 1, 'starts once the engine has been idle for idleMs');
  r.activity(); // a completion arrives while it runs: it stops
  assert.equal(signals[0]!.aborted, true);
  assert.equal(r.yields, 1);
  await new Promise((res) => setImmediate(res));
  assert.equal(done.length, 0, 'a run that gave way is not reported as failed');
  clock += 5_000;
  (r as unknown as { startQueued(): void }).startQueued();
  assert.equal(signals.length, 2, 'run again at the next idle moment');
  finishers[1]!({ profile, cached: true, note: 'calibration re-measured and cached' });
  await new Promise((res) => setImmediate(res));
  assert.equal(done.length, 1);
  assert.ok(!(done[0] instanceof Error));
  r.stop();
});

test('a disagreement is logged and sent with the op class and both figures, and the re-measure result follows', async () => {
  const { dir, cleanup } = tempDir('fulcrum-feedback-server-');
  const saved = process.env.XDG_CACHE_HOME;
  process.env.XDG_CACHE_HOME = dir;
  try {
    const sent: FeedbackParams[] = [];
    const log: string[] = [];
    let started = 0;
    const remeasure = new BackgroundRemeasure(async (p) => { started++; return { profile: p, cached: true, note: 'calibration re-measured and cached (GEMV scale 1 → 0.8, GEMM scale 1 → 0.9)' }; }, 60_000, () => 0);
    const fb = new ServerFeedback({ onFeedback: (p) => sent.push(p), onLog: (m) => log.push(m) }, remeasure, () => profile);
    const opts = fb.options()!;
    assert.ok(opts.correction && opts.persist && opts.onDisagreement);
    for (let i = 0; i < 12; i++) opts.correction.fold([{ key: 'cpu matmul Q8_0 @1', measuredMs: 3, predictedMs: 2 }]);
    opts.onDisagreement!([{ key: 'cpu matmul Q8_0 @1', ratio: 1.5, measuredMs: 3, predictedMs: 2, steps: 16 }]);
    assert.equal(sent.length, 1);
    assert.equal(sent[0]!.remeasure, 'started');
    assert.match(sent[0]!.message, /cpu matmul Q8_0 @1: measured 3\.00 ms vs predicted 2\.00 ms per step \(\+50 %, median of the last 16 steps\)/);
    assert.match(log[0]!, /^measured feedback: measured steps disagree with the profile by more than 25 %/);
    await new Promise((res) => setImmediate(res));
    await new Promise((res) => setImmediate(res));
    assert.equal(started, 1);
    assert.equal(sent[1]?.remeasure, 'done');
    assert.match(sent[1]!.message, /GEMV scale 1 → 0\.8/);
    assert.equal(opts.correction.factor('cpu matmul Q8_0 @1'), 1, 'the CPU matmul correction starts over against the re-measured profile');
    // A device class has no calibration run to repeat: reported, not re-measured.
    opts.onDisagreement!([{ key: 'device matmul Q8_0 @1', ratio: 0.5, measuredMs: 1, predictedMs: 2, steps: 16 }]);
    assert.equal(sent[2]!.remeasure, 'not possible');
    assert.match(sent[2]!.message, /fulcrum profile/);
    // The correction is saved beside the (temporary) profile cache.
    opts.persist!(opts.correction);
    const again = fb.options()!;
    assert.equal(again.correction!.steps, 12);
  } finally {
    if (saved === undefined) delete process.env.XDG_CACHE_HOME; else process.env.XDG_CACHE_HOME = saved;
    cleanup();
  }
});
