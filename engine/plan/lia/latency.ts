// LIA (paper 002) §7 "latency model": per-layer prefill and decode times (Eq. 2, or with Opt-2
// overlap) times the number of layers, with Opt-1's resident layers running all-GPU without
// transfers. This is what the paper uses for its ★ points (12 % mean error against measurement).

import { type LiaLayerShape, sublayerSizes } from './sublayers';
import { type LayerTime, type LiaPolicyMask, type LiaSystem, layerTime, searchPolicies } from './cost';
import { type Residency, residentLayers } from './residency';

export interface LiaRun {
  batch: number;
  promptTokens: number;
  genTokens: number;
}

export interface LiaOptions {
  /** Opt-1 (whole-layer residency). Default on. */
  residency?: boolean;
  /** Opt-2 (overlap transfers with compute). Default on. */
  overlap?: boolean;
  /** VRAM for Opt-1, bytes (0 → no residency). */
  vramBytes: number;
  /** Force a policy instead of searching (ablation "FlexGen policy", baselines). */
  prefillPolicy?: LiaPolicyMask;
  decodePolicy?: LiaPolicyMask;
}

export interface LiaPrediction {
  prefill: { policy: LiaPolicyMask; alternatives: LayerTime[]; streamedLayerMs: number; residentLayerMs: number; totalMs: number };
  decode: { policy: LiaPolicyMask; alternatives: LayerTime[]; streamedLayerMs: number; residentLayerMs: number; stepMs: number; totalMs: number; context: number };
  residency: Residency;
  totalMs: number;
  /** Generated tokens per second: B · L_out / total (digest 002 §6: the presumed definition). */
  tokensPerSecond: number;
}

/** A resident layer: all six sublayers on the GPU, weights and KV already there. */
export function residentLayerMs(shape: LiaLayerShape, sys: LiaSystem, stage: 'prefill' | 'decode', batch: number, length: number): number {
  let ms = 0;
  for (const s of sublayerSizes(shape, stage, batch, length)) ms += ((s.dx + s.dy) / (sys.gpuGBps * 1e9) + s.flops / (sys.gpuTflops * 1e12)) * 1e3;
  return ms;
}

/**
 * Decision (paper: "which decode L to optimise at" is open): the decode policy is chosen once at
 * the mid-generation context L_in + (L_out − 1)/2, as the paper runs one fixed decode policy for
 * all steps (§7.1: "the offloading policy of LIA does not change during the decoding stage").
 * Every decode term is linear in L, so the mid-context step time × L_out is the exact sum.
 */
export function predictLia(shape: LiaLayerShape, nLayers: number, sys: LiaSystem, run: LiaRun, opt: LiaOptions): LiaPrediction {
  const { batch, promptTokens, genTokens } = run;
  if (!(genTokens >= 1) || !(promptTokens >= 1)) throw new Error(`LIA: prompt and generated tokens must be ≥ 1 (got ${promptTokens}, ${genTokens})`);
  const midContext = promptTokens + (genTokens - 1) / 2;
  const preAlts = searchPolicies(shape, sys, 'prefill', batch, promptTokens);
  const decAlts = searchPolicies(shape, sys, 'decode', batch, midContext);
  const prePolicy = opt.prefillPolicy ?? preAlts[0]!.policy;
  const decPolicy = opt.decodePolicy ?? decAlts[0]!.policy;
  const overlap = opt.overlap !== false;
  const pick = (t: LayerTime): number => (overlap ? t.overlappedMs : t.serialMs);
  const preStreamed = pick(layerTime(shape, sys, 'prefill', batch, promptTokens, prePolicy));
  const decStreamed = pick(layerTime(shape, sys, 'decode', batch, midContext, decPolicy));
  const residency = opt.residency === false || opt.vramBytes <= 0
    ? { residentLayers: 0, perLayerBytes: 0, streamingBytes: 0, prefillMiniBatches: 1, binding: 'vram-capacity' as const }
    : residentLayers({ shape, nLayers, vramBytes: opt.vramBytes, batch, maxContext: promptTokens + genTokens, promptTokens, prefillPolicy: prePolicy, decodePolicy: decPolicy });
  const k = residency.residentLayers;
  const preResident = residentLayerMs(shape, sys, 'prefill', batch, promptTokens);
  const decResident = residentLayerMs(shape, sys, 'decode', batch, midContext);
  const prefillTotal = k * preResident + (nLayers - k) * preStreamed;
  const step = k * decResident + (nLayers - k) * decStreamed;
  const decodeTotal = step * genTokens;
  const total = prefillTotal + decodeTotal;
  return {
    prefill: { policy: prePolicy, alternatives: preAlts, streamedLayerMs: preStreamed, residentLayerMs: preResident, totalMs: prefillTotal },
    decode: { policy: decPolicy, alternatives: decAlts, streamedLayerMs: decStreamed, residentLayerMs: decResident, stepMs: step, totalMs: decodeTotal, context: midContext },
    residency,
    totalMs: total,
    tokensPerSecond: (batch * genTokens) / (total / 1e3),
  };
}
