// ModelShape: the architecture-level description of a model that the cost model and the planner
// need — sizes, op structure and storage formats, no weights. Built from a GGUF header
// (shapeFromGguf) or from a preset (engine/model/model-presets.ts).

import type { GgufFile } from './gguf/types';
import { ggmlTypeName } from './ggml-types';
import { readHparams, type ModelHparams } from './hparams';

/**
 * Op structure of a decoder layer.
 * - 'llama' (Llama, Mistral, CodeLlama, DeepSeek-Coder, TinyLlama) and 'qwen2': RMSNorm, RoPE,
 *   SwiGLU FFN (gate, up, down), grouped-query attention.
 * - 'opt': LayerNorm, learned positions (no RoPE), FFN FC1 → ReLU → FC2 (no gate), biases.
 */
export type ArchFamily = 'llama' | 'qwen2' | 'opt';

/** The weight matrices of a decoder layer plus the model-level ones. */
export type WeightRole =
  | 'attn_q' | 'attn_k' | 'attn_v' | 'attn_output'
  | 'ffn_gate' | 'ffn_up' | 'ffn_down'
  | 'token_embd' | 'output';

export interface ModelShape {
  name: string;
  family: ArchFamily;
  nLayers: number;
  /** Hidden size d_model. */
  nEmbd: number;
  nHeads: number;
  /** KV heads (== nHeads without GQA). */
  nKvHeads: number;
  headDim: number;
  /** FFN inner size (OPT: 4·d). */
  nFf: number;
  nVocab: number;
  /** Training context length. */
  contextLength: number;
  /** Storage format (ggml type name) of each weight role; roles absent from the family are omitted. */
  weightFormats: Partial<Record<WeightRole, string>>;
  /** KV-cache element format ('F16' unless the runtime says otherwise). */
  kvFormat: string;
  /** Whether the LM head shares the token-embedding matrix. */
  tiedEmbeddings: boolean;
  /** Where the shape came from. */
  source: { kind: 'gguf' | 'preset'; citation: string; path?: string };
}

/** Bytes per element of a ggml format name, for plain formats and block formats alike. */
export function formatBytesPerElement(format: string): number {
  switch (format.toUpperCase()) {
    case 'F32': return 4;
    case 'F16': case 'BF16': return 2;
    case 'Q8_0': return 34 / 32;
    case 'Q4_0': return 18 / 32;
    case 'Q4_1': return 20 / 32;
    case 'Q5_0': return 22 / 32;
    case 'Q5_1': return 24 / 32;
    case 'Q4_K': return 144 / 256;
    case 'Q5_K': return 176 / 256;
    case 'Q6_K': return 210 / 256;
    case 'Q2_K': return 84 / 256;
    case 'Q3_K': return 110 / 256;
    default: throw new Error(`unknown weight format '${format}'`);
  }
}

/** Rows × columns of each weight role of one layer (or of the model for embd/output). */
export function weightElements(shape: ModelShape, role: WeightRole): number {
  const d = shape.nEmbd;
  const kv = shape.nKvHeads * shape.headDim;
  const q = shape.nHeads * shape.headDim;
  switch (role) {
    case 'attn_q': return d * q;
    case 'attn_k': return d * kv;
    case 'attn_v': return d * kv;
    case 'attn_output': return q * d;
    case 'ffn_gate': return shape.family === 'opt' ? 0 : d * shape.nFf;
    case 'ffn_up': return d * shape.nFf;
    case 'ffn_down': return shape.nFf * d;
    case 'token_embd': return shape.nVocab * d;
    case 'output': return shape.nVocab * d;
  }
}

/** Bytes of one weight role in its stored format. */
export function weightBytes(shape: ModelShape, role: WeightRole): number {
  const n = weightElements(shape, role);
  if (n === 0) return 0;
  return n * formatBytesPerElement(shape.weightFormats[role] ?? 'F16');
}

const LAYER_ROLES: WeightRole[] = ['attn_q', 'attn_k', 'attn_v', 'attn_output', 'ffn_gate', 'ffn_up', 'ffn_down'];

/** Weight bytes of one decoder layer (norms and biases are < 0.1 % and counted as 4·d·4 bytes). */
export function layerWeightBytes(shape: ModelShape): number {
  let sum = 0;
  for (const r of LAYER_ROLES) sum += weightBytes(shape, r);
  return sum + 16 * shape.nEmbd;
}

