// The profiler's end-to-end calibration run (issue 14 item 4): the native executor
// (engine/runtime/bench.ts, the one generation uses) prefills and decodes a synthetic model on the
// CPU, and engine/profile/calibrate.ts fits the profile's GEMV/GEMM scales to it.
//
// Decision — the calibration models (a second, small-matrix one below fits the per-op cost): a llama-shaped synthetic model of 8 layers, d 1536, 12/4
// heads, FFN 4096, vocabulary 32000, Q8_0 (≈ 270 MB): larger than any CPU's last-level cache of
// today's desktops and servers (so decode streams from DRAM, as real models do), small enough to
// write once (cached) and run in seconds, and a different shape from the 0.5B / 1.3B models the
// calibration benchmark predicts, so that benchmark checks a prediction, not the fit itself.

import { existsSync, mkdirSync, renameSync } from 'node:fs';
import path from 'node:path';
import { fitCalibration } from './calibrate';
import { readGguf } from '../model/gguf';
import { GgmlType } from '../model/ggml-types';
import { shapeFromGguf } from '../model/shape';
import { writeSyntheticModel, type SyntheticModelSpec } from '../model/synthetic';
import { benchModel } from '../runtime/bench';
import { profileCacheDir } from '../hardware/cache';
import type { CpuCalibration, HardwareProfile } from '../hardware/types';

export interface CalibrationConfig {
  promptTokens: number;
  genTokens: number;
  /** Runs at least this many times… */
  runs: number;
  /** …and at most this many, until the two fastest runs agree (default runs + 3). */
  maxRuns?: number;
  threads: number;
}

export const CALIBRATION_SPEC: SyntheticModelSpec = {
  architecture: 'llama', name: 'fulcrum-calibration', nLayers: 8, nEmbd: 1536, nHeads: 12, nKvHeads: 4, nFf: 4096,
  nVocab: 32000, contextLength: 4096, weightType: GgmlType.Q8_0, seed: 14,
};

/**
 * The second, small-matrix calibration model: 24 layers of d 512 (≈ 60 MB in Q8_0), so its decode
 * step is dominated by per-op costs rather than by bytes; with the main model it separates the
 * per-op cost (thread hand-off, barriers) from the streaming rate.
 */
export const SMALL_CALIBRATION_SPEC: SyntheticModelSpec = {
  architecture: 'llama', name: 'fulcrum-calibration-small', nLayers: 24, nEmbd: 512, nHeads: 8, nKvHeads: 4, nFf: 1536,
  nVocab: 32000, contextLength: 4096, weightType: GgmlType.Q8_0, seed: 15,
};

/** A calibration model file, written once into the cache directory. */
export function calibrationModelFile(spec: SyntheticModelSpec = CALIBRATION_SPEC): string {
  const dir = path.join(path.dirname(profileCacheDir()), 'calibration');
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `calibration-${spec.nLayers}L-${spec.nEmbd}-Q8_0.gguf`);
  if (!existsSync(file)) {
    const tmp = `${file}.${process.pid}.partial`;
    writeSyntheticModel(tmp, spec);
    renameSync(tmp, file);
  }
  return file;
}

/**
 * Decision: the fastest of the runs. On a shared machine, outside load only ever slows a run down;
 * the fastest run is the closest to this machine's own speed, which is what plans should predict
 * (the kernel microbenchmarks likewise keep the best thread count).
 */
function fastest(xs: number[]): number { return Math.max(...xs); }

/**
 * Two runs agree when they are within this fraction of each other. Measured on this project's
 * 2-vCPU VMs: back-to-back calibration runs on a quiet host differ by 1–6 %; runs beside other
 * work (a build, a second profile) by 20 % to 3× (a quick profile once fitted prefill at 1261
 * and, minutes later, 397 tok/s).
 */
export const AGREEMENT_TOLERANCE = 0.1;

