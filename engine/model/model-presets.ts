// Model presets by architecture only (no weights): the shapes of the papers' models and of common
// code models, from their public configuration files. `--model NAME[:FORMAT]`, e.g.
// 'llama-3.1-8b:Q4_K', sets every weight's format (default F16, as the papers run them).

import { ffnGated, validateShape, type ArchFamily, type ModelShape, type MoeShape, type WeightRole } from './shape';

interface PresetDef {
  key: string; name: string; family: ArchFamily; nLayers: number; nEmbd: number; nHeads: number; nKvHeads: number;
  /** MoE: the expert FFN size (moe_intermediate_size). */
  nFf: number; nVocab: number; contextLength: number; tied: boolean; citation: string;
  /** config.json head_dim where it differs from nEmbd / nHeads (Qwen3, Gemma). */
  headDim?: number;
  /** Routed experts (num_experts, num_experts_per_tok, shared_expert_intermediate_size). */
  moe?: Pick<MoeShape, 'nExpert' | 'nExpertUsed' | 'sharedFf'>;
}

const HF = (repo: string): string => `huggingface.co/${repo}/blob/main/config.json`;

const OPT_CITE = 'OPT paper (Zhang et al. 2022) Table 1 / facebook/opt-* config.json';
export const MODEL_PRESET_DEFS: PresetDef[] = [
  { key: 'opt-6.7b', name: 'OPT-6.7B', family: 'opt', nLayers: 32, nEmbd: 4096, nHeads: 32, nKvHeads: 32, nFf: 16384, nVocab: 50272, contextLength: 2048, tied: true, citation: OPT_CITE },
  { key: 'opt-13b', name: 'OPT-13B', family: 'opt', nLayers: 40, nEmbd: 5120, nHeads: 40, nKvHeads: 40, nFf: 20480, nVocab: 50272, contextLength: 2048, tied: true, citation: OPT_CITE },
  { key: 'opt-30b', name: 'OPT-30B', family: 'opt', nLayers: 48, nEmbd: 7168, nHeads: 56, nKvHeads: 56, nFf: 28672, nVocab: 50272, contextLength: 2048, tied: true, citation: `${OPT_CITE}; paper 000 §3 (e = 7168, FFN 28672, 48 layers)` },
  { key: 'opt-66b', name: 'OPT-66B', family: 'opt', nLayers: 64, nEmbd: 9216, nHeads: 72, nKvHeads: 72, nFf: 36864, nVocab: 50272, contextLength: 2048, tied: true, citation: OPT_CITE },
  { key: 'opt-175b', name: 'OPT-175B', family: 'opt', nLayers: 96, nEmbd: 12288, nHeads: 96, nKvHeads: 96, nFf: 49152, nVocab: 50272, contextLength: 2048, tied: true, citation: `${OPT_CITE}; LIA §2 (d_m = 12288)` },
  { key: 'llama-2-7b', name: 'Llama-2-7B', family: 'llama', nLayers: 32, nEmbd: 4096, nHeads: 32, nKvHeads: 32, nFf: 11008, nVocab: 32000, contextLength: 4096, tied: false, citation: 'meta-llama/Llama-2-7b-hf config.json' },
  { key: 'llama-3.1-8b', name: 'Llama-3.1-8B', family: 'llama', nLayers: 32, nEmbd: 4096, nHeads: 32, nKvHeads: 8, nFf: 14336, nVocab: 128256, contextLength: 131072, tied: false, citation: 'meta-llama/Llama-3.1-8B config.json' },
  { key: 'llama-3.1-70b', name: 'Llama-3.1-70B', family: 'llama', nLayers: 80, nEmbd: 8192, nHeads: 64, nKvHeads: 8, nFf: 28672, nVocab: 128256, contextLength: 131072, tied: false, citation: 'meta-llama/Llama-3.1-70B config.json' },
  { key: 'codellama-34b', name: 'CodeLlama-34B', family: 'llama', nLayers: 48, nEmbd: 8192, nHeads: 64, nKvHeads: 8, nFf: 22016, nVocab: 32000, contextLength: 16384, tied: false, citation: 'codellama/CodeLlama-34b-hf config.json' },
  { key: 'qwen2.5-coder-1.5b', name: 'Qwen2.5-Coder-1.5B', family: 'qwen2', nLayers: 28, nEmbd: 1536, nHeads: 12, nKvHeads: 2, nFf: 8960, nVocab: 151936, contextLength: 32768, tied: true, citation: 'Qwen/Qwen2.5-Coder-1.5B config.json' },
  { key: 'qwen2.5-coder-7b', name: 'Qwen2.5-Coder-7B', family: 'qwen2', nLayers: 28, nEmbd: 3584, nHeads: 28, nKvHeads: 4, nFf: 18944, nVocab: 152064, contextLength: 32768, tied: false, citation: 'Qwen/Qwen2.5-Coder-7B config.json' },
  { key: 'qwen2.5-coder-32b', name: 'Qwen2.5-Coder-32B', family: 'qwen2', nLayers: 64, nEmbd: 5120, nHeads: 40, nKvHeads: 8, nFf: 27648, nVocab: 152064, contextLength: 32768, tied: false, citation: 'Qwen/Qwen2.5-Coder-32B config.json' },
  { key: 'deepseek-coder-1.3b', name: 'DeepSeek-Coder-1.3B', family: 'llama', nLayers: 24, nEmbd: 2048, nHeads: 16, nKvHeads: 16, nFf: 5504, nVocab: 32256, contextLength: 16384, tied: false, citation: 'deepseek-ai/deepseek-coder-1.3b-base config.json' },
  { key: 'deepseek-coder-6.7b', name: 'DeepSeek-Coder-6.7B', family: 'llama', nLayers: 32, nEmbd: 4096, nHeads: 32, nKvHeads: 32, nFf: 11008, nVocab: 32256, contextLength: 16384, tied: false, citation: 'deepseek-ai/deepseek-coder-6.7b-base config.json' },
  // Qwen3 / Qwen3-Coder (qwen3: q/k RMS norms; qwen3moe: 128 routed experts, top-8, no shared expert).
  { key: 'qwen3-coder-30b-a3b', name: 'Qwen3-Coder-30B-A3B', family: 'qwen3moe', nLayers: 48, nEmbd: 2048, nHeads: 32, nKvHeads: 4, headDim: 128, nFf: 768, nVocab: 151936, contextLength: 262144, tied: false,
    moe: { nExpert: 128, nExpertUsed: 8, sharedFf: 0 },
    citation: `${HF('Qwen/Qwen3-Coder-30B-A3B-Instruct')} (hidden_size 2048, num_hidden_layers 48, num_experts 128, num_experts_per_tok 8, moe_intermediate_size 768, shared_expert_intermediate_size 0, head_dim 128, 32/4 heads, vocab 151936, max_position_embeddings 262144, tie_word_embeddings false)` },
  { key: 'qwen3-4b', name: 'Qwen3-4B', family: 'qwen3', nLayers: 36, nEmbd: 2560, nHeads: 32, nKvHeads: 8, headDim: 128, nFf: 9728, nVocab: 151936, contextLength: 40960, tied: true, citation: HF('Qwen/Qwen3-4B') },
  { key: 'qwen3-8b', name: 'Qwen3-8B', family: 'qwen3', nLayers: 36, nEmbd: 4096, nHeads: 32, nKvHeads: 8, headDim: 128, nFf: 12288, nVocab: 151936, contextLength: 40960, tied: false, citation: HF('Qwen/Qwen3-8B') },
  // StarCoder2: LayerNorm with bias, GELU MLP (c_fc, c_proj: no gate); 3B/7B leave tie_word_embeddings at its default (true).
  { key: 'starcoder2-3b', name: 'StarCoder2-3B', family: 'starcoder2', nLayers: 30, nEmbd: 3072, nHeads: 24, nKvHeads: 2, nFf: 12288, nVocab: 49152, contextLength: 16384, tied: true, citation: HF('bigcode/starcoder2-3b') },
  { key: 'starcoder2-7b', name: 'StarCoder2-7B', family: 'starcoder2', nLayers: 32, nEmbd: 4608, nHeads: 36, nKvHeads: 4, nFf: 18432, nVocab: 49152, contextLength: 16384, tied: true, citation: HF('bigcode/starcoder2-7b') },
  { key: 'starcoder2-15b', name: 'StarCoder2-15B', family: 'starcoder2', nLayers: 40, nEmbd: 6144, nHeads: 48, nKvHeads: 4, nFf: 24576, nVocab: 49152, contextLength: 16384, tied: false, citation: HF('bigcode/starcoder2-15b') },
  // Gemma: head_dim 256 (≠ d/heads), tied embeddings, GeGLU (gate/up/down).
  { key: 'codegemma-7b', name: 'CodeGemma-7B', family: 'gemma', nLayers: 28, nEmbd: 3072, nHeads: 16, nKvHeads: 16, headDim: 256, nFf: 24576, nVocab: 256000, contextLength: 8192, tied: true, citation: HF('google/codegemma-7b') },
  { key: 'gemma-2-9b', name: 'Gemma-2-9B', family: 'gemma2', nLayers: 42, nEmbd: 3584, nHeads: 16, nKvHeads: 8, headDim: 256, nFf: 14336, nVocab: 256000, contextLength: 8192, tied: true, citation: HF('google/gemma-2-9b') },
  { key: 'gemma-3-12b', name: 'Gemma-3-12B', family: 'gemma3', nLayers: 48, nEmbd: 3840, nHeads: 16, nKvHeads: 8, headDim: 256, nFf: 15360, nVocab: 262208, contextLength: 131072, tied: true, citation: `${HF('google/gemma-3-12b-pt')} (text_config)` },
  // Phi-3: fused qkv_proj and gate_up_proj (same sizes as separate matrices).
  { key: 'phi-3-mini', name: 'Phi-3-mini-4k', family: 'phi3', nLayers: 32, nEmbd: 3072, nHeads: 32, nKvHeads: 32, nFf: 8192, nVocab: 32064, contextLength: 4096, tied: false, citation: HF('microsoft/Phi-3-mini-4k-instruct') },
  { key: 'phi-3-medium', name: 'Phi-3-medium-4k', family: 'phi3', nLayers: 40, nEmbd: 5120, nHeads: 40, nKvHeads: 10, nFf: 17920, nVocab: 32064, contextLength: 4096, tied: false, citation: HF('microsoft/Phi-3-medium-4k-instruct') },
  { key: 'deepseek-coder-33b', name: 'DeepSeek-Coder-33B', family: 'llama', nLayers: 62, nEmbd: 7168, nHeads: 56, nKvHeads: 8, nFf: 19200, nVocab: 32256, contextLength: 16384, tied: false, citation: 'deepseek-ai/deepseek-coder-33b-base config.json' },
];

