// CPU calibration (issue 14 item 4): fitting the GEMV/GEMM scales to an end-to-end measurement
// recovers the scales that produced it, and the cost model applies them to every format.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fitCalibration } from '../../engine/profile/calibrate';
import { cpuKernelRate } from '../../engine/cost/device';
import { hardwarePreset } from '../../engine/hardware/presets';
import { validateProfile } from '../../engine/hardware/validate';
import { modelPreset } from '../../engine/model/model-presets';
import { planRequest } from '../../engine/plan/api';

test('fitCalibration recovers the scales behind a measurement (decode → GEMV, prefill → GEMM)', () => {
  const base = hardwarePreset('ryzen9-7950x');
  const shape = modelPreset('deepseek-coder-1.3b:Q8_0');
  const truth = structuredClone(base);
  const m0 = { model: 'test', format: 'Q8_0', threads: 16, promptTokens: 256, genTokens: 32, runs: 1, prefillTokensPerS: 1, decodeTokensPerS: 1 };
  truth.cpu.calibration = { ...m0, gemvScale: 0.62, gemmScale: 1.4 };
  const p = planRequest({ model: shape, hardware: truth, workload: 'batch=1,prompt=256,gen=32', policy: 'cpu-only' });
  const fit = fitCalibration(shape, base, { ...m0, decodeTokensPerS: 1000 / p.predicted.stepMs, prefillTokensPerS: (256 * 1000) / p.predicted.prefillMs });
  assert.ok(Math.abs(fit.gemvScale / 0.62 - 1) < 0.01, `gemvScale ${fit.gemvScale}`);
  assert.ok(Math.abs(fit.gemmScale / 1.4 - 1) < 0.01, `gemmScale ${fit.gemmScale}`);
  assert.throws(() => fitCalibration(shape, base, { ...m0, decodeTokensPerS: 0 }), /measured rates must be > 0/);
});

test('with a small-matrix model, fitCalibration separates per-op cost from the GEMV scale', () => {
  const base = hardwarePreset('ryzen9-7950x');
  const big = modelPreset('deepseek-coder-1.3b:Q8_0');
  const small = { ...modelPreset('deepseek-coder-1.3b:Q8_0'), nEmbd: 512, nHeads: 8, nKvHeads: 4, headDim: 64, nFf: 1536, name: 'small' };
  const truth = structuredClone(base);
  const m0 = { model: 'test', format: 'Q8_0', threads: 16, promptTokens: 256, genTokens: 32, runs: 1, prefillTokensPerS: 1, decodeTokensPerS: 1 };
  truth.cpu.calibration = { ...m0, gemvScale: 0.8, gemmScale: 1.2, opOverheadUs: 25 };
  const at = (shape: typeof big) => planRequest({ model: shape, hardware: truth, workload: 'batch=1,prompt=256,gen=32', policy: 'cpu-only' }).predicted;
  const pb = at(big), ps = at(small);
  const fit = fitCalibration(big, base, { ...m0, decodeTokensPerS: 1000 / pb.stepMs, prefillTokensPerS: (256 * 1000) / pb.prefillMs }, { shape: small, decodeTokensPerS: 1000 / ps.stepMs });
  assert.ok(Math.abs(fit.gemvScale / 0.8 - 1) < 0.02, `gemvScale ${fit.gemvScale}`);
  assert.ok(Math.abs(fit.opOverheadUs! / 25 - 1) < 0.02, `opOverheadUs ${fit.opOverheadUs}`);
  assert.ok(Math.abs(fit.gemmScale / 1.2 - 1) < 0.02, `gemmScale ${fit.gemmScale}`);
});

test('the calibration scales every format\'s measured rate; profiles carry and validate it', () => {
  const hw = hardwarePreset('ryzen9-7950x');
  const before = ['Q8_0', 'Q4_K', 'F16'].map((f) => [cpuKernelRate(hw.cpu, 'gemv', f), cpuKernelRate(hw.cpu, 'gemm', f)]);
  hw.cpu.calibration = { model: 'x', format: 'Q8_0', threads: 16, promptTokens: 256, genTokens: 32, runs: 1, prefillTokensPerS: 1, decodeTokensPerS: 1, gemvScale: 0.5, gemmScale: 2 };
  ['Q8_0', 'Q4_K', 'F16'].forEach((f, i) => {
    assert.equal(cpuKernelRate(hw.cpu, 'gemv', f), before[i]![0]! * 0.5);
    assert.equal(cpuKernelRate(hw.cpu, 'gemm', f), before[i]![1]! * 2);
  });
  validateProfile(JSON.parse(JSON.stringify(hw)));
  const bad = JSON.parse(JSON.stringify(hw));
  bad.cpu.calibration.gemvScale = -1;
  assert.throws(() => validateProfile(bad), /cpu\.calibration\.gemvScale must be a number/);
});
