// The one op vocabulary, owned here and exported to TypeScript (model_addon's opTable): the
// executor's plan ops (what a placement places) with the cost model's ops each one executes (a
// fused kernel covers several: Attention = Scores + Softmax + WV), the compiled op kinds, the
// lanes, the rows of a device step and a KV page, and the device workspace a placement takes.
// Lowering, traces, device budgets and panels read it instead of keeping lists of their own.
#pragma once
#include <cstdint>

namespace fulcrum {

// A decoder layer's ops in the cost model's vocabulary (engine/cost/ops.ts). Native helper ops
// (bias, KV store, residual add, activations, conversions, copies) are attributed to the plan op
// they serve.
enum PlanOp : int8_t { kAttnNorm, kQ, kK, kV, kRope, kAttention, kOutput, kFfnNorm, kGate, kUp, kDown, kPlanOps };

struct PlanOpEntry {
  const char* name;
  bool matmul;                 // a weighted op: placed by rows (intra-op split) with its weights
  const char* const* covers;   // cost-model ops it executes (null-terminated)
};
const PlanOpEntry& plan_op_entry(int op);
// Names of op (or "LM head" for -1).
const char* plan_op_name(int op);
// Names of the compiled ops' kinds (Model::OpKind order), for timings and traces.
const char* op_kind_name(int kind);
int op_kind_count();

// Rows of a step on a device: its activation buffers hold this many (prompts run in chunks).
constexpr int64_t kDeviceStepRows = 64;

// Device bytes a placement needs besides weights and KV (activations, logits, converted
// activations, a page of KV slack per layer); what the planner reserves on the device.
struct WorkspaceShape {
  int64_t n_layers, n_embd, n_heads, n_kv_heads, head_dim, n_ff, n_vocab;
};
uint64_t device_workspace_bytes(const WorkspaceShape& s, int64_t batch_size, bool head_on_device, int64_t max_sequences, int64_t page_tokens);

}  // namespace fulcrum
