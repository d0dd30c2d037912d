// Synthetic GGUF models: the tensor layout and metadata of a real llama/qwen2/qwen3 model with random
// weights of realistic scale, and either a real vocabulary copied from a GGUF file or a generated
// SentencePiece-style one. They let speed and memory work run on realistic shapes without
// shipping weights. Tensors are generated and converted a chunk of rows at a time and streamed
// to disk, so even a multi-GiB model is never in memory.

import { GgmlType, ggmlTypeInfo, ggmlTypeName } from './ggml-types';
import { GgufValueType as T, metaStringArray, readGguf, writeGguf, type GgufWriteKv, type GgufWriteTensor } from './gguf/index';
import type { GgufLayout } from './gguf/writer';
import { convertF32, TS_CONVERTIBLE_TYPES } from './quantize-ts';
import { loadAddon } from '../native/addon';
import { mulberry32 } from './seeded-random';

export interface SyntheticModelSpec {
  architecture: 'llama' | 'qwen2' | 'qwen3' | 'phi3' | 'starcoder2' | 'gemma' | 'gemma2' | 'gemma3' | 'qwen3moe';
  /** gemma2/gemma3: the sliding window (attention.sliding_window; gemma2's default 4096 when absent). */
  slidingWindow?: number;
  /** qwen3moe: experts per layer and per token (nFf is one expert's FFN size). */
  nExpert?: number;
  nExpertUsed?: number;
  /** qwen3moe: standard deviation of the router's weights (default 0.1: decisive routing, few near-ties). */
  routerStd?: number;
  /** general.name; default "synthetic-<architecture>". */
  name?: string;
  nLayers: number;
  nEmbd: number;
  nHeads: number;
  nKvHeads: number;
  nFf: number;
  /** Per-head dimension (attention.key_length); default nEmbd / nHeads. Qwen3 sets it apart from nEmbd. */
  headDim?: number;
  /** Dimensions of each head RoPE rotates (rope.dimension_count); default the head dimension (partial RoPE below it). */
  ropeDims?: number;
  /** Vocabulary size; with vocabFrom it may be omitted (and must match the file when given). */
  nVocab?: number;
  contextLength: number;
  /**
   * Type of the matrices (token_embd, attention, FFN, output). Norms and biases stay F32. For a
   * K-quant, matrices whose rows are not a multiple of 256 values take llama.cpp's fallback type
   * (see storedType).
   */
  weightType: GgmlType;
  /**
   * Per-matrix type instead of weightType where it returns one (e.g. llama.cpp's Q4_K_M mix:
   * attn_v, some ffn_down and output in Q6_K); the same K-quant fallback applies.
   */
  tensorType?: (name: string) => GgmlType | undefined;
  seed: number;
  /** A GGUF file (e.g. ../shared/vocab/*.gguf) whose tokenizer.* metadata is copied. */
  vocabFrom?: string;
  /** Default 10000 for llama, 1e6 for qwen2 (what the real families use). */
  ropeFreqBase?: number;
  /** Default 1e-5 for llama, 1e-6 for qwen2. */
  normEps?: number;
  /** Omit output.weight so the LM head reuses token_embd.weight. Default false. */
  tiedOutput?: boolean;
  /** Standard deviation of the random matrices; default 0.02 (the usual initialisation scale). */
  weightStd?: number;
}

/** Elements generated and converted at a time (whole rows, so block formats stay aligned). */
const CHUNK_ELEMENTS = 1 << 20;

/** llama.cpp's LLAMA_FTYPE for a model whose matrices are (mostly) of one type. */
const FILE_TYPE: Partial<Record<GgmlType, number>> = {
  [GgmlType.F32]: 0, [GgmlType.F16]: 1, [GgmlType.Q4_0]: 2, [GgmlType.Q4_1]: 3, [GgmlType.Q8_0]: 7,
  [GgmlType.Q5_0]: 8, [GgmlType.Q5_1]: 9, [GgmlType.Q4_K]: 14, [GgmlType.Q5_K]: 16, [GgmlType.Q6_K]: 18,
  [GgmlType.BF16]: 32,
};

