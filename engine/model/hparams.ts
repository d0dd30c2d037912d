// Model hyperparameters from GGUF metadata, for the architectures Fulcrum runs (llama, qwen2, qwen3, phi3, starcoder2, gemma, gemma2, gemma3, qwen3moe),
// and the check that the file holds every tensor those hyperparameters imply, with the right
// shapes. Key names and conventions follow llama.cpp's, since that is who writes GGUF files.

import path from 'node:path';
import { GgufValueType, type GgufFile, type GgufTensorInfo } from './gguf/types';
import {
  GgufMetadataError,
  metaOptionalArray,
  metaOptionalInteger,
  metaOptionalNumber,
  metaOptionalNumberArray,
  metaOptionalString,
  metaString,
  tensorMap,
} from './gguf/index';
import { SUPPORTED_ARCHITECTURES, type ModelArchitecture } from '../native/architectures';

export { SUPPORTED_ARCHITECTURES, type ModelArchitecture };

export type RopeScalingType = 'none' | 'linear' | 'yarn' | 'longrope';
/** 'normal': rotate adjacent pairs (x[2i], x[2i+1]); 'neox': rotate halves (x[i], x[i + dims/2]). */
export type RopeStyle = 'normal' | 'neox';

export interface ModelHparams {
  architecture: ModelArchitecture;
  /** general.name, else the file name. */
  name: string;
  nLayers: number;
  nEmbd: number;
  nHeads: number;
  nKvHeads: number;
  /** Per-head dimension of Q/K/V (key_length, else nEmbd / nHeads). */
  headDim: number;
  nFf: number;
  nVocab: number;
  /** Training context length. */
  contextLength: number;
  /** RMSNorm epsilon. */
  normEps: number;
  ropeFreqBase: number;
  ropeScalingType: RopeScalingType;
  /** Context-extension factor; 1 when there is no scaling. */
  ropeScalingFactor: number;
  /** YaRN's original training context, when the file states it. */
  ropeScalingOrigContext?: number;
  ropeStyle: RopeStyle;
  /** Leading dimensions of each head that RoPE rotates (≤ headDim, even). */
  ropeDims: number;
  /** No output.weight: the LM head reuses token_embd.weight. */
  tiedOutput: boolean;
  /** attn_q/k/v.bias present (always for qwen2, optional for llama). */
  hasQkvBias: boolean;
  /** attn_q_norm / attn_k_norm: an RMSNorm of each Q and K head ([headDim] gains) before RoPE (qwen3). */
  hasQkNorm: boolean;
  /** attn_qkv.weight: Q, K and V in one matrix, rows in that order (phi3). */
  fusedQkv: boolean;
  /** ffn_up.weight holds the gate's rows then the up rows ([nEmbd, 2·nFf]), no ffn_gate (phi3). */
  fusedGateUp: boolean;
  /** 'layer': LayerNorm with a bias (attn_norm, ffn_norm, output_norm .bias), starcoder2; else RMSNorm. */
  norm: 'rms' | 'layer';
  /**
   * The FFN: SwiGLU (gate, up, down), GeGLU (gemma), ungated up → GELU → down (starcoder2), or
   * routed SwiGLU experts (qwen3moe: nFf is then one expert's FFN size).
   */
  ffn: 'swiglu' | 'geglu' | 'gelu' | 'moe';
  /** MoE: experts per layer and experts each token runs (0 for a dense model). */
  nExpert: number;
  nExpertUsed: number;
  /** attn_output, ffn_up and ffn_down biases (starcoder2). */
  hasOutFfnBias: boolean;
  /** Embeddings scaled by sqrt(nEmbd) (gemma*). */
  embeddingScale: boolean;
  /** post_attention_norm and post_ffw_norm on each sublayer's output (gemma2, gemma3). */
  postNorms: boolean;
  /** Gemma 2/3's attention scale (query_pre_attn_scalar), when it is not 1/sqrt(headDim); else 0. */
  attnScale: number;
  /** Soft-capping of attention scores and of the final logits (tanh(x / cap) · cap); 0: none. */
  attnSoftcap: number;
  finalSoftcap: number;
  /** Sliding-window attention: the window (0: none) and which layers use it (their own RoPE base). */
  slidingWindow: number;
  swaLayers: boolean[];
  ropeFreqBaseSwa: number;
  /** attn_output.bias present (llama only, rare). */
  hasOutputBias: boolean;
  /** rope_freqs.weight present (Llama 3.1 style per-dimension frequency factors). */
  hasRopeFreqs: boolean;
  /** general.file_type (llama.cpp's LLAMA_FTYPE), when present. */
  fileType?: number;
}

