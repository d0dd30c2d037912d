// The mixture-of-experts FFN of one layer (qwen3moe): a router scores every expert per token,
// the top k experts (softmax, top k, weights normalised to sum 1) run SwiGLU FFNs of their own,
// and the token's output is the weighted sum of its experts' outputs. Experts run batched: the
// step's tokens are grouped by expert, each expert's rows gathered into one matmul (a prefill's
// tokens that share an expert share its weight reads). All scratch is sized at load.
#pragma once
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "ggml_types.h"
#include "quant/packed/repack.h"

namespace fulcrum {

// One expert tensor (ffn_gate_exps, ffn_up_exps or ffn_down_exps: n_expert matrices of
// rows × cols, one after another) as the CPU reads it.
struct ExpertMatrices {
  GgmlType type = GgmlType::F32;
  const uint8_t* data = nullptr;  // expert e's matrix starts at data + e * rows * row_bytes
  int64_t rows = 0, cols = 0;
  size_t row_bytes = 0;
  const quant::PackedFormat* packed = nullptr;  // repacked at load (rows a multiple of its group)
  const uint8_t* expert(int64_t e) const { return data + static_cast<size_t>(e * rows) * row_bytes; }
};

struct MoeWeights {
  GgmlType router_type = GgmlType::F32;  // ffn_gate_inp: n_expert rows of n_embd
  const uint8_t* router = nullptr;
  const quant::PackedFormat* router_packed = nullptr;
  ExpertMatrices gate, up, down;
};

struct MoeShape {
  int64_t n_embd = 0, n_ff = 0, n_expert = 0, n_used = 0;
};

// Scratch for steps of at most `rows` tokens (reserve once; run never allocates).
class MoeFfn {
 public:
  void reserve(const MoeShape& shape, const MoeWeights& w, int64_t rows);
  // out[t] = Σ_s weight[t][s] · FFN_{expert[t][s]}(h[t]) for t < rows (h, out: rows × n_embd).
  void run(ThreadPool& pool, const MoeWeights& w, const float* h, int64_t rows, float* out);
  // The routing alone, from router scores (rows × n_expert, overwritten by probabilities): each
  // token's experts and weights, and each expert's members (token * n_used + slot). A device
  // with kernels of its own runs the experts itself from these.
  void route(float* logits, int64_t rows);
  const MoeShape& shape() const { return shape_; }
  int32_t members_of(int64_t e, const int32_t** m) const {
    *m = members_.data() + e * max_rows_;
    return count_[static_cast<size_t>(e)];
  }
  float weight(int64_t token, int64_t slot) const { return weights_[static_cast<size_t>(token * shape_.n_used + slot)]; }
  float* logits() { return logits_.data(); }
  // Tokens routed to each expert in the steps run since the last reset (expert statistics).
  const std::vector<uint64_t>& expert_tokens() const { return expert_tokens_; }

 private:
  MoeShape shape_;
  int64_t max_rows_ = 0;
  std::vector<float> logits_;        // rows × n_expert
  std::vector<int32_t> selected_;    // rows × n_used
  std::vector<float> weights_;       // rows × n_used
  std::vector<int32_t> count_;       // per expert
  std::vector<int32_t> members_;     // per expert, up to rows entries of token * n_used + slot
  std::vector<float> xg_, g_, u_, y_;  // gathered rows, gate, up, expert outputs
  std::vector<float> ys_;            // rows × n_used × n_embd: each (token, slot)'s weighted output
  std::vector<uint8_t> act_in_, act_ff_, act_router_;  // converted activations
  std::vector<uint64_t> expert_tokens_;
};

}  // namespace fulcrum