/** llama.cpp's token types. */
const TOKEN_NORMAL = 1;
const TOKEN_UNKNOWN = 2;
const TOKEN_CONTROL = 3;
const TOKEN_BYTE = 6;

/** FNV-1a of the tensor name mixed with the model seed: each tensor's stream is independent. */
function tensorSeed(seed: number, name: string): number {
  let h = 0x811c9dc5 ^ (seed >>> 0);
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

const NORMAL_TABLE_BITS = 12;
let normalTable: Float64Array | undefined;

/**
 * Quantiles of N(0, 1) at i / 2^12 (ends clamped half a bin in), from a numerically integrated CDF. Sampling by
 * table lookup with interpolation is ~8x faster than Box–Muller, which matters for
 * multi-billion-parameter models; tails beyond ~3.5σ are clipped, which random weights do not miss.
 */
function standardNormalQuantiles(): Float64Array {
  if (normalTable) return normalTable;
  const n = 1 << NORMAL_TABLE_BITS;
  const table = new Float64Array(n + 1);
  const step = 1e-4;
  const pdf = (x: number): number => Math.exp(-0.5 * x * x) / Math.sqrt(2 * Math.PI);
  let x = -8;
  let cdf = 0;
  for (let i = 0; i <= n; i++) {
    const p = Math.min(Math.max(i / n, 0.5 / n), 1 - 0.5 / n);
    while (cdf < p) {
      cdf += 0.5 * (pdf(x) + pdf(x + step)) * step;
      x += step;
    }
    table[i] = x;
  }
  normalTable = table;
  return table;
}

/** Fills `out` with mean + std × N(0, 1). */
function fillNormal(out: Float32Array, rand: () => number, mean: number, std: number): void {
  const table = standardNormalQuantiles();
  const fracScale = 1 / (1 << (32 - NORMAL_TABLE_BITS));
  const fracMask = (1 << (32 - NORMAL_TABLE_BITS)) - 1;
  for (let i = 0; i < out.length; i++) {
    const u = rand();
    const idx = u >>> (32 - NORMAL_TABLE_BITS);
    const lo = table[idx]!;
    out[i] = mean + std * (lo + (table[idx + 1]! - lo) * (u & fracMask) * fracScale);
  }
}

type Converter = (src: Float32Array) => Uint8Array;

interface NativeQuant { quantize?: (typeId: number, src: Float32Array) => Uint8Array }

/** F32/F16/BF16/Q8_0 in TypeScript; every other format through the native addon. */
export function converterFor(type: GgmlType): Converter {
  if (TS_CONVERTIBLE_TYPES.includes(type)) return (src) => convertF32(type, src)!;
  const name = ggmlTypeName(type);
  if (!ggmlTypeInfo(type)) throw new Error(`synthetic model: unknown weight type ${type}`);
  let addon: NativeQuant;
  try {
    addon = loadAddon<NativeQuant>();
  } catch (e) {
    throw new Error(`synthetic model: weight type ${name} needs the native addon's quantize(), which could not be loaded: ${(e as Error).message}`);
  }
  const quantize = addon.quantize;
  if (typeof quantize !== 'function') {
    throw new Error(`synthetic model: weight type ${name} needs the native addon's quantize(), which this build lacks`);
  }
  return (src) => quantize(type, src);
}

interface TensorPlan {
  name: string;
  dims: number[];
  type: GgmlType;
  /** Distribution of the values: N(mean, std). */
  mean: number;
  std: number;
}

/**
 * llama.cpp's quantizer (llama-quant.cpp) stores a tensor whose rows are not a multiple of the
 * K-quants' 256-value super-block in a 32-block format of similar size instead: Q4_K -> Q5_0,
 * Q5_K -> Q5_1, Q6_K -> Q8_0. Doing the same lets real shapes (rows of 896 or 5504 values) be
 * written as "Q4_K" models that look like llama.cpp's own output.
 */
const K_QUANT_FALLBACK: Partial<Record<GgmlType, GgmlType>> = {
  [GgmlType.Q4_K]: GgmlType.Q5_0, [GgmlType.Q5_K]: GgmlType.Q5_1, [GgmlType.Q6_K]: GgmlType.Q8_0,
};

/** The type a matrix with rows of `rowLen` values is stored in when the model's type is `type`. */
export function storedType(type: GgmlType, rowLen: number): GgmlType {
  const fallback = K_QUANT_FALLBACK[type];
  const info = ggmlTypeInfo(type);
  if (fallback === undefined || !info || rowLen % info.blockSize === 0) return type;
  return fallback;
}

function planTensors(spec: SyntheticModelSpec, nVocab: number): TensorPlan[] {
  const headDim = headDimOf(spec);
  const qDim = spec.nHeads * headDim;
  const kvDim = spec.nKvHeads * headDim;
  const std = spec.weightStd ?? 0.02;
  const w = (name: string, dims: number[]): TensorPlan => ({ name, dims, type: storedType(spec.tensorType?.(name) ?? spec.weightType, dims[0]!), mean: 0, std });
  // Norm gains near 1 (trained models keep them there); biases small.
  const norm = (name: string, n = spec.nEmbd): TensorPlan => ({ name, dims: [n], type: GgmlType.F32, mean: 1, std: 0.02 });
  const bias = (name: string, n: number): TensorPlan => ({ name, dims: [n], type: GgmlType.F32, mean: 0, std });
  const plan: TensorPlan[] = [w('token_embd.weight', [spec.nEmbd, nVocab])];
  for (let i = 0; i < spec.nLayers; i++) {
    const b = `blk.${i}.`;
    const layerNorm = spec.architecture === 'starcoder2';
    plan.push(norm(`${b}attn_norm.weight`));
    if (layerNorm) plan.push(bias(`${b}attn_norm.bias`, spec.nEmbd));
    // phi3 keeps Q, K and V in one matrix (rows in that order) and the gate and up rows in ffn_up.
    const fused = spec.architecture === 'phi3';
    if (fused) plan.push(w(`${b}attn_qkv.weight`, [spec.nEmbd, qDim + 2 * kvDim]));
    else {
      plan.push(w(`${b}attn_q.weight`, [spec.nEmbd, qDim]));
      plan.push(w(`${b}attn_k.weight`, [spec.nEmbd, kvDim]));
      plan.push(w(`${b}attn_v.weight`, [spec.nEmbd, kvDim]));
    }
    if (spec.architecture === 'qwen2' || spec.architecture === 'starcoder2') {
      plan.push(bias(`${b}attn_q.bias`, qDim));
      plan.push(bias(`${b}attn_k.bias`, kvDim));
      plan.push(bias(`${b}attn_v.bias`, kvDim));
    }
    if (spec.architecture === 'qwen3' || spec.architecture === 'qwen3moe' || spec.architecture === 'gemma3') {
      plan.push(norm(`${b}attn_q_norm.weight`, headDim));
      plan.push(norm(`${b}attn_k_norm.weight`, headDim));
    }
    plan.push(w(`${b}attn_output.weight`, [qDim, spec.nEmbd]));
    if (layerNorm) plan.push(bias(`${b}attn_output.bias`, spec.nEmbd));
    const postNorms = spec.architecture === 'gemma2' || spec.architecture === 'gemma3';
    if (postNorms) plan.push(norm(`${b}post_attention_norm.weight`));
    plan.push(norm(`${b}ffn_norm.weight`));
    if (layerNorm) plan.push(bias(`${b}ffn_norm.bias`, spec.nEmbd));
    if (spec.architecture === 'qwen3moe') {
      // The router stays F32 (as llama.cpp's quantizer keeps ffn_gate_inp); experts stacked.
      const x = spec.nExpert ?? 8;
      plan.push({ name: `${b}ffn_gate_inp.weight`, dims: [spec.nEmbd, x], type: GgmlType.F32, mean: 0, std: spec.routerStd ?? 0.1 });
      plan.push(w(`${b}ffn_gate_exps.weight`, [spec.nEmbd, spec.nFf, x]));
      plan.push(w(`${b}ffn_up_exps.weight`, [spec.nEmbd, spec.nFf, x]));
      plan.push(w(`${b}ffn_down_exps.weight`, [spec.nFf, spec.nEmbd, x]));
      continue;
    }
    if (fused) plan.push(w(`${b}ffn_up.weight`, [spec.nEmbd, 2 * spec.nFf]));
    else if (layerNorm) {
      // starcoder2: up (+ bias) -> GELU -> down (+ bias), no gate.
      plan.push(w(`${b}ffn_up.weight`, [spec.nEmbd, spec.nFf]));
      plan.push(bias(`${b}ffn_up.bias`, spec.nFf));
    } else {
      plan.push(w(`${b}ffn_gate.weight`, [spec.nEmbd, spec.nFf]));
      plan.push(w(`${b}ffn_up.weight`, [spec.nEmbd, spec.nFf]));
    }
    plan.push(w(`${b}ffn_down.weight`, [spec.nFf, spec.nEmbd]));
    if (layerNorm) plan.push(bias(`${b}ffn_down.bias`, spec.nEmbd));
    if (postNorms) plan.push(norm(`${b}post_ffw_norm.weight`));
  }
  plan.push(norm('output_norm.weight'));
  if (spec.architecture === 'starcoder2') plan.push(bias('output_norm.bias', spec.nEmbd));
  // gemma's LM head is always the embedding matrix.
  if (!spec.tiedOutput && !spec.architecture.startsWith('gemma')) plan.push(w('output.weight', [spec.nEmbd, nVocab]));
  return plan;
}

/** The tensor's bytes, a chunk of whole rows at a time. */
function* tensorChunks(p: TensorPlan, seed: number, convert: Converter): Generator<Uint8Array> {
  const rowLen = p.dims[0]!;
  const rows = p.dims.slice(1).reduce((a, b) => a * b, 1);
  const rowsPerChunk = Math.max(1, Math.floor(CHUNK_ELEMENTS / rowLen));
  const rand = mulberry32(tensorSeed(seed, p.name));
  const buf = new Float32Array(rowsPerChunk * rowLen);
  for (let r = 0; r < rows; r += rowsPerChunk) {
    const n = Math.min(rowsPerChunk, rows - r) * rowLen;
    const chunk = n === buf.length ? buf : buf.subarray(0, n);
    fillNormal(chunk, rand, p.mean, p.std);
    yield p.type === GgmlType.F32 ? new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength) : convert(chunk);
  }
}