/** A tensor the architecture needs is missing, has the wrong shape, or is not expected at all. */
export class ModelTensorError extends Error {
  constructor(
    readonly file: string,
    readonly tensor: string,
    readonly problem: string,
  ) {
    super(`${file}: tensor '${tensor}': ${problem}`);
    this.name = 'ModelTensorError';
  }
}

export interface ReadHparamsOptions {
  /**
   * Check the tensors against the hyperparameters (default true). Vocab-only files (no tensors)
   * are read with false.
   */
  checkTensors?: boolean;
}

const ROPE_STYLE: Record<ModelArchitecture, RopeStyle> = { llama: 'normal', qwen2: 'neox', qwen3: 'neox', phi3: 'neox', starcoder2: 'neox', gemma: 'neox', gemma2: 'neox', gemma3: 'neox', qwen3moe: 'neox' };

/**
 * Gemma 2/3's per-layer attention: llama.cpp's defaults where the file is silent (gemma2: scores
 * capped at 50, logits at 30, a 4096 window on every other layer; gemma3: no score cap, a window
 * on 5 of every 6 layers when the file gives one, local RoPE base 10000) and its attention scale
 * (1/sqrt(n_embd / n_heads) for the 27B models, 1/sqrt(head_dim) otherwise).
 */
function gemmaAttention(file: GgufFile, arch: ModelArchitecture, nLayers: number, nEmbd: number, nHeads: number, headDim: number, ropeFreqBase: number):
  Pick<ModelHparams, 'attnScale' | 'attnSoftcap' | 'finalSoftcap' | 'slidingWindow' | 'swaLayers' | 'ropeFreqBaseSwa'> {
  const none = { attnScale: 0, attnSoftcap: 0, finalSoftcap: 0, slidingWindow: 0, swaLayers: [] as boolean[], ropeFreqBaseSwa: ropeFreqBase };
  if (arch !== 'gemma2' && arch !== 'gemma3') return none;
  const k = (suffix: string): string => `${arch}.${suffix}`;
  const gemma2 = arch === 'gemma2';
  const window = metaOptionalInteger(file, k('attention.sliding_window'), 0) ?? (gemma2 ? 4096 : 0);
  const patternKv = file.kv.get(k('attention.sliding_window_pattern'));
  let swaLayers: boolean[];
  if (patternKv?.type === GgufValueType.ARRAY) {
    const flags = metaOptionalArray(file, k('attention.sliding_window_pattern'))!.items.map(Boolean);
    if (flags.length !== nLayers) throw new GgufMetadataError(file.path, k('attention.sliding_window_pattern'), `${flags.length} entries for ${nLayers} layers`);
    swaLayers = flags;
  } else {
    const n = metaOptionalInteger(file, k('attention.sliding_window_pattern'), 0) ?? (gemma2 ? 2 : 6);
    swaLayers = Array.from({ length: nLayers }, (_, il) => n === 0 || il % n < n - 1);
  }
  const big = nLayers === (gemma2 ? 46 : 62);  // the 27B models
  const scale = big ? 1 / Math.sqrt(nEmbd / nHeads) : 1 / Math.sqrt(headDim);
  return {
    attnScale: Math.abs(scale - 1 / Math.sqrt(headDim)) > 0 ? scale : 0,
    attnSoftcap: gemma2 ? metaOptionalNumber(file, k('attn_logit_softcapping')) ?? 50 : 0,
    finalSoftcap: metaOptionalNumber(file, k('final_logit_softcapping')) ?? (gemma2 ? 30 : 0),
    slidingWindow: window,
    swaLayers: window > 0 ? swaLayers : [],
    ropeFreqBaseSwa: metaOptionalNumber(file, k('rope.freq_base_swa')) ?? (gemma2 ? ropeFreqBase : 10000),
  };
}
const DEFAULT_ROPE_FREQ_BASE = 10000;

