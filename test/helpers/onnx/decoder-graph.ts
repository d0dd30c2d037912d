// A llama/qwen2 decoder as an ONNX graph, built from the weights of a GGUF file, for a whole
// token sequence at once (causal mask, no KV cache). It is the independent reference for the
// native forward pass: only standard ONNX operators, weights dequantized in TypeScript, every
// step written from the model's definition rather than from the native code.
//
// With `emulateNativeRounding` the graph also rounds where Fulcrum (like llama.cpp's CPU
// backend) leaves float32: activations entering an F16 matmul are rounded to f16, those entering
// a Q8_0 matmul are quantized to Q8_0 blocks (d = amax/127 stored as f16, q = round-half-even
// clamped to ±127), Q/K/V are rounded to f16 (the KV cache is f16 and Q is converted to meet
// it), and the softmax probabilities are rounded to f16 before they weigh V. It also computes
// the few scalar functions as precisely as the native code does: exponentials in double rounded
// to float (libm's expf is correctly rounded, ORT's vectorized Exp/Softmax/Sigmoid are not), the
// RMSNorm sum of squares and the softmax denominator in double. Without the option the graph is
// the plain float32 model written with ONNX's own Softmax and Sigmoid.
import { GgmlType, ggmlTypeName } from '../../../engine/model/ggml-types';
import { tensorMap, type GgufFile, type GgufTensorInfo } from '../../../engine/model/gguf';
import type { ModelHparams } from '../../../engine/model/hparams';
import { attr, GraphBuilder } from './graph-builder';
import { dequantizeTensor } from './gguf-weights';
import { OnnxDataType } from './onnx-proto';

export interface DecoderGraphOptions {
  /** Sequence length the graph is built for (the RoPE tables and the causal mask depend on it). */
  nTokens: number;
  emulateNativeRounding: boolean;
  /** Override of the file's RoPE style; used to show that the comparison notices a wrong RoPE. */
  ropeStyle?: ModelHparams['ropeStyle'];
}

export const TOKENS_INPUT = 'tokens';
export const LOGITS_OUTPUT = 'logits';

/** RoPE angle tables computed as the model defines them, in float32 steps (θ_i = pos · base^(-2i/n_rot)). */
function ropeTables(hp: ModelHparams, nTokens: number, style: ModelHparams['ropeStyle']): { cos: Float32Array; sin: Float32Array; perm: number[] } {
  const hd = hp.headDim;
  const half = hp.ropeDims / 2;
  const freqScale = hp.ropeScalingType === 'linear' ? 1 / hp.ropeScalingFactor : 1;
  const thetaScale = Math.fround(Math.pow(Math.fround(hp.ropeFreqBase), Math.fround(-2 / hp.ropeDims)));
  const cos = new Float32Array(nTokens * hd).fill(1); // unrotated tail dimensions pass through
  const sin = new Float32Array(nTokens * hd);
  // Partner of each dimension in the rotation: y = x·cos + x[perm]·(±sin).
  const perm = Array.from({ length: hd }, (_, j) => j);
  for (let i = 0; i < half; i++) {
    const [a, b] = style === 'normal' ? [2 * i, 2 * i + 1] : [i, i + half];
    perm[a] = b;
    perm[b] = a;
  }
  for (let p = 0; p < nTokens; p++) {
    let theta = Math.fround(p);
    for (let i = 0; i < half; i++) {
      const t = Math.fround(theta * freqScale);
      const c = Math.fround(Math.cos(t));
      const s = Math.fround(Math.sin(t));
      const [a, b] = style === 'normal' ? [2 * i, 2 * i + 1] : [i, i + half];
      cos[p * hd + a] = c;
      cos[p * hd + b] = c;
      sin[p * hd + a] = -s; // y_a = x_a·cos − x_b·sin
      sin[p * hd + b] = s; // y_b = x_b·cos + x_a·sin
      theta = Math.fround(theta * thetaScale);
    }
  }
  return { cos, sin, perm };
}

