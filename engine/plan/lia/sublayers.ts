// LIA (paper 002) Table 1: operand sizes and FLOPs of the six GEMM/GEMV sublayers of a decoder
// layer, per stage. The paper writes them for OPT in BF16 (FFN = 4·d_m, no GQA); this module
// computes them for any dense decoder (GQA, gated FFN, other element sizes) so that the OPT case
// reduces exactly to the printed formulas (test/papers/002-lia.test.ts checks the reduction).

/** The six sublayers in the paper's order (§5.1, Fig. 6). Softmax, norms and residual adds are
 * fused into their neighbours, as in the paper. */
export const LIA_SUBLAYERS = ['qkv', 'scores', 'weightedValues', 'outProj', 'fc1', 'fc2'] as const;
export type LiaSublayer = (typeof LIA_SUBLAYERS)[number];

export type LiaStage = 'prefill' | 'decode';

/** What the LIA cost model needs of a layer: widths and element size. */
export interface LiaLayerShape {
  /** d_m. */
  dModel: number;
  /** Width of K (= of V): kvHeads × headDim (= d_m without GQA). */
  dKv: number;
  /** FFN inner width (OPT: 4·d_m). */
  dFfn: number;
  /** Matrices in sublayer 5: 1 for OPT's FC1, 2 for SwiGLU's gate + up. */
  fc1Matrices: 1 | 2;
  /** Bytes per weight element (BF16: 2). */
  weightBytesPerElement: number;
  /** Bytes per activation / KV element (BF16: 2). */
  actBytesPerElement: number;
}

/** D_X (first operand, bytes), D_Y (second operand, bytes), C (FLOPs) of one sublayer. */
export interface SublayerSize {
  name: LiaSublayer;
  dx: number;
  dy: number;
  flops: number;
  /** True when Y is a weight matrix (sublayers 1, 4, 5, 6); false when Y is K or V. */
  yIsWeight: boolean;
}

/** The OPT shape of Table 1: d_m given, FFN 4·d_m, MHA, BF16. */
export function optLayerShape(dModel: number): LiaLayerShape {
  return { dModel, dKv: dModel, dFfn: 4 * dModel, fc1Matrices: 1, weightBytesPerElement: 2, actBytesPerElement: 2 };
}

/**
 * Table 1 for batch B and length L. Prefill: L = input length (B·L tokens, Q·Kᵀ over L keys).
 * Decode: one new token per sequence attending to L cached tokens.
 * Decision (paper silent beyond OPT): with GQA, Q·Kᵀ and S·V read B·L·dKv K/V elements but still
 * do 2·B·L·d_m FLOPs per new token (every query head works); the Q part of QKV is d_m × d_m and
 * K, V are d_m × dKv each.
 */
export function sublayerSizes(shape: LiaLayerShape, stage: LiaStage, batch: number, length: number): SublayerSize[] {
  if (!(batch >= 1) || !(length >= 1)) throw new Error(`LIA sizes: batch and length must be ≥ 1 (got B=${batch}, L=${length})`);
  const d = shape.dModel;
  const a = shape.actBytesPerElement;
  const w = shape.weightBytesPerElement;
  const rows = stage === 'prefill' ? batch * length : batch; // tokens entering the linear ops
  const qkvCols = d + 2 * shape.dKv;
  const fc1Cols = shape.fc1Matrices * shape.dFfn;
  // Attention: prefill attends L queries × L keys per sequence; decode 1 query × L keys.
  const attnFlops = stage === 'prefill' ? 2 * batch * length * length * d : 2 * batch * length * d;
  const kvBytes = a * batch * length * shape.dKv; // one of K or V for the whole batch
  return [
    { name: 'qkv', dx: a * rows * d, dy: w * d * qkvCols, flops: 2 * rows * d * qkvCols, yIsWeight: true },
    { name: 'scores', dx: a * rows * d, dy: kvBytes, flops: attnFlops, yIsWeight: false },
    { name: 'weightedValues', dx: a * rows * d, dy: kvBytes, flops: attnFlops, yIsWeight: false },
    { name: 'outProj', dx: a * rows * d, dy: w * d * d, flops: 2 * rows * d * d, yIsWeight: true },
    { name: 'fc1', dx: a * rows * d, dy: w * d * fc1Cols, flops: 2 * rows * d * fc1Cols, yIsWeight: true },
    { name: 'fc2', dx: a * rows * shape.dFfn, dy: w * shape.dFfn * d, flops: 2 * rows * shape.dFfn * d, yIsWeight: true },
  ];
}

/**
 * D_KV of Eq. (9): the K and V that sublayer 1 produces this step (paper: "not given").
 * Decision: K + V of the new tokens, 2·a·B·L·dKv in prefill (= 4BLd_m for OPT BF16) and
 * 2·a·B·dKv in decode.
 */
export function producedKvBytes(shape: LiaLayerShape, stage: LiaStage, batch: number, length: number): number {
  const rows = stage === 'prefill' ? batch * length : batch;
  return 2 * shape.actBytesPerElement * rows * shape.dKv;
}

/** Weight bytes of one decoder layer's six sublayers (OPT BF16: 24·d_m², §5.2 "1.2 GB per layer" for 30B). */
export function layerWeightBytesLia(shape: LiaLayerShape): number {
  const d = shape.dModel;
  return shape.weightBytesPerElement * (d * (d + 2 * shape.dKv) + d * d + d * shape.fc1Matrices * shape.dFfn + shape.dFfn * d);
}

/** KV bytes of one layer for B sequences of L tokens (K and V). */
export function layerKvBytesLia(shape: LiaLayerShape, batch: number, length: number): number {
  return 2 * shape.actBytesPerElement * batch * length * shape.dKv;
}
