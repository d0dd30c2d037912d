// The per-layer costs NEO (paper 003) and APEX (paper 004) schedule with: GPU linear time by
// token count (T_l), GPU attention (T_ga: prefill attention per prompt, decode attention by the
// KV tokens read), CPU decode attention by KV tokens read (T_ca), plus what the online simulator
// needs around them (LM head, PCIe, KV bytes). One `OnlineCosts` is the "truth" the simulator
// plays; the schedulers see only `OnlinePredictors` profiled from it on a grid (§3.2).

import type { HardwareProfile } from '../../hardware/types';
import { type ModelShape, ffnGated, formatBytesPerElement, kvBytesPerToken, layerWeightBytes, modelWeightBytes, weightBytes } from '../../model/shape';
import { LinearPredictor, geometricGrid } from './interp';

/** Costs of one decoder layer (ms) and the model-level numbers around them. */
export interface OnlineCosts {
  /** Name of what the costs describe, e.g. 'T4 + Llama-2-7B (roofline)'. */
  name: string;
  nLayers: number;
  /** Linear ops (QKV, O, FFN) of one layer over `tokens` rows on the GPU. */
  linearMs(tokens: number): number;
  /** GPU prefill attention of one layer for one prompt of `promptTokens`. */
  gpuPrefillAttnMs(promptTokens: number): number;
  /** GPU decode attention of one layer reading `kvTokens` cached tokens in total (whole sub-batch). */
  gpuDecodeAttnMs(kvTokens: number): number;
  /** CPU decode attention of one layer reading `kvTokens` cached tokens in total. */
  cpuAttnMs(kvTokens: number): number;
  /** Embedding + final norm + LM head for `tokens` rows (T_prl + T_pol), whole step. */
  headMs(tokens: number): number;
  /** KV bytes per token per layer (K and V). */
  kvBytesPerTokenLayer: number;
  /** Activation bytes per token crossing PCIe per layer for a CPU-attention request (Q,K,V out; O back). */
  qkvoBytesPerToken: number;
  /** Effective host↔device bandwidth (GB/s) for KV swaps and TrQKV/TrO. */
  pcieGBps: number;
  /** KV-cache capacity in tokens on the GPU (after weights, activations, reserve) and on the host. */
  gpuKvTokens: number;
  cpuKvTokens: number;
  /** Most tokens one iteration may carry (activation memory), prefill included. */
  maxBatchTokens: number;
}

/** The schedulers' view: interpolated profiles of the same functions (NEO §3.2). */
export interface OnlinePredictors {
  linear: LinearPredictor;
  gpuPrefillAttn: LinearPredictor;
  gpuDecodeAttn: LinearPredictor;
  cpuAttn: LinearPredictor;
  /** T_prl + T_pol: embedding, final norm, LM head for the step's sequences. */
  head: LinearPredictor;
}

/**
 * "Grid profiling" (NEO artifact): sample the costs on geometric grids and interpolate.
 * Decisions (digest 003 §6, grid axes unspecified): T_l by tokens in the sub-batch (prefill
 * tokens + one per decode); T_ga split into prefill attention by prompt length (summed per
 * prompt) and decode attention by total KV tokens; T_ca by total KV tokens; 2 points per octave.
 */
export function profilePredictors(c: OnlineCosts, perOctave = 2): OnlinePredictors {
  const maxKv = Math.max(c.gpuKvTokens, c.cpuKvTokens, 1024);
  const tok = geometricGrid(1, Math.max(c.maxBatchTokens, 2), perOctave);
  const kv = geometricGrid(16, maxKv, perOctave);
  const prompt = geometricGrid(1, Math.max(c.maxBatchTokens, 2), perOctave);
  return {
    linear: new LinearPredictor('T_l', tok.map((x) => ({ x, ms: c.linearMs(x) }))),
    gpuPrefillAttn: new LinearPredictor('T_ga(prefill)', prompt.map((x) => ({ x, ms: c.gpuPrefillAttnMs(x) }))),
    gpuDecodeAttn: new LinearPredictor('T_ga(decode)', [{ x: 0, ms: 0 }, ...kv.map((x) => ({ x, ms: c.gpuDecodeAttnMs(x) }))]),
    cpuAttn: new LinearPredictor('T_ca', [{ x: 0, ms: 0 }, ...kv.map((x) => ({ x, ms: c.cpuAttnMs(x) }))]),
    head: new LinearPredictor('T_prl+T_pol', tok.map((x) => ({ x, ms: c.headMs(x) }))),
  };
}

export interface RooflineOptions {
  /** Host memory for the CPU KV cache, bytes (default: 60 % of available host memory). */
  cpuKvBytes?: number;
  /** Most tokens per iteration (default 2048; SwiftLLM-style activation budget). */
  maxBatchTokens?: number;
  /** VRAM the run may use, bytes (default: GPU memory − reserved). */
  vramBytes?: number;
  /** CPU decode-attention bandwidth, GB/s (default: profile's attention rate or 0.5·readGBps). */
  cpuAttnGBps?: number;
  /** GPU count for tensor parallelism (NEO 2×H100 TP=2): aggregates flops, bandwidth and memory. */
  tensorParallel?: number;
}