class DecoderBuilder {
  readonly g = new GraphBuilder('fulcrum-reference-decoder');
  private readonly tensors: Map<string, GgufTensorInfo>;
  private readonly T: number;
  private readonly rope: { cos: string; sin: string; perm: string };
  private readonly mask: string;

  constructor(
    private readonly file: GgufFile,
    private readonly hp: ModelHparams,
    private readonly opts: DecoderGraphOptions,
  ) {
    this.tensors = tensorMap(file);
    this.T = opts.nTokens;
    const hd = hp.headDim;
    const tables = ropeTables(hp, this.T, opts.ropeStyle ?? hp.ropeStyle);
    this.rope = {
      cos: this.g.f32('rope_cos', [this.T, 1, hd], tables.cos),
      sin: this.g.f32('rope_sin', [this.T, 1, hd], tables.sin),
      perm: this.g.i64('rope_perm', tables.perm),
    };
    const mask = new Float32Array(this.T * this.T);
    for (let i = 0; i < this.T; i++) for (let j = i + 1; j < this.T; j++) mask[i * this.T + j] = -Infinity;
    this.mask = this.g.f32('causal_mask', [this.T, this.T], mask);
  }

  private info(name: string): GgufTensorInfo {
    const t = this.tensors.get(name);
    if (!t) throw new Error(`${this.file.path}: tensor '${name}' is missing`);
    return t;
  }

  /** A weight as a float32 initializer with ONNX dims (outermost first). */
  private weight(name: string): string {
    const t = this.info(name);
    return this.g.f32(name.replace(/\W/g, '_'), [...t.dims].reverse(), dequantizeTensor(this.file, t));
  }

  private roundF16(x: string): string {
    const h = this.g.op('Cast', [x], { to: attr.int(OnnxDataType.FLOAT16) });
    return this.g.op('Cast', [h], { to: attr.int(OnnxDataType.FLOAT) });
  }

  /** Q8_0 quantize-dequantize of each 32-value block of the rows of x [T, n]. */
  private roundQ8_0(x: string, n: number): string {
    const g = this.g;
    const blocks = g.op('Reshape', [x, g.i64('shape', [this.T, n / 32, 32])]);
    const amax = g.op('ReduceMax', [g.op('Abs', [blocks])], { axes: attr.ints([-1]), keepdims: attr.int(1) });
    const d = g.op('Div', [amax, g.f32('c127', [], [127])]);
    const zero = g.f32('zero', [], [0]);
    const id = g.op('Where', [g.op('Equal', [d, zero]), zero, g.op('Reciprocal', [d])]);
    const q = g.op('Clip', [g.op('Round', [g.op('Mul', [blocks, id])]), g.f32('qmin', [], [-127]), g.f32('qmax', [], [127])]);
    const dq = g.op('Mul', [q, this.roundF16(d)]);
    return g.op('Reshape', [dq, g.i64('shape', [this.T, n])]);
  }

  /** The activations as the matmul of a weight of `type` sees them. */
  private activation(x: string, n: number, type: GgmlType, cache: Map<GgmlType, string>): string {
    if (!this.opts.emulateNativeRounding || type === GgmlType.F32) return x;
    const hit = cache.get(type);
    if (hit) return hit;
    let out: string;
    if (type === GgmlType.F16) out = this.roundF16(x);
    else if (type === GgmlType.Q8_0) out = this.roundQ8_0(x, n);
    else throw new Error(`ONNX reference: no activation rounding for ${ggmlTypeName(type)} weights`);
    cache.set(type, out);
    return out;
  }

  /** x [T, n] · Wᵀ (+ bias): GGUF stores each output's row contiguously, so W is [out, n]. */
  private linear(x: string, n: number, weightName: string, cache: Map<GgmlType, string>, biasName?: string): string {
    const a = this.activation(x, n, this.info(weightName).type, cache);
    const inputs = [a, this.weight(weightName)];
    if (biasName) inputs.push(this.weight(biasName));
    return this.g.op('Gemm', inputs, { transB: attr.int(1) });
  }