function isSupported(arch: string): arch is ModelArchitecture {
  return (SUPPORTED_ARCHITECTURES as readonly string[]).includes(arch);
}

/** A count that some files store per layer as an array; Fulcrum needs it uniform. */
function uniformCount(file: GgufFile, key: string, nLayers: number): number | undefined {
  const kv = file.kv.get(key);
  if (!kv) return undefined;
  if (kv.type !== GgufValueType.ARRAY) return metaOptionalInteger(file, key, 1);
  const values = metaOptionalNumberArray(file, key)!;
  if (values.length !== nLayers) {
    throw new GgufMetadataError(file.path, key, `per-layer array has ${values.length} entries for ${nLayers} layers`);
  }
  const first = values[0]!;
  if (!values.every((v) => v === first) || !Number.isInteger(first) || first < 1) {
    throw new GgufMetadataError(file.path, key, `per-layer values differ (${values.join(', ')}); only uniform layers are supported`);
  }
  return first;
}

function requiredInteger(file: GgufFile, key: string, min = 1): number {
  const v = metaOptionalInteger(file, key, min);
  if (v === undefined) throw new GgufMetadataError(file.path, key, 'required key is missing');
  return v;
}

function readRopeScaling(file: GgufFile, arch: string): Pick<ModelHparams, 'ropeScalingType' | 'ropeScalingFactor' | 'ropeScalingOrigContext'> {
  const typeKey = `${arch}.rope.scaling.type`;
  const rawType = metaOptionalString(file, typeKey);
  const factorKey = `${arch}.rope.scaling.factor`;
  let factor = metaOptionalNumber(file, factorKey);
  // Older converters wrote only a linear factor.
  const legacyLinear = metaOptionalNumber(file, `${arch}.rope.scale_linear`);
  let type: RopeScalingType;
  if (rawType === undefined) {
    type = legacyLinear !== undefined && legacyLinear !== 1 ? 'linear' : 'none';
    factor ??= legacyLinear;
  } else if (rawType === 'none' || rawType === 'linear' || rawType === 'yarn' || rawType === 'longrope') {
    type = rawType;
  } else {
    throw new GgufMetadataError(file.path, typeKey, `unknown RoPE scaling type '${rawType}' (known: none, linear, yarn, longrope)`);
  }
  // llama.cpp treats a factor of 0 as "not set".
  if (factor === undefined || factor === 0) factor = 1;
  if (!Number.isFinite(factor) || factor < 1) {
    throw new GgufMetadataError(file.path, factorKey, `RoPE scaling factor must be ≥ 1, got ${factor}`);
  }
  if (type === 'none') factor = 1;
  const orig = metaOptionalInteger(file, `${arch}.rope.scaling.original_context_length`, 1);
  return { ropeScalingType: type, ropeScalingFactor: factor, ...(orig !== undefined ? { ropeScalingOrigContext: orig } : {}) };
}