/**
 * Roofline costs of a llama-family model on a profile (used by paper tests and as the default
 * when no measured table exists): each kernel takes max(bytes/bandwidth, flops/throughput) plus
 * one launch overhead. Decision: a layer's linear ops are 4 kernels (QKV, O, gate+up, down);
 * attention is one kernel per layer per sub-batch (NEO §3.1: the GPU attention kernel runs once).
 * Tensor parallelism divides work over GPUs with perfect scaling (communication not modelled).
 */
export function rooflineOnlineCosts(model: ModelShape, hw: HardwareProfile, opt: RooflineOptions = {}): OnlineCosts {
  const gpu = hw.gpu;
  if (!gpu) throw new Error(`online costs: hardware '${hw.name}' has no GPU; NEO/APEX need one`);
  if (!hw.link) throw new Error(`online costs: hardware '${hw.name}' has no host↔device link`);
  const tp = opt.tensorParallel ?? 1;
  const flops = gpu.fp16Tflops * 1e12 * gpu.efficiency.gemm * tp;
  const gemvBw = gpu.memoryGBps * 1e9 * gpu.efficiency.gemv * tp;
  const attnBw = gpu.memoryGBps * 1e9 * gpu.efficiency.attention * tp;
  const launch = gpu.launchOverheadUs / 1e3;
  const layerW = layerWeightBytes(model);
  const d = model.nEmbd;
  const qDim = model.nHeads * model.headDim;
  const kvDim = model.nKvHeads * model.headDim;
  const linearFlopsPerToken = 2 * (d * (qDim + 2 * kvDim) + qDim * d + (ffnGated(model.family) ? 3 : 2) * d * model.nFf * (model.moe?.nExpertUsed ?? 1));
  const kvElem = formatBytesPerElement(model.kvFormat);
  const kvPerTokLayer = 2 * kvDim * kvElem;
  const cpuAttnRate = opt.cpuAttnGBps ?? cpuAttentionGBps(hw);
  const headW = weightBytes(model, 'output');
  const ms = (s: number): number => s * 1e3;
  const vram = (opt.vramBytes ?? gpu.memoryBytes - gpu.reservedBytes) * tp;
  const maxTokens = opt.maxBatchTokens ?? 2048;
  // Activations: a few d- and ffn-wide rows per token in flight (decision: 2·(4d + 2·ffn) bytes/token, F16).
  const actBytes = maxTokens * 2 * (4 * d + 2 * model.nFf) + model.nVocab * 4 * Math.min(maxTokens, 256);
  const gpuKvBytes = vram - modelWeightBytes(model) - actBytes;
  const kvTok = kvBytesPerToken(model);
  const cpuKvBytes = opt.cpuKvBytes ?? 0.6 * hw.memory.availableBytes;
  return {
    name: `${hw.name} + ${model.name} (roofline${tp > 1 ? `, TP=${tp}` : ''})`,
    nLayers: model.nLayers,
    linearMs: (tokens) => 4 * launch + ms(Math.max(layerW / gemvBw, (linearFlopsPerToken * tokens) / flops)),
    // Causal prefill attention: 2·L²·qDim FLOPs for scores and as much for values, halved by causality.
    gpuPrefillAttnMs: (L) => launch + ms(Math.max((L * kvPerTokLayer) / attnBw, (2 * L * L * qDim) / flops)),
    gpuDecodeAttnMs: (kv) => (kv <= 0 ? 0 : launch + ms((kv * kvPerTokLayer) / attnBw)),
    cpuAttnMs: (kv) => (kv <= 0 ? 0 : ms((kv * kvPerTokLayer) / (cpuAttnRate * 1e9))),
    headMs: (tokens) => 2 * launch + ms(Math.max(headW / gemvBw, (2 * d * model.nVocab * tokens) / flops)),
    kvBytesPerTokenLayer: kvPerTokLayer,
    qkvoBytesPerToken: 2 * (qDim + 2 * kvDim + qDim),
    pcieGBps: hw.link.h2dPinnedGBps,
    gpuKvTokens: Math.max(0, Math.floor(gpuKvBytes / kvTok)),
    cpuKvTokens: Math.max(0, Math.floor(cpuKvBytes / kvTok)),
    maxBatchTokens: maxTokens,
  };
}

/** CPU decode-attention bandwidth: the best measured attention rate, else half the read bandwidth. */
export function cpuAttentionGBps(hw: HardwareProfile): number {
  let best = 0;
  for (const a of hw.cpu.attention) best = Math.max(best, a.gbps);
  return best > 0 ? best : 0.5 * hw.cpu.memory.readGBps;
}
