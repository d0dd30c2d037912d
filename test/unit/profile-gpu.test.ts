// GPU peaks the profiler derives from CUDA device attributes (used to turn measured rates into
// efficiencies), checked against public specifications.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { fp16FlopsPerClockPerSm, specPeaks } from '../../engine/hardware/gpu-profile';
import type { CudaDevice } from '../../engine/hardware/bench-native';

const dev = (d: Partial<CudaDevice>): CudaDevice => ({
  index: 0, name: 'GPU', totalBytes: 16 * 2 ** 30, computeCapability: '8.6', multiprocessors: 0, clockKHz: 0, memoryClockKHz: 0, memoryBusBits: 0, ...d,
});

test('RTX A4000 attributes give its published 448 GB/s and ~77 dense FP16 TFLOP/s', () => {
  const p = specPeaks(dev({ computeCapability: '8.6', multiprocessors: 48, clockKHz: 1_560_000, memoryClockKHz: 7_001_000, memoryBusBits: 256 }));
  assert.ok(Math.abs(p.memoryGBps! - 448) < 1, `${p.memoryGBps}`);
  assert.ok(Math.abs(p.fp16Tflops! - 76.7) < 1, `${p.fp16Tflops}`);
});

test('H100 SXM attributes give ~3.35 TB/s and ~1 PFLOP/s dense FP16', () => {
  const p = specPeaks(dev({ computeCapability: '9.0', multiprocessors: 132, clockKHz: 1_980_000, memoryClockKHz: 2_619_000, memoryBusBits: 5120 }));
  assert.ok(Math.abs(p.memoryGBps! - 3352) < 5, `${p.memoryGBps}`);
  assert.ok(p.fp16Tflops! > 950 && p.fp16Tflops! < 1100, `${p.fp16Tflops}`);
});

test('unknown architectures or missing attributes give no peak rather than a guess', () => {
  assert.equal(fp16FlopsPerClockPerSm('5.2'), undefined);
  assert.equal(fp16FlopsPerClockPerSm('x'), undefined);
  assert.deepEqual(specPeaks(dev({ computeCapability: '9.0' })), { fp16Tflops: undefined, memoryGBps: undefined });
});
