// LIA (paper 002) §5.2 Optimization-1: keep *whole decoder layers* in spare VRAM (not FlexGen's
// per-sublayer slices of every layer). A resident layer runs all six sublayers on the GPU with no
// PCIe traffic for its weights or KV.

import { type LiaLayerShape, layerKvBytesLia, layerWeightBytesLia } from './sublayers';
import { type LiaPolicyMask, policyBit } from './cost';

export interface ResidencyInput {
  shape: LiaLayerShape;
  nLayers: number;
  /** VRAM the plan may use (device memory minus what the driver/runtime keeps), bytes. */
  vramBytes: number;
  batch: number;
  /** Longest context the run reaches (L_in + L_out). */
  maxContext: number;
  /** Prompt tokens per sequence (L_in): the prefill's activation rows are batch × this. */
  promptTokens: number;
  /** Policies the streamed (non-resident) layers run with. */
  prefillPolicy: LiaPolicyMask;
  decodePolicy: LiaPolicyMask;
  /**
   * Resident layers keep their KV in host memory and attend on the CPU (the GPU's attention
   * cannot read the KV cache's format, engine/plan/kv-format.ts): a resident layer is its weights.
   */
  kvOnHost?: boolean;
}

export interface Residency {
  residentLayers: number;
  /** Bytes one resident layer takes: weights + its KV for the whole run. */
  perLayerBytes: number;
  /** VRAM kept for streaming the other layers (double buffers + activations). */
  streamingBytes: number;
  /** Prefill mini-batches so that activations fit the streaming buffer (1 = whole batch). */
  prefillMiniBatches: number;
  binding: 'vram-capacity' | 'all-layers-fit';
}

/**
 * How many whole layers stay on the GPU.
 * Decisions (paper silent, digest 002 §6 "how many layers to keep GPU-resident"):
 * - A resident layer also keeps its KV for the whole run (B × (L_in+L_out)) on the GPU, so the
 *   count falls as B grows — the behaviour §7.4 reports ("unused GPU memory decreases with larger
 *   B, resulting in fewer Decoder layers being stored").
 * - Streamed layers need, for Opt-2's prefetch, two layers' worth of the weights their GPU
 *   sublayers read (double buffer), two layers' worth of KV when attention runs on the GPU, and
 *   the largest activation of a prefill step (B·L_in·max(d, d_ffn) elements, in and out).
 */
export function residentLayers(inp: ResidencyInput): Residency {
  const { shape, nLayers, batch, maxContext } = inp;
  const weights = layerWeightBytesLia(shape);
  const kv = layerKvBytesLia(shape, batch, maxContext);
  const perLayer = weights + (inp.kvOnHost ? 0 : kv);
  const gpuWeightFraction = (p: LiaPolicyMask): number => {
    const d = shape.dModel;
    const w = [d * (d + 2 * shape.dKv), 0, 0, d * d, d * shape.fc1Matrices * shape.dFfn, shape.dFfn * d];
    const total = w.reduce((a, b) => a + b, 0);
    let onGpu = 0;
    for (let i = 1; i <= 6; i++) if (policyBit(p, i) === 0) onGpu += w[i - 1]!;
    return onGpu / total;
  };
  const attnOnGpu = (p: LiaPolicyMask): boolean => policyBit(p, 2) === 0 || policyBit(p, 3) === 0;
  const wFrac = Math.max(gpuWeightFraction(inp.prefillPolicy), gpuWeightFraction(inp.decodePolicy));
  const kvStream = attnOnGpu(inp.prefillPolicy) || attnOnGpu(inp.decodePolicy) ? 2 * kv : 0;
  // Activations in and out of the widest sublayer. Decision: prefill runs in the fewest
  // mini-batches whose activations take at most a quarter of the VRAM budget (digest 002 §3:
  // "prefill: FlexGen-style split into ≥ 2 mini-batches"; the paper prints no size), so a batch of
  // 900 × 256 prompt tokens does not reserve 30 GB of activations. Decode rows are one per sequence.
  const widest = Math.max(shape.dModel, shape.dFfn);
  const prefillAct = 2 * shape.actBytesPerElement * batch * inp.promptTokens * widest;
  const decodeAct = 2 * shape.actBytesPerElement * batch * widest;
  const miniBatches = Math.max(1, Math.ceil(prefillAct / Math.max(1, inp.vramBytes / 4)));
  const act = Math.max(decodeAct, prefillAct / miniBatches);
  const streaming = 2 * wFrac * weights + kvStream + act;
  if (nLayers * perLayer <= inp.vramBytes) {
    return { residentLayers: nLayers, perLayerBytes: perLayer, streamingBytes: 0, prefillMiniBatches: 1, binding: 'all-layers-fit' };
  }
  const room = Math.max(0, inp.vramBytes - streaming);
  const k = Math.min(nLayers, Math.floor(room / perLayer));
  return { residentLayers: k, perLayerBytes: perLayer, streamingBytes: streaming, prefillMiniBatches: miniBatches, binding: 'vram-capacity' };
}