/** Characters generated pieces are built from: ▁ (SentencePiece's space), letters, digits, punctuation. */
const PIECE_ALPHABET = ['▁', ...'etaoinshrdlucmfwypvbgkjqxzETAOINSHRDLUCMFWYPVBGKJQXZ0123456789.,;:!?\'"()[]{}<>=+-*/_#@&%$|\\^~`'];

/**
 * A SentencePiece-style vocabulary valid for llama.cpp's SPM tokenizer: <unk>, <s>, </s>, the 256
 * byte-fallback tokens <0x00>..<0xFF>, then pieces in order of length (every prefix of a piece
 * is itself a piece, so merges can reach it) with decreasing scores.
 */
export function generateSpmVocab(nVocab: number): { tokens: string[]; scores: number[]; types: number[] } {
  const special = 3;
  const bytes = 256;
  if (!Number.isInteger(nVocab) || nVocab < special + bytes) {
    throw new Error(`synthetic vocabulary: nVocab must be an integer ≥ ${special + bytes} (3 control + 256 byte tokens), got ${nVocab}`);
  }
  const tokens = ['<unk>', '<s>', '</s>'];
  const types = [TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_CONTROL];
  const scores = [0, 0, 0];
  for (let b = 0; b < bytes; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
    types.push(TOKEN_BYTE);
    scores.push(0);
  }
  const taken = new Set(tokens);
  let level = [''];
  while (tokens.length < nVocab) {
    const next: string[] = [];
    for (const prefix of level) {
      for (const ch of PIECE_ALPHABET) {
        if (tokens.length >= nVocab) break;
        const piece = prefix + ch;
        next.push(piece);
        if (taken.has(piece)) continue; // e.g. "<s>" spelled from pieces
        taken.add(piece);
        tokens.push(piece);
        types.push(TOKEN_NORMAL);
        scores.push(-(tokens.length - special - bytes));
      }
    }
    level = next;
  }
  return { tokens, scores, types };
}

