// Fits a profile's CPU calibration (CpuCalibration) to an end-to-end measurement: the GEMV scale
// at which the planner's cpu-only prediction of the calibration model's decode step equals the
// measured one, then the GEMM scale for its prefill. The prediction is the one `fulcrum plan
// --hardware this --policy cpu-only` prints (engine/plan/predict.ts), so what is fitted is what
// users see.

import type { CpuCalibration, HardwareProfile } from '../hardware/types';
import type { ModelShape } from '../model/shape';
import { makeContext } from '../plan/context';
import { policy as cpuOnly } from '../plan/cpu-only';
import { withSimulatedPrediction } from '../plan/predict';

export interface CalibrationMeasurement {
  model: string;
  format: string;
  threads: number;
  promptTokens: number;
  genTokens: number;
  prefillTokensPerS: number;
  decodeTokensPerS: number;
  runs: number;
}

function predict(shape: ModelShape, profile: HardwareProfile, m: CalibrationMeasurement, gemvScale: number, gemmScale: number): { prefillMs: number; stepMs: number } {
  // The executor measured runs on the CPU alone: no GPU in the profile, so no contention factor.
  const cpuOnlyProfile: HardwareProfile = { ...profile, cpu: { ...profile.cpu, calibration: { ...placeholder(m), gemvScale, gemmScale } } };
  delete cpuOnlyProfile.gpu;
  delete cpuOnlyProfile.link;
  const ctx = makeContext(shape, cpuOnlyProfile, { batch: 1, prompt: m.promptTokens, gen: m.genTokens });
  const { plan } = withSimulatedPrediction(cpuOnly.plan(ctx), ctx, cpuOnly);
  return { prefillMs: plan.predicted.prefillMs, stepMs: plan.predicted.stepMs };
}

function placeholder(m: CalibrationMeasurement): CpuCalibration {
  return { gemvScale: 1, gemmScale: 1, ...m };
}

/** The scale s in [lo, hi] where f(s) = target, f decreasing in s (bisection in log space). */
function solveScale(f: (s: number) => number, target: number, lo = 1e-2, hi = 1e2): number {
  if (f(lo) <= target) return lo;
  if (f(hi) >= target) return hi;
  for (let i = 0; i < 60; i++) {
    const mid = Math.sqrt(lo * hi);
    if (f(mid) > target) lo = mid; else hi = mid;
  }
  return Math.sqrt(lo * hi);
}

export function fitCalibration(shape: ModelShape, profile: HardwareProfile, m: CalibrationMeasurement): CpuCalibration {
  if (!(m.decodeTokensPerS > 0) || !(m.prefillTokensPerS > 0)) throw new Error(`calibration: measured rates must be > 0 (decode ${m.decodeTokensPerS}, prefill ${m.prefillTokensPerS} tok/s)`);
  const stepMs = 1000 / m.decodeTokensPerS;
  const prefillMs = (m.promptTokens * 1000) / m.prefillTokensPerS;
  const gemvScale = solveScale((s) => predict(shape, profile, m, s, 1).stepMs, stepMs);
  const gemmScale = solveScale((s) => predict(shape, profile, m, gemvScale, s).prefillMs, prefillMs);
  const round = (x: number): number => Number(x.toPrecision(4));
  return { ...m, gemvScale: round(gemvScale), gemmScale: round(gemmScale) };
}