/** Reads and checks the hyperparameters of a GGUF file of a supported architecture. */
export function readHparams(file: GgufFile, opts: ReadHparamsOptions = {}): ModelHparams {
  const arch = metaString(file, 'general.architecture');
  if (!isSupported(arch)) {
    throw new GgufMetadataError(file.path, 'general.architecture',
      `unsupported architecture '${arch}' (supported: ${SUPPORTED_ARCHITECTURES.join(', ')})`);
  }
  const k = (suffix: string): string => `${arch}.${suffix}`;

  const experts = metaOptionalInteger(file, k('expert_count'), 0) ?? 0;
  const moe = arch === 'qwen3moe';
  if (experts > 0 && !moe) {
    throw new GgufMetadataError(file.path, k('expert_count'), `mixture-of-experts ${arch} models (${experts} experts) are not supported (MoE: qwen3moe)`);
  }
  if (moe && experts < 1) throw new GgufMetadataError(file.path, k('expert_count'), 'required key is missing (qwen3moe has experts)');
  const expertsUsed = moe ? metaOptionalInteger(file, k('expert_used_count'), 1) : 0;
  if (moe && (expertsUsed === undefined || expertsUsed > experts)) {
    throw new GgufMetadataError(file.path, k('expert_used_count'), `must be in [1, ${experts}], got ${expertsUsed ?? 'nothing'}`);
  }

  const nLayers = requiredInteger(file, k('block_count'));
  const nEmbd = requiredInteger(file, k('embedding_length'));
  const nHeads = uniformCount(file, k('attention.head_count'), nLayers);
  if (nHeads === undefined) throw new GgufMetadataError(file.path, k('attention.head_count'), 'required key is missing');
  const nKvHeads = uniformCount(file, k('attention.head_count_kv'), nLayers) ?? nHeads;
  const ffKey = k(moe ? 'expert_feed_forward_length' : 'feed_forward_length');
  const nFf = uniformCount(file, ffKey, nLayers);
  if (nFf === undefined) throw new GgufMetadataError(file.path, ffKey, 'required key is missing');
  const contextLength = requiredInteger(file, k('context_length'));

  const keyLength = metaOptionalInteger(file, k('attention.key_length'), 1);
  const valueLength = metaOptionalInteger(file, k('attention.value_length'), 1);
  if (keyLength === undefined && nEmbd % nHeads !== 0) {
    throw new GgufMetadataError(file.path, k('attention.head_count'), `${nHeads} heads do not divide embedding length ${nEmbd}`);
  }
  const headDim = keyLength ?? nEmbd / nHeads;
  if (nHeads % nKvHeads !== 0) {
    throw new GgufMetadataError(file.path, k('attention.head_count_kv'), `${nKvHeads} KV heads do not divide ${nHeads} query heads`);
  }
  if (valueLength !== undefined && valueLength !== headDim) {
    throw new GgufMetadataError(file.path, k('attention.value_length'), `value length ${valueLength} differs from key length ${headDim}; not supported`);
  }

  const epsKey = k(arch === 'starcoder2' ? 'attention.layer_norm_epsilon' : 'attention.layer_norm_rms_epsilon');
  const normEps = metaOptionalNumber(file, epsKey);
  if (normEps === undefined) throw new GgufMetadataError(file.path, epsKey, 'required key is missing');
  if (!(normEps > 0 && normEps < 1)) throw new GgufMetadataError(file.path, epsKey, `must be in (0, 1), got ${normEps}`);

  const ropeFreqBase = metaOptionalNumber(file, k('rope.freq_base')) ?? DEFAULT_ROPE_FREQ_BASE;
  if (!(ropeFreqBase > 1) || !Number.isFinite(ropeFreqBase)) {
    throw new GgufMetadataError(file.path, k('rope.freq_base'), `must be a finite number > 1, got ${ropeFreqBase}`);
  }
  const ropeDims = metaOptionalInteger(file, k('rope.dimension_count'), 2) ?? headDim;
  if (ropeDims > headDim || ropeDims % 2 !== 0) {
    throw new GgufMetadataError(file.path, k('rope.dimension_count'), `must be even and ≤ head dimension ${headDim}, got ${ropeDims}`);
  }

  const tensors = tensorMap(file);
  const embd = tensors.get('token_embd.weight');
  const tokens = metaOptionalArray(file, 'tokenizer.ggml.tokens');
  const declaredVocab = metaOptionalInteger(file, k('vocab_size'), 1);
  const nVocab = embd?.dims[1] ?? declaredVocab ?? tokens?.items.length;
  if (nVocab === undefined) {
    throw new GgufMetadataError(file.path, 'tokenizer.ggml.tokens',
      `vocabulary size unknown: no token_embd.weight, no ${k('vocab_size')}, no tokenizer tokens`);
  }
  if (tokens && tokens.items.length !== nVocab) {
    throw new GgufMetadataError(file.path, 'tokenizer.ggml.tokens',
      `${tokens.items.length} tokens but the model's vocabulary has ${nVocab} rows (token_embd.weight / ${k('vocab_size')})`);
  }

  const hasQkvBias = tensors.has('blk.0.attn_q.bias');
  const fileType = metaOptionalInteger(file, 'general.file_type', 0);
  const hp: ModelHparams = {
    architecture: arch,
    name: metaOptionalString(file, 'general.name') ?? path.basename(file.path),
    nLayers,
    nEmbd,
    nHeads,
    nKvHeads,
    headDim,
    nFf,
    nVocab,
    contextLength,
    normEps,
    ropeFreqBase,
    ...readRopeScaling(file, arch),
    ropeStyle: ROPE_STYLE[arch],
    ropeDims,
    tiedOutput: !tensors.has('output.weight'),
    hasQkvBias: arch === 'qwen2' || arch === 'starcoder2' || hasQkvBias,
    hasQkNorm: arch === 'qwen3' || arch === 'qwen3moe' || arch === 'gemma3',
    fusedQkv: tensors.has('blk.0.attn_qkv.weight'),
    fusedGateUp: arch === 'phi3',
    norm: arch === 'starcoder2' ? 'layer' : 'rms',
    ffn: arch === 'starcoder2' ? 'gelu' : arch.startsWith('gemma') ? 'geglu' : moe ? 'moe' : 'swiglu',
    nExpert: moe ? experts : 0,
    nExpertUsed: expertsUsed ?? 0,
    hasOutFfnBias: arch === 'starcoder2',
    embeddingScale: arch.startsWith('gemma'),
    postNorms: arch === 'gemma2' || arch === 'gemma3',
    ...gemmaAttention(file, arch, nLayers, nEmbd, nHeads, headDim, ropeFreqBase),
    hasOutputBias: arch === 'llama' && tensors.has('blk.0.attn_output.bias'),
    hasRopeFreqs: tensors.has('rope_freqs.weight'),
    ...(fileType !== undefined ? { fileType } : {}),
  };
  if (opts.checkTensors ?? true) checkTensorShapes(file, hp, tensors);
  return hp;
}