function generatedVocabKvs(nVocab: number): GgufWriteKv[] {
  const v = generateSpmVocab(nVocab);
  return [
    { key: 'tokenizer.ggml.model', type: T.STRING, value: 'llama' },
    { key: 'tokenizer.ggml.pre', type: T.STRING, value: 'default' },
    { key: 'tokenizer.ggml.tokens', type: T.ARRAY, value: { itemType: T.STRING, items: v.tokens } },
    { key: 'tokenizer.ggml.scores', type: T.ARRAY, value: { itemType: T.FLOAT32, items: v.scores } },
    { key: 'tokenizer.ggml.token_type', type: T.ARRAY, value: { itemType: T.INT32, items: v.types } },
    { key: 'tokenizer.ggml.unknown_token_id', type: T.UINT32, value: 0 },
    { key: 'tokenizer.ggml.bos_token_id', type: T.UINT32, value: 1 },
    { key: 'tokenizer.ggml.eos_token_id', type: T.UINT32, value: 2 },
    { key: 'tokenizer.ggml.add_bos_token', type: T.BOOL, value: true },
    { key: 'tokenizer.ggml.add_eos_token', type: T.BOOL, value: false },
  ];
}

/** The tokenizer.* metadata of a vocabulary GGUF file, and its vocabulary size. */
function copiedVocabKvs(path: string): { kvs: GgufWriteKv[]; nVocab: number } {
  const file = readGguf(path);
  const nVocab = metaStringArray(file, 'tokenizer.ggml.tokens').length;
  const kvs = [...file.kv.values()]
    .filter((kv) => kv.key.startsWith('tokenizer.'))
    .map(({ key, type, value }) => ({ key, type, value }));
  return { kvs, nVocab };
}