  private rmsNorm(x: string, weightName: string): string {
    const g = this.g;
    let meanSq: string;
    if (this.opts.emulateNativeRounding) {
      // Sum of squares in double, the mean rounded to float once (as the native kernel does).
      const xd = g.op('Cast', [x], { to: attr.int(OnnxDataType.DOUBLE) });
      const sum = g.op('ReduceSum', [g.op('Mul', [xd, xd]), g.i64('axes', [-1])], { keepdims: attr.int(1) });
      const mean = g.op('Div', [sum, g.op('Cast', [g.f32('n', [], [this.hp.nEmbd])], { to: attr.int(OnnxDataType.DOUBLE) })]);
      meanSq = g.op('Cast', [mean], { to: attr.int(OnnxDataType.FLOAT) });
    } else {
      meanSq = g.op('ReduceMean', [g.op('Mul', [x, x])], { axes: attr.ints([-1]), keepdims: attr.int(1) });
    }
    const inv = g.op('Reciprocal', [g.op('Sqrt', [g.op('Add', [meanSq, g.f32('eps', [], [this.hp.normEps])])])]);
    return g.op('Mul', [g.op('Mul', [x, inv]), this.weight(weightName)]);
  }

  /** RoPE on x [T, heads·hd]; returns [T, heads, hd]. */
  private applyRope(x: string, heads: number): string {
    const g = this.g;
    const x3 = g.op('Reshape', [x, g.i64('shape', [this.T, heads, this.hp.headDim])]);
    const partner = g.op('Gather', [x3, this.rope.perm], { axis: attr.int(2) });
    return g.op('Add', [g.op('Mul', [x3, this.rope.cos]), g.op('Mul', [partner, this.rope.sin])]);
  }

  /** exp(x) in double rounded to float: the correctly rounded expf that libm gives, where ORT's vectorized Exp may be an ulp off. */
  private expF32(x: string): string {
    const g = this.g;
    const e = g.op('Exp', [g.op('Cast', [x], { to: attr.int(OnnxDataType.DOUBLE) })]);
    return g.op('Cast', [e], { to: attr.int(OnnxDataType.FLOAT) });
  }

  /** Softmax over the last axis as the native kernel computes it: float exponentials, their sum in double, one float reciprocal. */
  private exactSoftmax(s: string): string {
    const g = this.g;
    const e = this.expF32(g.op('Sub', [s, g.op('ReduceMax', [s], { axes: attr.ints([-1]), keepdims: attr.int(1) })]));
    const sum = g.op('ReduceSum', [g.op('Cast', [e], { to: attr.int(OnnxDataType.DOUBLE) }), g.i64('axes', [-1])], { keepdims: attr.int(1) });
    return g.op('Mul', [e, g.op('Cast', [g.op('Reciprocal', [sum])], { to: attr.int(OnnxDataType.FLOAT) })]);
  }

  private attention(q3: string, k3: string, v3: string): string {
    const g = this.g;
    const { nHeads, nKvHeads, headDim } = this.hp;
    const group = nHeads / nKvHeads;
    // Grouped-query attention: query head h reads KV head ⌊h / group⌋.
    const kvIndex = g.i64('kv_head_of_q_head', Array.from({ length: nHeads }, (_, h) => Math.floor(h / group)));
    const k = g.op('Transpose', [g.op('Gather', [k3, kvIndex], { axis: attr.int(1) })], { perm: attr.ints([1, 2, 0]) }); // [H, hd, T]
    const v = g.op('Transpose', [g.op('Gather', [v3, kvIndex], { axis: attr.int(1) })], { perm: attr.ints([1, 0, 2]) }); // [H, T, hd]
    const q = g.op('Transpose', [q3], { perm: attr.ints([1, 0, 2]) }); // [H, T, hd]
    const scores = g.op('Mul', [g.op('MatMul', [q, k]), g.f32('attn_scale', [], [1 / Math.sqrt(headDim)])]);
    const masked = g.op('Add', [scores, this.mask]);
    const probs = this.opts.emulateNativeRounding ? this.roundF16(this.exactSoftmax(masked)) : g.op('Softmax', [masked], { axis: attr.int(-1) });
    const out = g.op('Transpose', [g.op('MatMul', [probs, v])], { perm: attr.ints([1, 0, 2]) }); // [T, H, hd]
    return g.op('Reshape', [out, g.i64('shape', [this.T, nHeads * headDim])]);
  }

