// The mixture-of-experts FFN of one layer (qwen3moe): a router scores every expert per token,
// the top k experts (softmax, top k, weights normalised to sum 1) run SwiGLU FFNs of their own,
// and the token's output is the weighted sum of its experts' outputs. Experts run batched: the
// step's tokens are grouped by expert, each expert's rows gathered into one matmul (a prefill's
// tokens that share an expert share its weight reads). One body for every lane: the router and
// the experts run on the lane's kernels (device/kernels.h: the CPU's for the host lanes and the
// loopback, Vulkan's own), the routing on the host. All scratch is sized at load.
#pragma once
#include <cstdint>
#include <vector>

#include "device/kernels.h"
#include "ggml_types.h"
#include "quant/packed/repack.h"

namespace fulcrum {

class Device;

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

// The MoE scratch in a lane's memory, for steps of at most the reserved rows: host memory on
// the CPU lanes (MoeFfn::host_buffers), a device's buffers on a device with its own kernels
// (act_* unused there: it reads f32 activations).
struct MoeBuffers {
  float* logits = nullptr;  // rows × n_expert router scores
  float *xg = nullptr, *g = nullptr, *u = nullptr, *y = nullptr;  // one expert's gathered rows, gate, up, outputs
  // Each (token t, slot s)'s weighted output at (s * rows + t) × n_embd: slot-major, so the
  // slots are summed as whole buffers, in slot order (the order llama.cpp adds them).
  float* ys = nullptr;
  float* wt = nullptr;       // each gathered row's routing weight, the experts' lists back to back
  uint32_t* idx = nullptr;   // the gather rows (tokens), then rows × n_used on: the destinations (s * rows + t)
  uint8_t *act_in = nullptr, *act_ff = nullptr, *act_router = nullptr;  // converted activations (CPU)
};

class MoeFfn {
 public:
  // Host scratch for steps of at most `rows` tokens (reserve once; run never allocates).
  void reserve(const MoeShape& shape, const MoeWeights& w, int64_t rows);
  // out[t] = Σ_s weight[t][s] · FFN_{expert[t][s]}(h[t]) for t < rows (h, out: rows × n_embd in
  // the lane's memory; out may be h), on the lane's kernels `kn` with its scratch `b`. `own`:
  // the device whose memory `b` is in when that is not the host's (the router's scores come back
  // and the index lists go over); nullptr on the CPU lanes, whose `b` is host_buffers().
  void run(Kernels& kn, Device* own, const MoeBuffers& b, const MoeWeights& w, const float* h, int64_t rows, float* out);
  // This object's host scratch as a lane's buffers (the host lane's, and the loopback device's,
  // which reads host memory).
  MoeBuffers host_buffers();
  const MoeShape& shape() const { return shape_; }
  // Tokens routed to each expert in the steps run since the last reset (expert statistics).
  const std::vector<uint64_t>& expert_tokens() const { return expert_tokens_; }

 private:
  // The routing from router scores (logits_, overwritten by probabilities): each token's experts
  // and weights, each expert's members (token * n_used + slot), and the lane's index lists.
  void route(int64_t rows);
  // The experts of a step, one at a time over the tokens routed to each (gather, gate and up,
  // SwiGLU, down, scatter), on any lane's kernels.
  void run_experts(Kernels& kn, const MoeBuffers& b, const MoeWeights& w, const float* h, int64_t rows);
  // A decode token's experts on the CPU (packed weights): gates and ups in one grouped GEMV pass,
  // downs in another; the same bits as run_experts.
  void run_decode_grouped(CpuKernels& kn, const MoeBuffers& b, const MoeWeights& w, const float* h);

  MoeShape shape_;
  int64_t max_rows_ = 0;
  std::vector<float> logits_;        // rows × n_expert
  std::vector<int32_t> selected_;    // rows × n_used
  std::vector<float> weights_;       // rows × n_used
  std::vector<int32_t> count_;       // per expert
  std::vector<int32_t> members_;     // per expert, up to rows entries of token * n_used + slot
  std::vector<uint32_t> idx_;        // MoeBuffers::idx as the host builds it
  std::vector<float> wt_;            // MoeBuffers::wt as the host builds it
  std::vector<float> xg_, g_, u_, y_, ys_;  // the CPU lanes' scratch (host_buffers)
  std::vector<uint8_t> act_in_, act_ff_, act_router_;
  std::vector<uint64_t> expert_tokens_;
  bool group_decode_ = true;  // FULCRUM_NO_GEMV_GROUPS=1 at reserve: decode tokens take run_experts
};

}  // namespace fulcrum