/** Every tensor the hyperparameters imply, with its GGUF shape (innermost dimension first). */
export function expectedTensorShapes(hp: ModelHparams): Map<string, number[]> {
  const qDim = hp.nHeads * hp.headDim;
  const kvDim = hp.nKvHeads * hp.headDim;
  const shapes = new Map<string, number[]>();
  shapes.set('token_embd.weight', [hp.nEmbd, hp.nVocab]);
  for (let i = 0; i < hp.nLayers; i++) {
    const b = `blk.${i}.`;
    shapes.set(`${b}attn_norm.weight`, [hp.nEmbd]);
    if (hp.norm === 'layer') {
      shapes.set(`${b}attn_norm.bias`, [hp.nEmbd]);
      shapes.set(`${b}ffn_norm.bias`, [hp.nEmbd]);
    }
    if (hp.hasOutFfnBias) {
      shapes.set(`${b}attn_output.bias`, [hp.nEmbd]);
      shapes.set(`${b}ffn_up.bias`, [hp.nFf]);
      shapes.set(`${b}ffn_down.bias`, [hp.nEmbd]);
    }
    if (hp.fusedQkv) shapes.set(`${b}attn_qkv.weight`, [hp.nEmbd, qDim + 2 * kvDim]);
    else {
      shapes.set(`${b}attn_q.weight`, [hp.nEmbd, qDim]);
      shapes.set(`${b}attn_k.weight`, [hp.nEmbd, kvDim]);
      shapes.set(`${b}attn_v.weight`, [hp.nEmbd, kvDim]);
    }
    shapes.set(`${b}attn_output.weight`, [qDim, hp.nEmbd]);
    if (hp.hasQkvBias) {
      shapes.set(`${b}attn_q.bias`, [qDim]);
      shapes.set(`${b}attn_k.bias`, [kvDim]);
      shapes.set(`${b}attn_v.bias`, [kvDim]);
    }
    if (hp.hasQkNorm) {
      shapes.set(`${b}attn_q_norm.weight`, [hp.headDim]);
      shapes.set(`${b}attn_k_norm.weight`, [hp.headDim]);
    }
    if (hp.hasOutputBias) shapes.set(`${b}attn_output.bias`, [hp.nEmbd]);
    if (hp.postNorms) {
      shapes.set(`${b}post_attention_norm.weight`, [hp.nEmbd]);
      shapes.set(`${b}post_ffw_norm.weight`, [hp.nEmbd]);
    }
    shapes.set(`${b}ffn_norm.weight`, [hp.nEmbd]);
    if (hp.ffn === 'moe') {
      shapes.set(`${b}ffn_gate_inp.weight`, [hp.nEmbd, hp.nExpert]);
      shapes.set(`${b}ffn_gate_exps.weight`, [hp.nEmbd, hp.nFf, hp.nExpert]);
      shapes.set(`${b}ffn_up_exps.weight`, [hp.nEmbd, hp.nFf, hp.nExpert]);
      shapes.set(`${b}ffn_down_exps.weight`, [hp.nFf, hp.nEmbd, hp.nExpert]);
      continue;
    }
    if (hp.fusedGateUp) shapes.set(`${b}ffn_up.weight`, [hp.nEmbd, 2 * hp.nFf]);
    else if (hp.ffn === 'gelu') shapes.set(`${b}ffn_up.weight`, [hp.nEmbd, hp.nFf]);
    else {
      shapes.set(`${b}ffn_gate.weight`, [hp.nEmbd, hp.nFf]);
      shapes.set(`${b}ffn_up.weight`, [hp.nEmbd, hp.nFf]);
    }
    shapes.set(`${b}ffn_down.weight`, [hp.nFf, hp.nEmbd]);
  }
  shapes.set('output_norm.weight', [hp.nEmbd]);
  if (hp.norm === 'layer') shapes.set('output_norm.bias', [hp.nEmbd]);
  if (!hp.tiedOutput) shapes.set('output.weight', [hp.nEmbd, hp.nVocab]);
  if (hp.hasRopeFreqs) shapes.set('rope_freqs.weight', [hp.ropeDims / 2]);
  return shapes;
}

function shapeText(dims: number[]): string {
  return `[${dims.join(', ')}]`;
}

/**
 * Each expected tensor exists with its shape, and nothing else is in the file: a tensor the
 * runtime would ignore (e.g. from a block_count that is too small) is an error, not a silent
 * wrong answer.
 */
function checkTensorShapes(file: GgufFile, hp: ModelHparams, tensors: Map<string, GgufTensorInfo>): void {
  const expected = expectedTensorShapes(hp);
  for (const [name, shape] of expected) {
    const t = tensors.get(name);
    if (!t) throw new ModelTensorError(file.path, name, `missing; ${hp.architecture} with these hyperparameters needs it with shape ${shapeText(shape)}`);
    if (t.dims.length !== shape.length || t.dims.some((d, i) => d !== shape[i])) {
      throw new ModelTensorError(file.path, name, `expected shape ${shapeText(shape)}, found ${shapeText(t.dims)}`);
    }
  }
  for (const t of file.tensors) {
    if (!expected.has(t.name)) {
      throw new ModelTensorError(file.path, t.name,
        `not expected in a ${hp.architecture} model with ${hp.nLayers} layers (block_count); unsupported tensor`);
    }
  }
}
