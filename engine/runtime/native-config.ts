// The native model's configuration from a GGUF's hyperparameters, the default thread count and the
// prefill batch: what loading a model natively needs, apart from the engine that runs it (the
// executor benchmark and the profiler's calibration use these without loading an Engine).
import type { GgufFile } from '../model/gguf';
import type { ModelHparams } from '../model/hparams';
import { nativeKernels, type NativeModelConfig } from '../native/model';

export class EngineError extends Error {}

/** Most tokens per native forward step (sizes the native scratch buffers). */
export const PREFILL_BATCH = 512;

/** Native configuration from the file's hyperparameters; rejects what the executor lacks. */
export function nativeConfig(file: GgufFile, hp: ModelHparams, contextLength: number, threads: number): NativeModelConfig {
  if (hp.hasRopeFreqs) throw new EngineError(`${file.path}: tensor 'rope_freqs.weight' (per-dimension RoPE frequency factors) is not supported yet`);
  if (hp.hasOutputBias) throw new EngineError(`${file.path}: attention output bias ('attn_output.bias') is not supported yet`);
  if (hp.ropeScalingType === 'yarn' || hp.ropeScalingType === 'longrope') {
    throw new EngineError(`${file.path}: RoPE scaling '${hp.ropeScalingType}' is not supported yet (none and linear are)`);
  }
  return {
    arch: hp.architecture,
    nLayers: hp.nLayers,
    nEmbd: hp.nEmbd,
    nHeads: hp.nHeads,
    nKvHeads: hp.nKvHeads,
    headDim: hp.headDim,
    nFf: hp.nFf,
    nVocab: hp.nVocab,
    contextLength,
    batchSize: Math.min(PREFILL_BATCH, contextLength),
    threads,
    normEps: hp.normEps,
    ropeFreqBase: hp.ropeFreqBase,
    ropeFreqScale: hp.ropeScalingType === 'linear' ? 1 / hp.ropeScalingFactor : 1,
    ropeStyle: hp.ropeStyle,
    nRot: hp.ropeDims,
    ...(hp.nExpert > 0 ? { nExpert: hp.nExpert, nExpertUsed: hp.nExpertUsed } : {}),
    ...(hp.attnScale > 0 ? { attnScale: hp.attnScale } : {}),
    ...(hp.attnSoftcap > 0 ? { attnSoftcap: hp.attnSoftcap } : {}),
    ...(hp.finalSoftcap > 0 ? { finalSoftcap: hp.finalSoftcap } : {}),
    ...(hp.slidingWindow > 0 ? { slidingWindow: hp.slidingWindow, swaLayers: hp.swaLayers, ropeFreqBaseSwa: hp.ropeFreqBaseSwa } : {}),
  };
}

/** Threads a model runs on by default: one per physical core. */
export function defaultThreads(): number {
  return Math.max(1, nativeKernels().physicalCores());
}
