// The model: its configuration and architecture variants, the memory check and the load of its
// weights (weights.cc), the sequences' KV (sequences.cc), the compiled forward pass (compile.cc)
// under a placement (placement.cc), and the step that runs it (forward.cc).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <set>
#include <stdexcept>
#include <tuple>

#include "kernels/float_fns.h"
#include "kernels/matmul.h"
#include "model/model.h"

namespace fulcrum {

namespace {


std::string mib(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

void check_range(const char* what, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    throw std::runtime_error(std::string("model config: ") + what + " = " + std::to_string(v) + " is outside [" +
                             std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

constexpr ArchVariant kVariants[] = {
    //                 qkv_bias qk_norm fused_gate_up norm             ffn              out_ffn_bias embd_scale post_norms
    {"llama",          false,   false,  false,        NormKind::Rms,   FfnKind::SwiGlu, false,       false,     false},
    {"qwen2",          true,    false,  false,        NormKind::Rms,   FfnKind::SwiGlu, false,       false,     false},
    {"qwen3",          false,   true,   false,        NormKind::Rms,   FfnKind::SwiGlu, false,       false,     false},
    {"phi3",           false,   false,  true,         NormKind::Rms,   FfnKind::SwiGlu, false,       false,     false},
    {"starcoder2",     true,    false,  false,        NormKind::Layer, FfnKind::Gelu,   true,        false,     false},
    {"gemma",          false,   false,  false,        NormKind::Rms,   FfnKind::GeGlu,  false,       true,      false},
    {"gemma2",         false,   false,  false,        NormKind::Rms,   FfnKind::GeGlu,  false,       true,      true},
    {"gemma3",         false,   true,   false,        NormKind::Rms,   FfnKind::GeGlu,  false,       true,      true},
    {"qwen3moe",       false,   true,   false,        NormKind::Rms,   FfnKind::Moe,    false,       false,     false},
};

}  // namespace

const ArchVariant* arch_variant(const std::string& name) {
  for (const ArchVariant& v : kVariants)
    if (name == v.name) return &v;
  return nullptr;
}

std::string supported_architectures() {
  std::string s;
  for (const ArchVariant& v : kVariants) s += (s.empty() ? "" : ", ") + std::string(v.name);
  return s;
}

Model::Model(const std::string& path, const std::vector<TensorEntry>& tensors, const ModelConfig& cfg) : cfg_(cfg) {
  if (op_kind_count() != static_cast<int>(OpKind::DeferredAttention) + 1)
    throw std::logic_error("op table: " + std::to_string(op_kind_count()) + " op kind names for " + std::to_string(static_cast<int>(OpKind::DeferredAttention) + 1) + " op kinds");
  variant_ = arch_variant(cfg_.arch);
  if (!variant_) throw std::runtime_error(path + ": architecture '" + cfg_.arch + "' is not supported (" + supported_architectures() + ")");
  check_range("n_layers", cfg_.n_layers, 1, 1024);
  check_range("n_embd", cfg_.n_embd, 1, 1 << 16);
  check_range("n_heads", cfg_.n_heads, 1, 1024);
  check_range("n_kv_heads", cfg_.n_kv_heads, 1, cfg_.n_heads);
  check_range("head_dim", cfg_.head_dim, 2, 1024);
  check_range("n_ff", cfg_.n_ff, 1, 1 << 18);
  check_range("n_vocab", cfg_.n_vocab, 1, 1 << 22);
  check_range("context_length", cfg_.context_length, 1, 1 << 22);
  check_range("batch_size", cfg_.batch_size, 1, 1 << 14);
  check_range("threads", cfg_.threads, 1, 512);
  // At least 8 positions a page, so the page tables (24 bytes a slot) stay below the pages' size.
  check_range("kv_page_tokens", cfg_.kv_page_tokens, 8, 4096);
  check_range("max_sequences", cfg_.max_sequences, 1, 4096);
  check_range("rope n_rot", cfg_.rope.n_rot, 2, cfg_.head_dim);
  if (cfg_.n_swa > 0 && static_cast<int64_t>(cfg_.swa_layers.size()) != cfg_.n_layers)
    throw std::runtime_error("model config: " + std::to_string(cfg_.swa_layers.size()) + " sliding-window layer flags for " + std::to_string(cfg_.n_layers) + " layers");
  if (cfg_.n_swa < 0 || !(cfg_.attn_softcap >= 0) || !(cfg_.final_softcap >= 0) || !(cfg_.attn_scale >= 0))
    throw std::runtime_error("model config: sliding window, soft-capping and attention scale must not be negative");
  if (cfg_.n_swa > 0 && !(cfg_.rope_swa.freq_base > 0 && cfg_.rope_swa.freq_scale > 0))
    throw std::runtime_error("model config: the sliding-window layers' RoPE base and scale must be positive");
  for (int64_t l = 0; l < cfg_.n_layers; ++l) layer_ropes_.push_back(rope_of(static_cast<int>(l)));
  if (variant_->ffn == FfnKind::Moe) {
    check_range("n_expert", cfg_.n_expert, 1, 4096);
    check_range("n_expert_used", cfg_.n_expert_used, 1, cfg_.n_expert);
  }
  if (cfg_.n_heads % cfg_.n_kv_heads != 0)
    throw std::runtime_error("model config: n_heads " + std::to_string(cfg_.n_heads) + " is not a multiple of n_kv_heads " +
                             std::to_string(cfg_.n_kv_heads));
  {
    const std::string refusal = kv_format_refusal(cfg_.kv_format, cfg_.head_dim);
    if (!refusal.empty()) throw std::runtime_error("model config: " + refusal);
  }
  if (cfg_.rope.n_rot % 2 != 0) throw std::runtime_error("model config: rope n_rot must be even, got " + std::to_string(cfg_.rope.n_rot));
  if (!(cfg_.norm_eps > 0) || !(cfg_.rope.freq_base > 0) || !(cfg_.rope.freq_scale > 0))
    throw std::runtime_error("model config: norm_eps, rope freq_base and freq_scale must be positive");
  cfg_.batch_size = std::min(cfg_.batch_size, cfg_.context_length);

  for (const TensorEntry& t : tensors) table_[t.name] = t;

  // Memory: weights (paged in from the map), KV cache and scratch, against what the OS can give.
  const int64_t E = cfg_.n_embd, QW = cfg_.n_heads * cfg_.head_dim, KVW = cfg_.n_kv_heads * cfg_.head_dim, F = cfg_.n_ff;
  const int64_t B = cfg_.batch_size;
  const uint64_t kv = kv_bytes() * static_cast<uint64_t>(cfg_.max_sequences);
  const int64_t max_w = std::max({E, QW, F});
  const uint64_t scratch = static_cast<uint64_t>(B) * (2 * E + 2 * QW + 2 * KVW + 2 * F) * 4 +
                           static_cast<uint64_t>(B) * max_w * 4 /* converted activations, upper bound */ +
                           static_cast<uint64_t>(std::max<int64_t>(cfg_.n_heads, cfg_.threads)) * cfg_.context_length * 4;
  uint64_t weights = 0;
  for (const TensorEntry& t : tensors) {
    const TypeTraits& tt = type_traits(t.type);
    if (!tt.name || tt.block_size <= 0) continue;  // reported when (if) the tensor is used
    uint64_t n = 1;
    for (int64_t d : t.dims)
      if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n) || n > (uint64_t{1} << 53))
        throw std::runtime_error(path + ": tensor '" + t.name + "' has more than 2^53 elements");
    weights += n / static_cast<uint64_t>(tt.block_size) * tt.type_size;
  }
  const uint64_t needed = weights + kv + scratch;
  uint64_t available = mem_available_bytes();
  if (cfg_.memory_limit_bytes > 0 && (available == 0 || cfg_.memory_limit_bytes < available)) available = cfg_.memory_limit_bytes;
  if (available > 0 && needed > available) {
    throw std::runtime_error(path + ": not enough memory: needs " + mib(needed) + " (weights " + mib(weights) + ", KV cache " + mib(kv) +
                             " for " + std::to_string(cfg_.context_length) + " positions, scratch " + mib(scratch) + ") but " +
                             mib(available) + " is available; lower the context length or the batch size, or use a smaller model");
  }

  file_ = std::make_unique<MappedFile>(path);

  token_embd_ = find("token_embd.weight", E, cfg_.n_vocab, true, false);
  output_norm_ = find("output_norm.weight", E, 1, true, false);
  output_norm_f_ = vector_f32(output_norm_, E);
  const bool layer_norm = variant_->norm == NormKind::Layer;
  if (layer_norm) output_norm_b_ = vector_f32(find("output_norm.bias", E, 1, true, false), E);
  if (table_.count("output.weight")) output_ = find("output.weight", E, cfg_.n_vocab, true, true);
  else output_ = find("token_embd.weight", E, cfg_.n_vocab, true, true);  // tied embeddings

  layers_.resize(static_cast<size_t>(cfg_.n_layers));
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    Layer& L = layers_[static_cast<size_t>(l)];
    const std::string p = "blk." + std::to_string(l) + ".";
    L.attn_norm = find(p + "attn_norm.weight", E, 1, true, false);
    if (table_.count(p + "attn_qkv.weight")) {
      const Weight& qkv = find(p + "attn_qkv.weight", E, QW + 2 * KVW, true, true);
      L.wq = rows_of(qkv, 0, QW, p + "attn_qkv.weight[q]");
      L.wk = rows_of(qkv, QW, KVW, p + "attn_qkv.weight[k]");
      L.wv = rows_of(qkv, QW + KVW, KVW, p + "attn_qkv.weight[v]");
    } else {
      L.wq = find(p + "attn_q.weight", E, QW, true, true);
      L.wk = find(p + "attn_k.weight", E, KVW, true, true);
      L.wv = find(p + "attn_v.weight", E, KVW, true, true);
    }
    L.wo = find(p + "attn_output.weight", QW, E, true, true);
    L.ffn_norm = find(p + "ffn_norm.weight", E, 1, true, false);
    if (variant_->ffn == FfnKind::Moe) {
      const int64_t X = cfg_.n_expert;
      L.router = find(p + "ffn_gate_inp.weight", E, X, true, true);
      L.gate_exps = find(p + "ffn_gate_exps.weight", E, F, true, true, X);
      L.up_exps = find(p + "ffn_up_exps.weight", E, F, true, true, X);
      L.down_exps = find(p + "ffn_down_exps.weight", F, E, true, true, X);
    } else if (variant_->ffn == FfnKind::Gelu) {
      L.up = find(p + "ffn_up.weight", E, F, true, true);  // no gate
    } else if (variant_->fused_gate_up) {
      const Weight& gate_up = find(p + "ffn_up.weight", E, 2 * F, true, true);
      L.gate = rows_of(gate_up, 0, F, p + "ffn_up.weight[gate]");
      L.up = rows_of(gate_up, F, F, p + "ffn_up.weight[up]");
    } else {
      L.gate = find(p + "ffn_gate.weight", E, F, true, true);
      L.up = find(p + "ffn_up.weight", E, F, true, true);
    }
    if (variant_->ffn != FfnKind::Moe) L.down = find(p + "ffn_down.weight", F, E, true, true);
    L.attn_norm_f = vector_f32(L.attn_norm, E);
    L.ffn_norm_f = vector_f32(L.ffn_norm, E);
    if (layer_norm) {
      L.attn_norm_b = vector_f32(find(p + "attn_norm.bias", E, 1, true, false), E);
      L.ffn_norm_b = vector_f32(find(p + "ffn_norm.bias", E, 1, true, false), E);
    }
    if (variant_->post_norms) {
      L.attn_post_norm_f = vector_f32(find(p + "post_attention_norm.weight", E, 1, true, false), E);
      L.ffn_post_norm_f = vector_f32(find(p + "post_ffw_norm.weight", E, 1, true, false), E);
    }
    if (variant_->out_ffn_bias) {
      L.bo = vector_f32(find(p + "attn_output.bias", E, 1, true, false), E);
      L.bup = vector_f32(find(p + "ffn_up.bias", F, 1, true, false), F);
      L.bdown = vector_f32(find(p + "ffn_down.bias", E, 1, true, false), E);
    }
    if (variant_->qkv_bias || table_.count(p + "attn_q.bias")) {
      L.bq = vector_f32(find(p + "attn_q.bias", QW, 1, true, false), QW);
      L.bk = vector_f32(find(p + "attn_k.bias", KVW, 1, true, false), KVW);
      L.bv = vector_f32(find(p + "attn_v.bias", KVW, 1, true, false), KVW);
    }
    if (variant_->qk_norm) {
      L.q_norm_f = vector_f32(find(p + "attn_q_norm.weight", cfg_.head_dim, 1, true, false), cfg_.head_dim);
      L.k_norm_f = vector_f32(find(p + "attn_k_norm.weight", cfg_.head_dim, 1, true, false), cfg_.head_dim);
    }
  }
  // Page tables only: pages are allocated as positions are first written.
  for (int64_t i = 0; i < cfg_.max_sequences; ++i) {
    seqs_.push_back(std::make_unique<Sequence>());
    seqs_.back()->deferred_q.assign(static_cast<size_t>(cfg_.n_heads * cfg_.head_dim), 0.f);
    seqs_.back()->deferred_att.assign(static_cast<size_t>(cfg_.n_heads * cfg_.head_dim), 0.f);
  }
  build_sequences();

