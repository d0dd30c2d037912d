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
export type ArchFamily = 'llama' | 'qwen2' | 'opt' | PlannedFamily;

/**
 * Families the planner knows by shape (presets, GGUF headers), whatever the runtime executes:
 * qwen3 (llama-like, q/k norms), qwen3moe (attention + routed experts, see MoeShape), gemma*
 * (GeGLU: gate/up/down like SwiGLU; head dim ≠ d/heads), phi3 (fused QKV and gate-up, same
 * sizes), starcoder2 (LayerNorm, plain GELU MLP: up and down, no gate).
 */
export type PlannedFamily = 'qwen3' | 'qwen3moe' | 'starcoder2' | 'gemma' | 'gemma2' | 'gemma3' | 'phi3';

/** Whether the family's FFN has a gate matrix (SwiGLU/GeGLU) or is plain up → act → down. */
export function ffnGated(family: ArchFamily): boolean {
  return family !== 'opt' && family !== 'starcoder2';
}

/**
 * Mixture-of-experts FFN of every layer (llama.cpp's expert_count, expert_used_count,
 * expert_feed_forward_length, expert_shared_feed_forward_length). In an MoE shape `nFf` is the
 * expert FFN size and the ffn_* weight roles are ONE expert's matrices.
 */
export interface MoeShape {
  /** Experts per layer (E). */
  nExpert: number;
  /** Experts each token is routed to (k, top-k). */
  nExpertUsed: number;
  /** Shared-expert FFN size (0 = none). */
  sharedFf: number;
  /**
   * Per layer, per expert: the probability that one token is routed to the expert (each row sums
   * to k), from a profiling run (--expert-stats); absent = uniform routing, k/E each.
   */
  activation?: number[][];
  /** Where `activation` came from (a file path), or 'uniform'. */
  activationSource?: string;
}

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
  /** Mixture-of-experts FFN (absent = dense). */
  moe?: MoeShape;
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
    case 'ffn_gate': return ffnGated(shape.family) ? d * shape.nFf : 0;
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

const FFN_ROLES: WeightRole[] = ['ffn_gate', 'ffn_up', 'ffn_down'];

/** Bytes of one expert's FFN (gate, up, down) — of the dense FFN when the shape has no experts. */
export function expertBytes(shape: ModelShape): number {
  let sum = 0;
  for (const r of FFN_ROLES) sum += weightBytes(shape, r);
  return sum;
}

/** Router (ffn_gate_inp, d × E): llama.cpp's quantisations keep it in F32. */
export function routerBytes(shape: ModelShape): number {
  return shape.moe ? shape.nEmbd * shape.moe.nExpert * 4 : 0;
}

/** Shared expert (gate, up, down of size sharedFf) in the FFN weights' format. */
export function sharedExpertBytes(shape: ModelShape): number {
  if (!shape.moe || shape.moe.sharedFf === 0) return 0;
  const f = shape.moe.sharedFf;
  return shape.nEmbd * f * (formatBytesPerElement(shape.weightFormats.ffn_gate ?? 'F16') + formatBytesPerElement(shape.weightFormats.ffn_up ?? 'F16') + formatBytesPerElement(shape.weightFormats.ffn_down ?? 'F16'));
}

/**
 * Weight bytes of one decoder layer (norms and biases are < 0.1 % and counted as 4·d·4 bytes).
 * MoE: attention + router + shared expert + all E experts.
 */
export function layerWeightBytes(shape: ModelShape): number {
  let sum = 0;
  for (const r of LAYER_ROLES) sum += weightBytes(shape, r);
  if (shape.moe) sum += (shape.moe.nExpert - 1) * expertBytes(shape) + routerBytes(shape) + sharedExpertBytes(shape);
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
  if (shape.moe) validateMoe(shape.name, shape.nLayers, shape.moe);
}

/** Checks an MoE description (and its activation table, when given); throws naming the field. */
export function validateMoe(name: string, nLayers: number, moe: MoeShape): void {
  const int = (k: 'nExpert' | 'nExpertUsed' | 'sharedFf', min: number, max: number): void => {
    const v = moe[k];
    if (!Number.isInteger(v) || v < min || v > max) throw new Error(`model shape '${name}': moe.${k} must be an integer in [${min}, ${max}], got ${String(v)}`);
  };
  int('nExpert', 1, 4096);
  int('nExpertUsed', 1, moe.nExpert);
  int('sharedFf', 0, 1 << 22);
  if (moe.activation) {
    if (moe.activation.length !== nLayers) throw new Error(`model shape '${name}': moe.activation has ${moe.activation.length} layers, the model ${nLayers}`);
    moe.activation.forEach((row, l) => {
      if (row.length !== moe.nExpert) throw new Error(`model shape '${name}': moe.activation[${l}] has ${row.length} experts, the model ${moe.nExpert}`);
      for (let e = 0; e < row.length; e++) {
        const p = row[e]!;
        if (!Number.isFinite(p) || p < 0 || p > 1) throw new Error(`model shape '${name}': moe.activation[${l}][${e}] must be a probability in [0, 1], got ${p}`);
      }
    });
  }
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
  // Fused matrices (phi3): Q, K and V share attn_qkv's format, the gate shares ffn_up's.
  const qkv = tensorType('blk.0.attn_qkv.weight');
  if (qkv) for (const role of ['attn_q', 'attn_k', 'attn_v'] as const) formats[role] ??= qkv;
  if (hp.fusedGateUp && formats.ffn_up) formats.ffn_gate ??= formats.ffn_up;
  // MoE: the FFN roles are one expert's matrices (see MoeShape).
  if (hp.nExpert > 0) {
    for (const [role, name] of [['ffn_gate', 'ffn_gate_exps'], ['ffn_up', 'ffn_up_exps'], ['ffn_down', 'ffn_down_exps']] as const) {
      const t = tensorType(`blk.0.${name}.weight`);
      if (t) formats[role] = t;
    }
  }
  if (hp.tiedOutput && formats.token_embd) formats.output = formats.token_embd;
  const shape: ModelShape = {
    name: hp.name,
    family: hp.architecture,
    nLayers: hp.nLayers, nEmbd: hp.nEmbd, nHeads: hp.nHeads, nKvHeads: hp.nKvHeads, headDim: hp.headDim,
    nFf: hp.nFf, nVocab: hp.nVocab, contextLength: hp.contextLength,
    weightFormats: formats,
    kvFormat: 'F16',
    tiedEmbeddings: hp.tiedOutput,
    ...(hp.nExpert > 0 ? { moe: { nExpert: hp.nExpert, nExpertUsed: hp.nExpertUsed, sharedFf: 0 } } : {}),
    source: { kind: 'gguf', citation: `GGUF header of ${file.path}`, path: file.path },
  };
  validateShape(shape);
  return shape;
}

/** The shape of a GGUF model: hyperparameters read and checked by readHparams, formats from tensors. */
export function shapeFromGguf(file: GgufFile): ModelShape {
  return shapeFromHparams(readHparams(file), file);
}
