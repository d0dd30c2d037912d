// A profile whose repeated probes disagree is measured again and, when they still disagree, is
// reported and not cached (issue 26 item 9). The figures are the issue's: two quick profiles
// minutes apart fitted prefill at 1261 and 397 tok/s.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { agreement, calibrationDisagreement, runUntilAgreed, type RunFigures } from '../../engine/profile/calibration-run';
import type { CpuCalibration } from '../../engine/hardware/types';

test('two fastest runs agree within 10 %, whatever the slow ones did', () => {
  assert.deepEqual(agreement([772, 760, 390]).agreed, true);
  assert.equal(agreement([1261, 397]).agreed, false);
  assert.ok(Math.abs(agreement([1261, 397]).ratio - 1261 / 397) < 1e-9);
  assert.equal(agreement([1261]).agreed, false, 'one run cannot agree with itself');
});

test('runs until the probes agree, at least the minimum, at most the maximum', async () => {
  // A busy machine: the first runs are slowed by outside work, then the host quiets down.
  const measured: RunFigures[] = [
    { prefill: 1261, decode: 105, smallDecode: 220 },
    { prefill: 397, decode: 41, smallDecode: 90 },
    { prefill: 610, decode: 80, smallDecode: 180 },
    { prefill: 1240, decode: 103, smallDecode: 218 },
    { prefill: 1250, decode: 104, smallDecode: 221 },
  ];
  let i = 0;
  const r = await runUntilAgreed(async () => measured[i++]!, 2, 8);
  assert.equal(r.agreed, true);
  assert.equal(r.runs.length, 4, 'stops at the first run that agrees with the fastest');
  i = 0;
  const capped = await runUntilAgreed(async () => measured[i++]!, 2, 3);
  assert.equal(capped.agreed, false, 'still disagreeing after the maximum');
  assert.equal(capped.runs.length, 3);
  // A quiet machine stops at the minimum.
  const quiet = await runUntilAgreed(async () => ({ prefill: 772, decode: 112, smallDecode: 221 }), 2, 5);
  assert.deepEqual([quiet.agreed, quiet.runs.length], [true, 2]);
});

test('a calibration that never agreed says so with the spread; one that agreed says nothing', () => {
  const base: CpuCalibration = { gemvScale: 1, gemmScale: 1, model: 'm', format: 'Q8_0', threads: 2, promptTokens: 256, genTokens: 32, prefillTokensPerS: 1261, decodeTokensPerS: 105, runs: 3 };
  assert.equal(calibrationDisagreement({ ...base, agreed: true }), undefined);
  assert.equal(calibrationDisagreement(base), undefined, 'older profiles without the field are not flagged');
  const why = calibrationDisagreement({ ...base, agreed: false, prefillRunsTokensPerS: [1261, 397, 610], decodeRunsTokensPerS: [105, 41, 80] });
  assert.match(why ?? '', /disagreed beyond their noise after 3 runs \(prefill 397–1261 tok\/s, decode 41–105 tok\/s/);
});
