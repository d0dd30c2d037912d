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

/** A second, small-matrix model's measured decode: separates per-op cost from bandwidth. */
export interface SmallModelMeasurement { shape: ModelShape; decodeTokensPerS: number }

function predict(shape: ModelShape, profile: HardwareProfile, m: CalibrationMeasurement, k: { gemvScale: number; gemmScale: number; opOverheadUs?: number }): { prefillMs: number; stepMs: number } {
  // The executor measured runs on the CPU alone: no GPU in the profile, so no contention factor.
  const calibration: CpuCalibration = { ...m, gemvScale: k.gemvScale, gemmScale: k.gemmScale, ...(k.opOverheadUs !== undefined ? { opOverheadUs: k.opOverheadUs } : {}) };
  const cpuOnlyProfile: HardwareProfile = { ...profile, cpu: { ...profile.cpu, calibration } };
  delete cpuOnlyProfile.gpu;
  delete cpuOnlyProfile.link;
  const ctx = makeContext(shape, cpuOnlyProfile, { batch: 1, prompt: m.promptTokens, gen: m.genTokens });
  const { plan } = withSimulatedPrediction(cpuOnly.plan(ctx), ctx, cpuOnly);
  return { prefillMs: plan.predicted.prefillMs, stepMs: plan.predicted.stepMs };
}

/** The x in [lo, hi] where f(x) = target for f monotone (decreasing when `decreasing`), by bisection in log space. */
function solve(f: (x: number) => number, target: number, lo: number, hi: number, decreasing: boolean): number {
  const above = (x: number): boolean => (f(x) > target) === decreasing;
  if (!above(lo)) return lo;
  if (above(hi)) return hi;
  for (let i = 0; i < 50; i++) {
    const mid = Math.sqrt(lo * hi);
    if (above(mid)) lo = mid; else hi = mid;
  }
  return Math.sqrt(lo * hi);
}

/**
 * Fits the calibration. With only the main model: the GEMV scale that reproduces its decode step
 * (per-op cost left at the default), then the GEMM scale for its prefill. With a small-matrix
 * model too: GEMV scale (fitted on the main, bandwidth-heavy model) and per-op cost (fitted on
 * the small, op-heavy one) alternately until both reproduce their decode steps, then GEMM.
 */
export function fitCalibration(shape: ModelShape, profile: HardwareProfile, m: CalibrationMeasurement, small?: SmallModelMeasurement): CpuCalibration {
  if (!(m.decodeTokensPerS > 0) || !(m.prefillTokensPerS > 0)) throw new Error(`calibration: measured rates must be > 0 (decode ${m.decodeTokensPerS}, prefill ${m.prefillTokensPerS} tok/s)`);
  if (small && !(small.decodeTokensPerS > 0)) throw new Error(`calibration: the small model's measured decode must be > 0, got ${small.decodeTokensPerS}`);
  const stepMs = 1000 / m.decodeTokensPerS;
  const prefillMs = (m.promptTokens * 1000) / m.prefillTokensPerS;
  let opOverheadUs: number | undefined;
  let gemvScale = solve((s) => predict(shape, profile, m, { gemvScale: s, gemmScale: 1 }).stepMs, stepMs, 1e-2, 1e2, true);
  if (small) {
    const smallStepMs = 1000 / small.decodeTokensPerS;
    for (let i = 0; i < 12; i++) {
      const s = gemvScale;
      opOverheadUs = solve((us) => predict(small.shape, profile, m, { gemvScale: s, gemmScale: 1, opOverheadUs: us }).stepMs, smallStepMs, 0.1, 1e4, false);
      const us = opOverheadUs;
      gemvScale = solve((x) => predict(shape, profile, m, { gemvScale: x, gemmScale: 1, opOverheadUs: us }).stepMs, stepMs, 1e-2, 1e2, true);
    }
  }
  const g = gemvScale;
  const o = opOverheadUs;
  const gemmScale = solve((s) => predict(shape, profile, m, { gemvScale: g, gemmScale: s, ...(o !== undefined ? { opOverheadUs: o } : {}) }).prefillMs, prefillMs, 1e-2, 1e2, true);
  const round = (x: number): number => Number(x.toPrecision(4));
  return {
    ...m, gemvScale: round(gemvScale), gemmScale: round(gemmScale),
    ...(opOverheadUs !== undefined && small ? { opOverheadUs: round(opOverheadUs), smallModelDecodeTokensPerS: small.decodeTokensPerS } : {}),
  };
}