/** Whether the two fastest of `xs` agree within `tolerance`, and their ratio (≥ 1). */
export function agreement(xs: readonly number[], tolerance = AGREEMENT_TOLERANCE): { agreed: boolean; ratio: number } {
  if (xs.length < 2) return { agreed: false, ratio: Infinity };
  const [a, b] = [...xs].sort((x, y) => y - x) as [number, number];
  const ratio = b > 0 ? a / b : Infinity;
  return { agreed: ratio <= 1 + tolerance, ratio };
}

export interface RunFigures { prefill: number; decode: number; smallDecode: number }

/**
 * Runs `once` at least `minRuns` times and until the fastest two runs agree on every figure, at
 * most `maxRuns` times: a probe that disagrees with itself is measured again, not trusted.
 */
export async function runUntilAgreed(once: () => Promise<RunFigures>, minRuns: number, maxRuns: number): Promise<{ runs: RunFigures[]; agreed: boolean }> {
  const runs: RunFigures[] = [];
  const settled = () => (['prefill', 'decode', 'smallDecode'] as const).every((k) => agreement(runs.map((r) => r[k])).agreed);
  while (runs.length < maxRuns) {
    runs.push(await once());
    if (runs.length >= minRuns && settled()) return { runs, agreed: true };
  }
  return { runs, agreed: settled() };
}

/** Runs the executor on the calibration model and fits the profile's calibration. */
export async function calibrateCpu(profile: HardwareProfile, c: CalibrationConfig, signal?: AbortSignal): Promise<CpuCalibration> {
  const file = calibrationModelFile();
  const shape = shapeFromGguf(readGguf(file));
  const smallFile = calibrationModelFile(SMALL_CALIBRATION_SPEC);
  // The two models alternate within a run, so both see the same load on a shared machine.
  const { runs, agreed } = await runUntilAgreed(async () => {
    // A cancelled profile stops here, between steps, rather than after every run.
    const r = await benchModel(file, { promptTokens: c.promptTokens, genTokens: c.genTokens, threads: c.threads, ...(signal ? { signal } : {}) });
    const s = await benchModel(smallFile, { promptTokens: c.promptTokens, genTokens: c.genTokens, threads: c.threads, ...(signal ? { signal } : {}) });
    return { prefill: r.prompt_tokens_per_s, decode: r.gen_tokens_per_s, smallDecode: s.gen_tokens_per_s };
  }, c.runs, c.maxRuns ?? c.runs + 3);
  const pre = runs.map((r) => r.prefill), dec = runs.map((r) => r.decode);
  const small = { shape: shapeFromGguf(readGguf(smallFile)), decodeTokensPerS: fastest(runs.map((r) => r.smallDecode)) };
  const fit = fitCalibration(shape, profile, {
    model: `synthetic ${CALIBRATION_SPEC.nLayers} layers, d ${CALIBRATION_SPEC.nEmbd}, ${CALIBRATION_SPEC.nHeads}/${CALIBRATION_SPEC.nKvHeads} heads, FFN ${CALIBRATION_SPEC.nFf}`,
    format: 'Q8_0', threads: c.threads, promptTokens: c.promptTokens, genTokens: c.genTokens,
    prefillTokensPerS: fastest(pre), decodeTokensPerS: fastest(dec), runs: runs.length,
  }, small);
  const round = (xs: number[]) => xs.map((x) => Math.round(x * 10) / 10);
  return { ...fit, prefillRunsTokensPerS: round(pre), decodeRunsTokensPerS: round(dec), agreed };
}

/** Why a calibration cannot be trusted (its runs never agreed), or undefined. */
export function calibrationDisagreement(k: CpuCalibration): string | undefined {
  if (k.agreed !== false) return undefined;
  const span = (xs: number[] | undefined) => (xs?.length ? `${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)}` : '?');
  return `calibration runs disagreed beyond their noise after ${k.runs} runs (prefill ${span(k.prefillRunsTokensPerS)} tok/s, decode ${span(k.decodeRunsTokensPerS)} tok/s; the two fastest must be within ${AGREEMENT_TOLERANCE * 100} %): something else was using the CPU`;
}
