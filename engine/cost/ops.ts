// The work of one decoder layer, op by op: FLOPs and bytes as functions of the step shape
// (batch, new tokens, context) and the weight formats. One switch per family; names are what
// users see (OPT ops carry paper 000's names: LN.0, Q, K, V, Scores, Softmax, WV, Output, LN.1,
// FC.0, FC.1).

import { expertBytes, ffnGated, formatBytesPerElement, routerBytes, sharedExpertBytes, weightElements, type ModelShape, type WeightRole } from '../model/shape';
import { meanExpectedDistinct } from './moe';
import type { OpKind, OpWork, StepShape } from './types';

const ACT_BYTES = 2; // activations in F16/BF16 between ops

function checkStep(step: StepShape): void {
  for (const k of ['batch', 'newTokens', 'context'] as const) {
    const v = step[k];
    if (!Number.isFinite(v) || v < 0 || (k !== 'context' && v < 1) || v > 1e9) {
      throw new Error(`step shape: ${k} must be a finite number in [${k === 'context' ? 0 : 1}, 1e9], got ${v}`);
    }
  }
}

/**
 * Work of each op of one decoder layer. Attention spans `context + newTokens` keys; in prefill
 * (newTokens > 1) the causal mask halves the new-token part: each new token i attends to
 * context + i + 1 keys, on average context + (newTokens + 1) / 2.
 */
export function layerWork(shape: ModelShape, step: StepShape): OpWork[] {
  checkStep(step);
  const { batch: b, newTokens: n, context: c } = step;
  const T = b * n;
  const d = shape.nEmbd;
  const qDim = shape.nHeads * shape.headDim;
  const kvDim = shape.nKvHeads * shape.headDim;
  const kvB = formatBytesPerElement(shape.kvFormat);
  const span = c + (n + 1) / 2; // mean keys per query (decode: c + 1)
  const keys = c + n; // keys stored after the step
  const ops: OpWork[] = [];
  const act = (elems: number): number => elems * ACT_BYTES;
  const linear = (name: string, kind: OpKind, role: WeightRole, inDim: number, outDim: number, extra: Partial<OpWork> = {}): void => {
    const format = shape.weightFormats[role] ?? 'F16';
    ops.push({
      name, kind, flops: 2 * T * weightElements(shape, role), format,
      weightBytes: weightElements(shape, role) * formatBytesPerElement(format),
      kvReadBytes: 0, kvWriteBytes: 0, actInBytes: act(T * inDim), actOutBytes: act(T * outDim), rows: T, ...extra,
    });
  };
  const simple = (name: string, kind: OpKind, flops: number, inElems: number, outElems: number, extra: Partial<OpWork> = {}): void => {
    ops.push({ name, kind, flops, weightBytes: 0, kvReadBytes: 0, kvWriteBytes: 0, actInBytes: act(inElems), actOutBytes: act(outElems), format: '', rows: T, ...extra });
  };
  const opt = shape.family === 'opt';
  simple(opt ? 'LN.0' : 'attn_norm', 'norm', 5 * T * d, T * d, T * d);
  linear('Q', 'q', 'attn_q', d, qDim);
  linear('K', 'k', 'attn_k', d, kvDim, { kvWriteBytes: T * kvDim * kvB });
  linear('V', 'v', 'attn_v', d, kvDim, { kvWriteBytes: T * kvDim * kvB });
  if (!opt) simple('RoPE', 'rope', 6 * T * (qDim + kvDim), T * (qDim + kvDim), T * (qDim + kvDim));
  const scoreElems = T * shape.nHeads * span;
  // Scores read K of every stored key once per KV head group (GQA shares it across query heads).
  simple('Scores', 'scores', 2 * T * qDim * span, T * qDim, scoreElems, { kvReadBytes: b * keys * kvDim * kvB });
  simple('Softmax', 'softmax', 5 * scoreElems, scoreElems, scoreElems);
  simple('WV', 'wv', 2 * T * qDim * span, scoreElems, T * qDim, { kvReadBytes: b * keys * kvDim * kvB });
  const attention = ops.slice(-3);
  const groupBytes = attention.reduce((n, o) => n + o.weightBytes + o.kvReadBytes + o.actInBytes + o.actOutBytes, 0);
  for (const o of attention) o.groupBytes = groupBytes;
  linear('Output', 'out', 'attn_output', qDim, d);
  simple(opt ? 'LN.1' : 'ffn_norm', 'norm', 5 * T * d, T * d, T * d);
  if (shape.moe) {
    ops.push(...moeFfnWork(shape, T));
  } else if (opt) {
    linear('FC.0', 'fc1', 'ffn_up', d, shape.nFf);
    linear('FC.1', 'fc2', 'ffn_down', shape.nFf, d);
  } else if (!ffnGated(shape.family)) {
    linear('Up', 'up', 'ffn_up', d, shape.nFf);
    linear('Down', 'down', 'ffn_down', shape.nFf, d);
  } else {
    linear('Gate', 'gate', 'ffn_gate', d, shape.nFf);
    linear('Up', 'up', 'ffn_up', d, shape.nFf);
    linear('Down', 'down', 'ffn_down', shape.nFf, d);
  }
  return ops;
}

/**
 * The MoE FFN of one layer for T tokens: router (d × E), the routed experts (each token runs k
 * experts' gate/up/down; the step reads the expected distinct experts' weights — see
 * engine/cost/moe.ts), and the shared expert when the model has one. Averaged over layers
 * when the routing probabilities differ per layer (policies that place experts per layer use
 * engine/plan/moe-offload.ts's per-layer figures).
 */
export function moeFfnWork(shape: ModelShape, T: number): OpWork[] {
  const moe = shape.moe!;
  const d = shape.nEmbd;
  const ops: OpWork[] = [];
  const act = (elems: number): number => elems * ACT_BYTES;
  const format = shape.weightFormats.ffn_up ?? 'F16';
  ops.push({ name: 'Router', kind: 'router', flops: 2 * T * d * moe.nExpert + 5 * T * moe.nExpert, weightBytes: routerBytes(shape), kvReadBytes: 0, kvWriteBytes: 0, actInBytes: act(T * d), actOutBytes: act(T * moe.nExpert), format: 'F32', rows: T });
  const expertElems = 3 * d * shape.nFf;
  ops.push({
    name: 'Experts', kind: 'experts', flops: 2 * T * moe.nExpertUsed * expertElems, format,
    weightBytes: meanExpectedDistinct(shape, T) * expertBytes(shape), kvReadBytes: 0, kvWriteBytes: 0,
    actInBytes: act(T * d), actOutBytes: act(T * d), rows: T,
  });
  if (moe.sharedFf > 0) {
    ops.push({ name: 'Shared expert', kind: 'shared_expert', flops: 2 * T * 3 * d * moe.sharedFf, weightBytes: sharedExpertBytes(shape), kvReadBytes: 0, kvWriteBytes: 0, actInBytes: act(T * d), actOutBytes: act(T * d), format, rows: T });
  }
  return ops;
}

/** LM head (final norm + output projection) for `rows` token rows (prefill: one per sequence). */
export function headWork(shape: ModelShape, rows: number): OpWork {
  const format = shape.weightFormats.output ?? 'F16';
  const elems = weightElements(shape, 'output');
  return {
    name: 'LM head', kind: 'lm_head', flops: 2 * rows * elems + 5 * rows * shape.nEmbd, format,
    weightBytes: elems * formatBytesPerElement(format), kvReadBytes: 0, kvWriteBytes: 0,
    actInBytes: rows * shape.nEmbd * ACT_BYTES, actOutBytes: rows * shape.nVocab * 4, rows,
  };
}