  relocate_matmul_weights();

  x_.assign(static_cast<size_t>(B * E), 0.f);
  h_.assign(static_cast<size_t>(B * E), 0.f);
  q_.assign(static_cast<size_t>(B * QW), 0.f);
  k_.assign(static_cast<size_t>(B * KVW), 0.f);
  v_.assign(static_cast<size_t>(B * KVW), 0.f);
  att_.assign(static_cast<size_t>(B * QW), 0.f);
  gate_.assign(static_cast<size_t>(B * F), 0.f);
  up_.assign(static_cast<size_t>(B * F), 0.f);
  pool_ = std::make_unique<ThreadPool>(cfg_.threads);
  const AttentionShape shape = attention_shape();
  attn_scratch_.reserve(shape, cfg_.context_length, B, cfg_.threads);
  deferred_.reserve(shape, cfg_.context_length, static_cast<int>(cfg_.max_sequences));
  step_state_.spans.reserve(static_cast<size_t>(cfg_.max_sequences));
  row_pos_.assign(static_cast<size_t>(B), 0);
  if (variant_->ffn == FfnKind::Moe) moe_host_.reserve(MoeShape{E, F, cfg_.n_expert, cfg_.n_expert_used}, moe_weights(layers_[0], Loc::Host), B);
  compile();
  build_deps();
}

uint64_t Model::kv_bytes() const {
  return static_cast<uint64_t>(cfg_.n_layers) * 2 * cfg_.context_length * cfg_.n_kv_heads * kv_row_bytes(cfg_.kv_format, cfg_.head_dim);
}

void Model::set_threads(int n) {
  check_range("threads", n, 1, 512);
  if (n == pool_->size()) return;
  pool_ = std::make_unique<ThreadPool>(n);
  const AttentionShape shape = attention_shape();
  attn_scratch_.reserve(shape, cfg_.context_length, cfg_.batch_size, n);
  cfg_.threads = n;
}

// One conversion per distinct activation format, then the matmuls that share it.


void Model::set_profiling(bool on) {
  profiling_ = on;
  op_ns_.assign(ops_.size(), 0);
  op_calls_.assign(ops_.size(), 0);
  other_.op_ns.assign(other_.ops.size(), 0);
  other_.op_calls.assign(other_.ops.size(), 0);
  pipe_.op_ns.assign(pipe_.ops.size(), 0);
  pipe_.op_calls.assign(pipe_.ops.size(), 0);
  layer_prog_.op_ns.assign(layer_prog_.ops.size(), 0);
  layer_prog_.op_calls.assign(layer_prog_.ops.size(), 0);
}

// Every program's ops (decode, prefill, pipelined, as op_info numbers them), with their accumulated times.
std::vector<Model::OpTiming> Model::op_timings() const {
  std::vector<OpTiming> out;
  auto add = [&](const std::vector<Op>& ops, const std::vector<uint64_t>& ns, const std::vector<uint64_t>& calls) {
    for (size_t i = 0; i < ops.size() && i < ns.size(); ++i) {
      const Op& op = ops[i];
      out.push_back(OpTiming{op_kind_name(static_cast<int>(op.kind)), op.layer, op.w ? op.w->name.c_str() : nullptr, ns[i], calls[i]});
    }
  };
  const bool swapped = prefill_active_;
  add(swapped ? other_.ops : ops_, swapped ? other_.op_ns : op_ns_, swapped ? other_.op_calls : op_calls_);
  if (has_prefill_) add(swapped ? ops_ : other_.ops, swapped ? op_ns_ : other_.op_ns, swapped ? op_calls_ : other_.op_calls);
  add(pipe_.ops, pipe_.op_ns, pipe_.op_calls);  // NEO's pipelined program, numbered next (op_info)
  add(layer_prog_.ops, layer_prog_.op_ns, layer_prog_.op_calls);  // the layer-by-layer program, last
  return out;
}

void Model::swap_program() {
  exchange(other_);
  prefill_active_ = !prefill_active_;
}

}  // namespace fulcrum