const ROLES: WeightRole[] = ['attn_q', 'attn_k', 'attn_v', 'attn_output', 'ffn_gate', 'ffn_up', 'ffn_down', 'token_embd', 'output'];

/** A model preset by key, optionally ':FORMAT' for the weight format (e.g. 'llama-3.1-8b:Q4_K'). */
export function modelPreset(spec: string): ModelShape {
  const [rawKey, rawFormat] = spec.split(':');
  const key = (rawKey ?? '').trim().toLowerCase();
  const def = MODEL_PRESET_DEFS.find((d) => d.key === key);
  if (!def) throw new Error(`unknown model preset '${rawKey}' (presets: ${MODEL_PRESET_DEFS.map((d) => d.key).join(', ')})`);
  const format = (rawFormat ?? 'F16').toUpperCase();
  const weightFormats: Partial<Record<WeightRole, string>> = {};
  for (const r of ROLES) {
    if (r === 'ffn_gate' && !ffnGated(def.family)) continue;
    // Decision: every weight, token embedding and LM head included, takes the preset's format
    // (llama.cpp's quantisations store them in the same or a nearby type).
    weightFormats[r] = format;
  }
  const shape: ModelShape = {
    name: rawFormat ? `${def.name} (${format})` : def.name,
    family: def.family,
    nLayers: def.nLayers, nEmbd: def.nEmbd, nHeads: def.nHeads, nKvHeads: def.nKvHeads,
    headDim: def.headDim ?? def.nEmbd / def.nHeads, nFf: def.nFf, nVocab: def.nVocab, contextLength: def.contextLength,
    weightFormats, kvFormat: 'F16', tiedEmbeddings: def.tied,
    source: { kind: 'preset', citation: def.citation },
    ...(def.moe ? { moe: { ...def.moe } } : {}),
  };
  validateShape(shape);
  return shape;
}