  private layer(x: string, l: number): string {
    const g = this.g;
    const { nEmbd: E, nHeads, nKvHeads, headDim, nFf: F, hasQkvBias } = this.hp;
    const p = `blk.${l}.`;
    const h = this.rmsNorm(x, `${p}attn_norm.weight`);
    const hCache = new Map<GgmlType, string>();
    const bias = (n: string): string | undefined => (hasQkvBias ? `${p}${n}.bias` : undefined);
    let q = this.applyRope(this.linear(h, E, `${p}attn_q.weight`, hCache, bias('attn_q')), nHeads);
    let k = this.applyRope(this.linear(h, E, `${p}attn_k.weight`, hCache, bias('attn_k')), nKvHeads);
    let v = g.op('Reshape', [this.linear(h, E, `${p}attn_v.weight`, hCache, bias('attn_v')), g.i64('shape', [this.T, nKvHeads, headDim])]);
    if (this.opts.emulateNativeRounding) {
      q = this.roundF16(q);
      k = this.roundF16(k);
      v = this.roundF16(v);
    }
    const att = this.attention(q, k, v);
    x = g.op('Add', [x, this.linear(att, nHeads * headDim, `${p}attn_output.weight`, new Map())]);

    const h2 = this.rmsNorm(x, `${p}ffn_norm.weight`);
    const h2Cache = new Map<GgmlType, string>();
    const gate = this.linear(h2, E, `${p}ffn_gate.weight`, h2Cache);
    const up = this.linear(h2, E, `${p}ffn_up.weight`, h2Cache);
    // SwiGLU: silu(gate) · up, with silu(g) = g / (1 + e^-g).
    const silu = this.opts.emulateNativeRounding
      ? g.op('Div', [gate, g.op('Add', [g.f32('one', [], [1]), this.expF32(g.op('Neg', [gate]))])])
      : g.op('Mul', [gate, g.op('Sigmoid', [gate])]);
    const act = g.op('Mul', [silu, up]);
    return g.op('Add', [x, this.linear(act, F, `${p}ffn_down.weight`, new Map())]);
  }

  build(): Uint8Array {
    const g = this.g;
    const { nLayers, nEmbd, nVocab, tiedOutput } = this.hp;
    const tokens = g.input(TOKENS_INPUT, OnnxDataType.INT64, [this.T]);
    let x = g.op('Gather', [this.weight('token_embd.weight'), tokens], { axis: attr.int(0) });
    for (let l = 0; l < nLayers; l++) x = this.layer(x, l);
    const h = this.rmsNorm(x, 'output_norm.weight');
    const logits = this.linear(h, nEmbd, tiedOutput ? 'token_embd.weight' : 'output.weight', new Map());
    g.output(logits, LOGITS_OUTPUT, OnnxDataType.FLOAT, [this.T, nVocab]);
    return g.toBytes();
  }
}

/** The .onnx bytes of the model in `file` for sequences of `opts.nTokens` tokens (input 'tokens': int64 [T]; output 'logits': float [T, nVocab]). */
export function buildDecoderOnnx(file: GgufFile, hp: ModelHparams, opts: DecoderGraphOptions): Uint8Array {
  if (hp.hasRopeFreqs || hp.hasOutputBias || (hp.ropeScalingType !== 'none' && hp.ropeScalingType !== 'linear')) {
    throw new Error(`${file.path}: the ONNX reference covers plain llama/qwen2 (no rope_freqs, output bias or ${hp.ropeScalingType} RoPE scaling)`);
  }
  if (!Number.isInteger(opts.nTokens) || opts.nTokens < 1) throw new Error(`ONNX reference: nTokens must be a positive integer, got ${opts.nTokens}`);
  return new DecoderBuilder(file, hp, opts).build();
}