/** KV-cache bytes per token over all layers (K and V). */
export function kvBytesPerToken(shape: ModelShape): number {
  return 2 * shape.nLayers * shape.nKvHeads * shape.headDim * formatBytesPerElement(shape.kvFormat);
}

/** Total weight bytes: layers + embedding + LM head (once when tied). */
export function modelWeightBytes(shape: ModelShape): number {
  const head = shape.tiedEmbeddings ? 0 : weightBytes(shape, 'output');
  return shape.nLayers * layerWeightBytes(shape) + weightBytes(shape, 'token_embd') + head;
}

/** Checks a shape's numbers; throws naming the first bad field. */
export function validateShape(shape: ModelShape): void {
  // Decision: limits well above every published model, low enough that plans stay small
  // (a plan holds one entry per layer and op).
  const limits: [keyof ModelShape, number][] = [
    ['nLayers', 1024], ['nEmbd', 1 << 20], ['nHeads', 4096], ['nKvHeads', 4096], ['headDim', 4096],
    ['nFf', 1 << 22], ['nVocab', 1 << 24], ['contextLength', 1 << 26],
  ];
  for (const [k, max] of limits) {
    const v = shape[k];
    if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0 || v > max) {
      throw new Error(`model shape '${shape.name}': field ${String(k)} must be an integer in [1, ${max}], got ${String(v)}`);
    }
  }
  if (shape.nHeads % shape.nKvHeads !== 0) {
    throw new Error(`model shape '${shape.name}': nHeads (${shape.nHeads}) must be a multiple of nKvHeads (${shape.nKvHeads})`);
  }
  for (const [role, f] of Object.entries(shape.weightFormats)) {
    try { formatBytesPerElement(f!); } catch { throw new Error(`model shape '${shape.name}': weight ${role} has unsupported format '${f}'`); }
  }
  formatBytesPerElement(shape.kvFormat);
}

// ---- GGUF ----------------------------------------------------------------------------------

/** The cost-model shape from hyperparameters (engine/model/hparams.ts) and the file's tensor types. */
export function shapeFromHparams(hp: ModelHparams, file: GgufFile): ModelShape {
  const tensorType = (name: string): string | undefined => {
    const t = file.tensors.find((x) => x.name === name);
    return t ? ggmlTypeName(t.type) : undefined;
  };
  // Decision: formats can differ per layer in mixed quantisations (Q4_K_M mixes Q4_K and Q6_K);
  // the cost model uses layer 0's as representative, and the LM head's own type.
  const formats: Partial<Record<WeightRole, string>> = {};
  const map: [WeightRole, string][] = [
    ['attn_q', 'blk.0.attn_q.weight'], ['attn_k', 'blk.0.attn_k.weight'], ['attn_v', 'blk.0.attn_v.weight'],
    ['attn_output', 'blk.0.attn_output.weight'], ['ffn_gate', 'blk.0.ffn_gate.weight'], ['ffn_up', 'blk.0.ffn_up.weight'],
    ['ffn_down', 'blk.0.ffn_down.weight'], ['token_embd', 'token_embd.weight'], ['output', 'output.weight'],
  ];
  for (const [role, name] of map) { const t = tensorType(name); if (t) formats[role] = t; }
  if (hp.tiedOutput && formats.token_embd) formats.output = formats.token_embd;
  const shape: ModelShape = {
    name: hp.name,
    family: hp.architecture,
    nLayers: hp.nLayers, nEmbd: hp.nEmbd, nHeads: hp.nHeads, nKvHeads: hp.nKvHeads, headDim: hp.headDim,
    nFf: hp.nFf, nVocab: hp.nVocab, contextLength: hp.contextLength,
    weightFormats: formats,
    kvFormat: 'F16',
    tiedEmbeddings: hp.tiedOutput,
    source: { kind: 'gguf', citation: `GGUF header of ${file.path}`, path: file.path },
  };
  validateShape(shape);
  return shape;
}

/** The shape of a GGUF model: hyperparameters read and checked by readHparams, formats from tensors. */
export function shapeFromGguf(file: GgufFile): ModelShape {
  return shapeFromHparams(readHparams(file), file);
}
