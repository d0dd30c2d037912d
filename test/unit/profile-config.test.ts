// The profiler's measurement grid and its statistics: thread sweep, buffer sizes, GEMM shapes,
// medians and spreads.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { gemmRows, profileConfig, ringBytesFor, threadSweep } from '../../engine/hardware/profile-config';
import { rateOf, sig, summarize } from '../../engine/hardware/stats';

const MiB = 2 ** 20;
const GiB = 2 ** 30;

test('thread sweep covers 1..cores on small machines and powers of two plus cores/2 and cores on large ones', () => {
  assert.deepEqual(threadSweep(1), [1]);
  assert.deepEqual(threadSweep(2), [1, 2]);
  assert.deepEqual(threadSweep(8), [1, 2, 3, 4, 5, 6, 7, 8]);
  assert.deepEqual(threadSweep(24), [1, 2, 4, 8, 12, 16, 24]);
  assert.deepEqual(threadSweep(0), [1]);
});

test('ring buffer is 2× LLC within [256 MiB, 512 MiB] and never more than 1/8 of free memory', () => {
  assert.equal(ringBytesFor({ physicalCores: 2, llcBytes: 32 * MiB, availableBytes: 16 * GiB }), 256 * MiB);
  assert.equal(ringBytesFor({ physicalCores: 2, llcBytes: 200 * MiB, availableBytes: 16 * GiB }), 400 * MiB);
  assert.equal(ringBytesFor({ physicalCores: 2, llcBytes: 480 * MiB, availableBytes: 16 * GiB }), 512 * MiB);
  assert.equal(ringBytesFor({ physicalCores: 2, availableBytes: 1 * GiB }), 128 * MiB);
});

test('GEMM rows give about the requested FLOPs per run, in multiples of 64 within [256, 16384]', () => {
  const rows = gemmRows(2048, 128, 1e9);
  assert.equal(rows % 64, 0);
  assert.ok(Math.abs(2 * rows * 2048 * 128 - 1e9) / 1e9 < 0.05);
  assert.equal(gemmRows(2048, 512, 1e6), 256);
  assert.equal(gemmRows(64, 1, 1e12), 16384);
});

test('quick grid is a subset of the full grid; contention leaves a core to the memcpy stand-in', () => {
  const m = { physicalCores: 4, llcBytes: 64 * MiB, availableBytes: 8 * GiB };
  const full = profileConfig(m, false);
  const quick = profileConfig(m, true);
  assert.deepEqual(full.gemv.threads, [1, 2, 3, 4]);
  assert.deepEqual(quick.gemv.threads, [4]);
  assert.ok(quick.gemm.tokens.every((t) => full.gemm.tokens.includes(t)));
  assert.ok(quick.attention.kvLengths.every((k) => full.attention.kvLengths.includes(k)));
  assert.deepEqual(full.gemv.formats, ['F32', 'F16', 'Q8_0', 'Q4_0', 'Q4_K']);
  assert.equal(full.contention.disturb, 'host-memcpy');
  assert.equal(full.contention.threads, 3);
  // The quick calibration stops at 2 runs when they agree, and re-measures up to 5 when they do not.
  assert.deepEqual([quick.calibration?.runs, quick.calibration?.maxRuns], [2, 5]);
});

test('summary: median of odd and even counts, min/max, and rates invert the spread', () => {
  assert.deepEqual(summarize([5, 1, 3]), { medianNs: 3, minNs: 1, maxNs: 5, runs: 3 });
  assert.equal(summarize([4, 1, 3, 2]).medianNs, 2.5);
  const r = rateOf(summarize([1e6, 2e6, 4e6]), 1e6, 1e9);  // 1 MB per run
  assert.equal(r.median, 0.5);  // GB/s at 2 ms
  assert.equal(r.max, 1);       // fastest run
  assert.equal(r.min, 0.25);    // slowest run
  assert.equal(sig(1234.5678, 3), 1230);
});

test('summary rejects empty, zero, negative and non-finite timings', () => {
  assert.throws(() => summarize([]), /no timed runs/);
  assert.throws(() => summarize([1, 0]), /invalid timing: 0/);
  assert.throws(() => summarize([Number.NaN]), /invalid timing/);
  assert.throws(() => summarize([-5]), /invalid timing/);
});