function headDimOf(spec: SyntheticModelSpec): number {
  return spec.headDim ?? spec.nEmbd / spec.nHeads;
}

function checkSpec(spec: SyntheticModelSpec): void {
  const positive = ['nLayers', 'nEmbd', 'nHeads', 'nKvHeads', 'nFf', 'contextLength'] as const;
  for (const k of positive) {
    if (!Number.isSafeInteger(spec[k]) || spec[k] < 1) throw new Error(`synthetic model: ${k} must be a positive integer, got ${spec[k]}`);
  }
  if (spec.headDim === undefined && spec.nEmbd % spec.nHeads !== 0) throw new Error(`synthetic model: nHeads ${spec.nHeads} must divide nEmbd ${spec.nEmbd}`);
  if (spec.headDim !== undefined && (!Number.isSafeInteger(spec.headDim) || spec.headDim < 2)) throw new Error(`synthetic model: headDim must be an integer ≥ 2, got ${spec.headDim}`);
  if (spec.nHeads % spec.nKvHeads !== 0) throw new Error(`synthetic model: nKvHeads ${spec.nKvHeads} must divide nHeads ${spec.nHeads}`);
  if (headDimOf(spec) % 2 !== 0) throw new Error(`synthetic model: head dimension ${headDimOf(spec)} must be even (RoPE rotates pairs)`);
}

/**
 * Writes a synthetic llama/qwen2 GGUF model to `path` and returns where everything landed.
 * Deterministic: the same spec gives the same bytes.
 */
