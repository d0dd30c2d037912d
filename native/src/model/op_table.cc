#include "model/op_table.h"

#include <algorithm>
#include <cmath>

namespace fulcrum {
namespace {

const char* const kCoversAttnNorm[] = {"attn_norm", "LN.0", nullptr};
const char* const kCoversQ[] = {"Q", nullptr};
const char* const kCoversK[] = {"K", nullptr};
const char* const kCoversV[] = {"V", nullptr};
const char* const kCoversRope[] = {"RoPE", nullptr};
const char* const kCoversAttention[] = {"Scores", "Softmax", "WV", nullptr};
const char* const kCoversOutput[] = {"Output", nullptr};
const char* const kCoversFfnNorm[] = {"ffn_norm", "LN.1", nullptr};
// MoE: the executor's MoE FFN op runs where the plan puts the experts (Up); the router rides along.
const char* const kCoversGate[] = {"Gate", "Router", nullptr};
const char* const kCoversUp[] = {"Up", "FC.0", "Experts", nullptr};
const char* const kCoversDown[] = {"Down", "FC.1", nullptr};

const PlanOpEntry kTable[kPlanOps] = {
    {"attn_norm", false, kCoversAttnNorm}, {"Q", true, kCoversQ},         {"K", true, kCoversK},
    {"V", true, kCoversV},                 {"RoPE", false, kCoversRope}, {"Attention", false, kCoversAttention},
    {"Output", true, kCoversOutput},       {"ffn_norm", false, kCoversFfnNorm}, {"Gate", true, kCoversGate},
    {"Up", true, kCoversUp},               {"Down", true, kCoversDown},
};

const char* const kKindNames[] = {"embed", "rmsnorm", "convert", "matmul", "add_bias", "rope", "store_kv", "attention", "add_residual",
                                  "swiglu", "last_rows", "copy_rows", "copy_cols", "copy_weight", "copy_kv", "save_acts", "copy_acts",
                                  "recompute_kv", "layernorm", "gelu", "geglu", "moe_ffn", "logit_softcap",
                                  "layer_enter", "layer_exit", "deferred_attention"};

}  // namespace

const PlanOpEntry& plan_op_entry(int op) { return kTable[op >= 0 && op < kPlanOps ? op : 0]; }

const char* plan_op_name(int op) { return op >= 0 && op < kPlanOps ? kTable[op].name : "LM head"; }

const char* op_kind_name(int k) { return k >= 0 && k < op_kind_count() ? kKindNames[k] : "?"; }

int op_kind_count() { return static_cast<int>(sizeof(kKindNames) / sizeof(kKindNames[0])); }

uint64_t device_workspace_bytes(const WorkspaceShape& s, int64_t batch_size, bool head_on_device, int64_t max_sequences, int64_t page_tokens) {
  const int64_t B = std::min(batch_size, kDeviceStepRows);
  const int64_t qw = s.n_heads * s.head_dim, kvw = s.n_kv_heads * s.head_dim;
  // One device buffer per activation (X, H, Q, K, V, Att, Gate, Up) of B rows.
  const int64_t acts = B * (2 * s.n_embd + 2 * qw + 2 * kvw + 2 * s.n_ff) * 4;
  // Logits rows: one per sequence, at least 16 (a step that wants every row's logits), at most B.
  const int64_t logits = head_on_device ? std::min(B, std::max<int64_t>(max_sequences, 16)) * s.n_vocab * 4 : 0;
  // Converted activations (the loopback's Q8 rows), two formats at most, with block overhead.
  const int64_t converted = 2 * static_cast<int64_t>(std::ceil(static_cast<double>(B * std::max({s.n_embd, qw, s.n_ff})) * 1.2));
  // KV pages hold page_tokens positions: a layer's KV on the device may pass the plan's count by a page.
  const int64_t page_slack = s.n_layers * 2 * page_tokens * kvw * 2;
  return static_cast<uint64_t>(acts + logits + converted + page_slack + (256 << 10));
}

}  // namespace fulcrum