export function writeSyntheticModel(path: string, spec: SyntheticModelSpec): GgufLayout {
  checkSpec(spec);
  let vocabKvs: GgufWriteKv[];
  let nVocab: number;
  if (spec.vocabFrom) {
    const copied = copiedVocabKvs(spec.vocabFrom);
    if (spec.nVocab !== undefined && spec.nVocab !== copied.nVocab) {
      throw new Error(`synthetic model: nVocab ${spec.nVocab} differs from the ${copied.nVocab} tokens of ${spec.vocabFrom}`);
    }
    vocabKvs = copied.kvs;
    nVocab = copied.nVocab;
  } else {
    if (spec.nVocab === undefined) throw new Error('synthetic model: nVocab is required without vocabFrom');
    nVocab = spec.nVocab;
    vocabKvs = generatedVocabKvs(nVocab);
  }

  const typeInfo = ggmlTypeInfo(spec.weightType);
  if (!typeInfo) throw new Error(`synthetic model: unknown weight type ${spec.weightType}`);
  const plan = planTensors(spec, nVocab);
  for (const p of plan) {
    const info = ggmlTypeInfo(p.type)!;
    if (p.dims[0]! % info.blockSize !== 0) {
      throw new Error(`synthetic model: tensor ${p.name} has rows of ${p.dims[0]} values, not a multiple of ${info.name}'s block size ${info.blockSize}`);
    }
  }
  // Resolve the converters before writing anything, so a missing quantizer fails fast.
  const converters = new Map<GgmlType, Converter>();
  for (const p of plan) {
    if (p.type !== GgmlType.F32 && !converters.has(p.type)) converters.set(p.type, converterFor(p.type));
  }
  // F32 tensors are written as generated (tensorChunks never converts them).
  const convertFor = (type: GgmlType): Converter => converters.get(type) ?? ((src) => new Uint8Array(src.buffer, src.byteOffset, src.byteLength));

  const arch = spec.architecture;
  const isQwen = arch === 'qwen2' || arch === 'qwen3';
  const kv: GgufWriteKv[] = [
    { key: 'general.architecture', type: T.STRING, value: arch },
    { key: 'general.name', type: T.STRING, value: spec.name ?? `synthetic-${arch}` },
    { key: 'general.file_type', type: T.UINT32, value: FILE_TYPE[spec.weightType] ?? 0 },
    ...(typeInfo.blockSize > 1 ? [{ key: 'general.quantization_version', type: T.UINT32, value: 2 }] : []),
    { key: `${arch}.block_count`, type: T.UINT32, value: spec.nLayers },
    { key: `${arch}.context_length`, type: T.UINT32, value: spec.contextLength },
    { key: `${arch}.embedding_length`, type: T.UINT32, value: spec.nEmbd },
    { key: `${arch}.feed_forward_length`, type: T.UINT32, value: spec.nFf * (arch === 'qwen3moe' ? (spec.nExpertUsed ?? 2) : 1) },
    ...(spec.slidingWindow !== undefined ? [{ key: `${arch}.attention.sliding_window`, type: T.UINT32, value: spec.slidingWindow }] : []),
    ...(arch === 'qwen3moe' ? [
      { key: `${arch}.expert_count`, type: T.UINT32, value: spec.nExpert ?? 8 },
      { key: `${arch}.expert_used_count`, type: T.UINT32, value: spec.nExpertUsed ?? 2 },
      { key: `${arch}.expert_feed_forward_length`, type: T.UINT32, value: spec.nFf },
    ] : []),
    { key: `${arch}.attention.head_count`, type: T.UINT32, value: spec.nHeads },
    { key: `${arch}.attention.head_count_kv`, type: T.UINT32, value: spec.nKvHeads },
    { key: `${arch}.attention.${arch === 'starcoder2' ? 'layer_norm_epsilon' : 'layer_norm_rms_epsilon'}`, type: T.FLOAT32, value: spec.normEps ?? (isQwen ? 1e-6 : 1e-5) },
    { key: `${arch}.rope.freq_base`, type: T.FLOAT32, value: spec.ropeFreqBase ?? (isQwen ? 1e6 : 10000) },
    { key: `${arch}.rope.dimension_count`, type: T.UINT32, value: spec.ropeDims ?? headDimOf(spec) },
    ...(spec.headDim !== undefined ? [
      { key: `${arch}.attention.key_length`, type: T.UINT32, value: spec.headDim },
      { key: `${arch}.attention.value_length`, type: T.UINT32, value: spec.headDim },
    ] : []),
    ...vocabKvs,
  ];
  const tensors: GgufWriteTensor[] = plan.map((p) => ({
    name: p.name,
    dims: p.dims,
    type: p.type,
    data: () => tensorChunks(p, spec.seed, convertFor(p.type)),
  }));
  return writeGguf(path, { version: 3, kv, tensors });
}
