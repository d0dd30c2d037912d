// A decoder-only transformer over memory-mapped GGUF weights, every architecture a variant of one
// story (ArchVariant: llama, qwen2, qwen3, qwen3moe, phi3, starcoder2, gemma, gemma2, gemma3). The
// forward pass is compiled under a placement into a flat list of ops, so a step never returns to
// JS per op and allocates nothing: all buffers are sized at load. The class's rooms: model.cc
// (configuration, load), weights.cc, sequences.cc (KV), compile.cc (the op list), placement.cc
// (device resources), forward.cc (the step), moe.cc (routed experts), op_table.cc (the vocabulary).
#pragma once
#include <atomic>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/huge_region.h"
#include "core/mapped_file.h"
#include "device/device.h"
#include "exec/executor.h"
#include "core/thread_pool.h"
#include "ggml_types.h"
#include "kernels/attention.h"
#include "kernels/ops.h"
#include "model/deferred_attention.h"
#include "model/kv_cache.h"
#include "model/moe.h"
#include "model/op_table.h"
#include "quant/packed/repack.h"

namespace fulcrum {

// How an architecture varies the decoder's one story: compile() and load read these, never the
// architecture's name.
enum class NormKind : int8_t { Rms, Layer };   // Layer: LayerNorm with a bias (starcoder2)
// Gelu: up -> GELU -> down, no gate (starcoder2). Moe: routed SwiGLU experts (qwen3moe, model/moe.h).
enum class FfnKind : int8_t { SwiGlu, GeGlu, Gelu, Moe };
struct ArchVariant {
  const char* name;
  bool qkv_bias;  // attn_q/k/v.bias required (qwen2); optional otherwise
  bool qk_norm;   // attn_q_norm / attn_k_norm: RMSNorm of each Q and K head before RoPE (qwen3)
  bool fused_gate_up;  // ffn_up holds the gate's rows then the up rows, no ffn_gate (phi3)
  NormKind norm;
  FfnKind ffn;
  bool out_ffn_bias;  // attn_output.bias, ffn_up.bias, ffn_down.bias (starcoder2)
  bool embd_scale;    // embeddings scaled by sqrt(n_embd) (gemma)
  bool post_norms;    // post_attention_norm and post_ffw_norm on each sublayer's output (gemma2/3)
  // (A fused attn_qkv is taken where the file has one, whatever the architecture.)
};
// The variant of a supported architecture, or nullptr.
const ArchVariant* arch_variant(const std::string& name);
// "llama, qwen2, ...": for messages.
std::string supported_architectures();

struct ModelConfig {
  std::string arch;  // a name arch_variant knows
  int64_t n_layers = 0, n_embd = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, n_ff = 0, n_vocab = 0;
  float norm_eps = 1e-5f;
  RopeParams rope;
  int64_t context_length = 0;  // KV cache positions
  int64_t batch_size = 512;    // most tokens per forward step (longer inputs are chunked)
  int threads = 1;
  uint64_t memory_limit_bytes = 0;  // 0: /proc/meminfo MemAvailable only
  int64_t kv_page_tokens = KvCache::kPageTokens;  // positions per KV cache page
  // The KV cache's element format. Q8_0 keeps KV and attention on the CPU (and the loopback
  // device, which runs the CPU kernels): a placement with a device's attention is refused.
  KvFormat kv_format = KvFormat::F16;
  int64_t max_sequences = 1;  // sequences with their own KV that one step may carry
  int64_t n_expert = 0, n_expert_used = 0;  // MoE (n_ff is then one expert's FFN size)
  // Gemma 2/3: attention scale (0: 1/sqrt(head_dim)), attention and final logit soft-capping
  // (0: off), sliding-window layers (swa_layers[l] != 0) with their window and their own RoPE.
  float attn_scale = 0.f, attn_softcap = 0.f, final_softcap = 0.f;
  int64_t n_swa = 0;
  std::vector<uint8_t> swa_layers;
  RopeParams rope_swa;
};

struct TensorEntry {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<int64_t> dims;  // innermost first, as GGUF stores them
  uint64_t offset = 0;        // absolute file offset
};

struct Weight {
  std::string name;
  GgmlType type = GgmlType::F32;
  int64_t cols = 0, rows = 0;  // dims[0], dims[1]
  const uint8_t* data = nullptr;  // the GGUF layout (what devices upload and read row ranges of)
  size_t row_bytes = 0;
  // What the CPU kernels read: `data` itself (cpu_layout Gguf), or the load copy repacked into
  // cpu_layout (quant/packed/repack.h), a group of rows starting where its first row would.
  const uint8_t* cpu_data = nullptr;
  WeightLayout cpu_layout = WeightLayout::Gguf;
  // Stacked matrices (MoE expert tensors): rows per matrix; the CPU copy is repacked only when
  // each matrix starts on a row group. 0: one matrix.
  int64_t matrix_rows = 0;
};

// Where an op's buffers live: host memory (the cpu device) or the model's accelerator.
enum class Loc : int8_t { Host = 0, Dev = 1 };
// Where a matmul weight lives for the accelerator: used in place on the host (CPU ops only),
// resident in device memory (copied once when the placement is set), or streamed from host
// memory into one of two device slots layer by layer (double-buffered prefetch).
enum class WeightHome : int8_t { Host = 0, Resident = 1, Streamed = 2 };

struct OpPlacement {
  Loc loc = Loc::Host;
  // Matmuls only, with loc Dev: the fraction of output rows computed on the device; the rest run
  // on the CPU at the same time (paper 000's intra-op split). 1: the whole op on the device.
  double dev_fraction = 1.0;
  WeightHome weights = WeightHome::Host;
};
struct LayerPlacement {
  OpPlacement op[kPlanOps];
  // Where the layer's KV cache lives. KV on the host with attention on the device is streamed to
  // the device every step (offloaded KV); KV on the device needs attention on the device.
  Loc kv = Loc::Host;
  // KVPR (paper 001): with streamed KV, positions [0, recompute_prefix) are not copied but
  // recomputed on the device from the layer's stored attn_norm outputs.
  int64_t recompute_prefix = 0;
  // NEO / APEX: the KV lives per sequence (Model::set_sequence_kv): attention runs on the device
  // for the rows of device-KV sequences and on the CPU for host-KV ones, at the same time.
  bool kv_by_sequence = false;
};
struct Placement {
  std::vector<LayerPlacement> layers;  // empty: everything on the host
  OpPlacement head;                    // final norm + LM head
  bool uses_device() const;
};

// One executed op of a traced step: which op, lane, and when (steady-clock ns).
struct TraceEvent {
  int64_t step;
  int32_t op;
  int64_t start_ns, end_ns;
};

class Model {
 public:
  // Throws std::runtime_error naming the problem (file, tensor, type, numbers).
  Model(const std::string& path, const std::vector<TensorEntry>& tensors, const ModelConfig& cfg);
  // Device memory (KV pages, weights, buffers) goes back to the device before the device goes.
  ~Model();

  // Runs tokens at positions [start_pos, start_pos + n) of sequence 0. Returns the logits of the
  // last token (n_vocab floats), or of every token (n × n_vocab) when want_all. Throws on bad input.
  std::vector<float> eval(const int32_t* tokens, int64_t n, int64_t start_pos, bool want_all);
  // Several sequences, each at its own position with its own KV, in the same steps (their rows
  // share every matmul; attention and the KV are per sequence). Returns each input's logits, in
  // input order. A sequence appears at most once.
  struct SeqInput {
    int32_t seq = 0;
    const int32_t* tokens = nullptr;
    int64_t n = 0;
    int64_t start_pos = 0;
    // Keep the positions after this input's last one (a shifted chunk of reused KV waits there,
    // see shift_kv) instead of rewinding the sequence to it.
    bool keep_after = false;
    // APEX's asynchronous overlap (paper 004 §3.3): ≥ 0 runs only decoder layers [layer, layer +
    // layers) of the one token at start_pos (n = 1), the layer-by-layer step. Layer 0 starts the
    // token from its embedding; layer l > 0 continues from the residual the sequence kept after
    // layer l - 1 of the same position. Only a call that runs the last layer returns logits (and
    // advances the sequence); the others return none. Its row rides in the step's batch with whole
    // tokens of other sequences; its KV and logits are the bits of the whole token's.
    // Where the row's attention at its last layer runs on the host (the layer program's
    // deferred_attention op there; for NEO/APEX's placement, a host-KV sequence), a call that
    // does not finish the token defers that attention (APEX's window, model/deferred_attention.h):
    // it stores the layer's K and V, starts the attention on the window's thread and stops; the
    // call for the next layer joins it and runs that layer's output projection and FFN first.
    int32_t layer = -1;
    int32_t layers = 1;
  };
  // Whether the placement allows layer-by-layer steps (build_layer_steps).
  bool layer_steps_supported() const;
  bool layer_steps_ready() const { return layer_prog_state_ > 0; }
  // APEX's window (SeqInput::layer): attentions deferred so far, their run time and join waits.
  const DeferredAttention& deferred_attention() const { return deferred_; }
  std::vector<std::vector<float>> eval_batch(const std::vector<SeqInput>& in, bool want_all);
  // The same steps, each input's logits written to dests[k] (logits_floats(in[k], want_all) floats;
  // an input without logits may have nullptr). The caller owns the memory and reuses it token
  // after token: a decode loop then allocates nothing per token, where a fresh 128 KiB-600 KiB
  // result faults its pages in again every time (measured: 124-148 µs a token for 32000 floats).
  void eval_into(const std::vector<SeqInput>& in, bool want_all, const std::vector<float*>& dests);
  // Floats of an input's logits: n_vocab, n × n_vocab when want_all, 0 for a layer-by-layer call
  // that stops before the last layer.
  int64_t logits_floats(const SeqInput& s, bool want_all) const;
  // NEO's asymmetric pipeline (paper 003 Sec. 4): with it on, a decode-placement step that
  // carries both device-KV and host-KV sequences in layers placed by sequence (every layer) runs
  // the pipelined program: the two sub-batches' ops over their own rows, interleaved so the CPU
  // attends for the host-KV rows while the device runs the device-KV rows' linear ops (compile).
  // Off, such a step runs as one sub-batch. Rows, logits and KV are the same bits either way.
  void set_pipelined(bool on) { pipelined_ = on; }
  // Compiles the pipelined program (kept beside the decode one) if the decode placement allows it
  // (every layer placed by sequence on a device); false when it does not. A step that needs it
  // compiles it if this was not called after the placement was set.
  bool build_pipelined();
  bool pipelined() const { return pipelined_; }
  // Compiles the layer-by-layer program (SeqInput::layer) beside the decode one if the placement
  // allows it (no device kernels of its own, no streamed KV); false when it does not. A step
  // that needs it compiles it if this was not called after the placement was set.
  bool build_layer_steps();
  // Forgets KV positions ≥ from_pos of sequence `seq`.
  void clear_kv(int64_t from_pos, int32_t seq = 0);
  // Commits the host memory of sequence `seq`'s KV for positions [0, positions) (clamped to the
  // context) ahead of the evaluation that will write them (KvCache::commit); holds nothing.
  void prepare_kv(int64_t positions, int32_t seq = 0);
  // Moves sequence `seq`'s KV positions [from, to) by `delta` (keys re-rotated, see
  // KvCache::shift); its held positions then reach at least to + delta. Host KV only: a sequence
  // with KV on a device, or KVPR's saved rows, throws (the caller evaluates instead).
  void shift_kv(int64_t from, int64_t to, int64_t delta, int32_t seq = 0);
  int64_t n_past(int32_t seq = 0) const;
  int64_t max_sequences() const { return cfg_.max_sequences; }
  // Where sequence `seq` keeps its KV in layers placed by sequence (NEO's CPU-attention requests
  // live on the host). Forgets the sequence's KV.
  void set_sequence_kv(int32_t seq, Loc loc);
  // Moves sequence `seq`'s KV of the layers placed by sequence to `loc`, keeping its positions:
  // every held page crosses the link (NEO's swap between the device and the host pool). Throws
  // DeviceError, leaving the sequence where it was, when the device has no room.
  void swap_sequence_kv(int32_t seq, Loc loc);
  int threads() const { return pool_->size(); }
  void set_threads(int n);
  const ModelConfig& config() const { return cfg_; }
  uint64_t kv_bytes() const;  // the whole context's KV cache (what the load-time check counts)
  // KV cache pages held by the page tables, and all pages allocated (free list included).
  uint64_t kv_bytes_in_use() const;
  uint64_t kv_bytes_reserved() const;

  // Per-operation timing of forward steps (off by default: two clock reads per op).
  struct OpTiming {
    const char* kind;
    int layer;
    const char* weight;  // tensor name for matmuls, else nullptr
    uint64_t ns = 0, calls = 0;
  };
  void set_profiling(bool on);
  bool profiling() const { return profiling_; }
  std::vector<OpTiming> op_timings() const;

  // Executes on `device` (nullptr: host only) with `placement`. Allocates device copies of the
  // resident weights, the streaming slots, device activations and device KV pages within the
  // device's budget; a refusal throws DeviceError and leaves the model on the host. Forgets the KV
  // cache (positions are re-evaluated under the new placement).
  void set_placement(const Placement& placement, std::unique_ptr<Device> device);
  // The same with a second placement for prompt steps (issue 21: prefill is compute-bound, decode
  // memory-bound, so a plan may place them apart): steps of at least `prefill_rows` rows run the
  // prefill placement's op list, the others the decode one. Both share the decode placement's KV
  // (the prefill placement's KV fields are overwritten with it) and the device: its resources are
  // the union of both (resident weights of either, streaming slots for the larger). When the
  // union does not fit, the model runs the decode placement alone, noted (placement_notes).
  void set_placements(const Placement& decode, const Placement* prefill, int64_t prefill_rows, std::unique_ptr<Device> device);
  // Steps of at least this many rows run the prefill placement (0: there is none).
  int64_t prefill_rows() const { return has_prefill_ ? prefill_rows_ : 0; }
  const Placement& placement() const { return placement_; }
  Device* device() const { return device_.get(); }
  // Per-op trace of the steps run while tracing is on (at most `max_events` kept).
  void set_tracing(bool on, size_t max_events = 1 << 20);
  const std::vector<TraceEvent>& trace() const { return trace_; }
  void clear_trace() { trace_.clear(); }
  // Describes op i of the compiled list (for traces): kind, lane, layer, plan op, weight, rows.
  struct OpInfo {
    const char* kind;
    const char* lane;
    int layer;
    const char* plan_op;
    const char* weight;
    const char* loc;
    const char* stage;  // "decode", "prefill" for the prefill placement's ops, "pipelined"
    int part;           // rows: 0 all, 1 the device-KV sub-batch, 2 the host-KV sub-batch
    // The last op of each lane (cpu, device, h2d, d2h; index within the op's own list, -1 none)
    // this op waits for: the executor's dependencies, so callers can tell which ops may overlap.
    LaneDeps deps;
    int gemv_group;     // Op::gemv_group
  };
  // Ops are numbered across the programs: the decode op list first, then the prefill one's, then
  // the pipelined one's once a step has used it (trace events use these numbers).
  OpInfo op_info(int32_t i) const;
  size_t op_count() const { return decode_program_ops().size() + prefill_program_ops().size() + pipe_.ops.size() + layer_prog_.ops.size(); }
  // What set_placement changed in the placement it was given, and why (e.g. a matmul whose
  // weight format the device has no kernel for runs on the CPU).
  const std::vector<std::string>& placement_notes() const { return placement_notes_; }

 private:
  // Rows [0, r) of a matmul that the placement `o` puts on the device (0 on the host).
  int64_t device_rows(const Weight& w, const OpPlacement& o) const;
  // The bytes a device copy of `w` is made from: the GGUF layout for a device with its own
  // kernels, the CPU's (possibly repacked) bytes for the loopback, which runs the CPU's kernels.
  const uint8_t* device_weight_bytes(const Weight& w) const;
  enum class Buf { X, H, Q, K, V, Att, Gate, Up, Logits };
  enum class OpKind {
    Embed, RmsNorm, Convert, MatMul, AddBias, Rope, StoreKv, Attention, AddResidual, SwiGlu, LastRows,
    CopyRows,     // whole rows of src from one location to the other
    CopyCols,     // columns [r0, r1) of every row of dst from the device to the host
    CopyWeight,   // rows [0, r1) of a streamed weight into its device slot
    CopyKv,       // the layer's host KV pages of positions before this step into a device staging slot
    SaveActs,     // KVPR: keep the attn_norm output rows of the layer for later recomputation
    CopyActs,     // KVPR: the stored attn_norm rows of positions [0, recompute) to the device
    RecomputeKv,  // KVPR: K and V of positions [0, recompute) from those rows, into the staging slot
    LayerNorm,    // RmsNorm's place in LayerNorm architectures: vec the gains, vec2 the bias
    Gelu,         // in place, the ungated FFN's activation
    GeGlu,        // SwiGlu's place with GELU (gemma)
    MoeFfn,       // the routed experts of the layer, H -> H (model/moe.h)
    LogitSoftcap, // logits = tanh(logits / cap) · cap (gemma2's final soft-capping), on the host
    LayerEnter,   // layer-by-layer rows at this layer: X from the residual their sequence kept (host memory), on X's side
    LayerExit,    // layer-by-layer rows at this layer: X kept as their sequence's residual (host memory), from X's side
    DeferredAttention,  // layer-by-layer rows after this layer's attention: the rows that continue
                        // from a deferred attention here take its output (Att) and X back; the rows
                        // that stop here keep X and start their attention on the window's thread
    // (the last kind: op_table.cc names every kind up to it)
  };
  struct Op {
    OpKind kind;
    int layer = -1;
    Buf src = Buf::X, dst = Buf::X;
    const Weight* w = nullptr;
    const float* vec = nullptr;  // norm weight or bias (f32, owned by the model)
    const float* vec2 = nullptr;  // LayerNorm: its bias
    GgmlType act_type = GgmlType::F32;  // Convert: target format; MatMul: the activation format
    int64_t width = 0;                  // row width of src/dst where it matters (RmsNorm: per head when set)
    Loc loc = Loc::Host;                // where the op's buffers are (copies: the destination)
    Lane lane = Lane::Cpu;
    int8_t plan_op = -1;                // PlanOp, or -1: embedding / LM head
    int64_t r0 = 0, r1 = 0;             // MatMul / CopyCols / CopyWeight: output rows [r0, r1) (r1 0: all)
    const uint8_t* wdata = nullptr;     // MatMul / CopyWeight: the weight bytes this op reads (or writes)
    const quant::PackedFormat* packed = nullptr;  // MatMul on the host: wdata is in this repacked layout
    int kv_slot = -1;                   // StoreKv / Attention / CopyKv on the device: staging slot (-1: the layer's own KV)
    bool after_last = false;            // after LastRows: one row per sequence unless all logits are wanted
    int8_t part = 0;                    // rows: 0 all, 1 of device-KV sequences, 2 of host-KV sequences
    // RmsNorm / SwiGlu: Convert ops folded into this one (compile's fuse pass): each output row
    // is also converted to these activation formats while it is still in L1, instead of a
    // second pass over the whole batch (4-11 MB per op for a 512-token prefill) from L2/L3.
    GgmlType fused_convert[2] = {GgmlType::F32, GgmlType::F32};
    int n_fused_convert = 0;
    // MatMul: how many of the ops right after it (MatMuls of the same input on the host, e.g. K
    // and V after Q) run with it in one decode pass (group_gemvs); they then do nothing themselves.
    // FULCRUM_NO_GEMV_GROUPS=1: none (each matmul its own pool run, as before grouping).
    int8_t gemv_group = 0;
  };
  struct Layer {
    Weight attn_norm, wq, wk, wv, wo, ffn_norm, gate, up, down;
    std::vector<float> attn_norm_f, ffn_norm_f, bq, bk, bv;
    std::vector<float> q_norm_f, k_norm_f;  // per-head gains [head_dim] (qk_norm)
    std::vector<float> attn_norm_b, ffn_norm_b, bo, bup, bdown;  // LayerNorm biases, out_ffn_bias
    Weight router, gate_exps, up_exps, down_exps;  // MoE
    std::vector<float> attn_post_norm_f, ffn_post_norm_f;  // post_norms
  };
  // A layer's MoE weights as the kernels at `loc` read them (the device's resident copies there).
  MoeWeights moe_weights(const Layer& L, Loc loc) const;

  // `matrices` > 1: a stack of that many rows × cols matrices (dims [cols, rows, matrices]),
  // returned as one weight of rows × matrices rows.
  const Weight& find(const std::string& name, int64_t cols, int64_t rows, bool required, bool matmul, int64_t matrices = 1);
  // Rows [row0, row0 + rows) of a matrix as a weight of its own (fused QKV and gate-up matrices
  // are run as the separate matmuls they fuse: same bytes, same kernels, same placement ops).
  Weight rows_of(const Weight& whole, int64_t row0, int64_t rows, const std::string& name);
  std::vector<float> vector_f32(const Weight& w, int64_t n);
  // pipelined: the decode placement's pipelined program (two sub-batches, see set_pipelined);
  // layer_steps: the decode placement's layer-by-layer program (SeqInput::layer).
  void compile(bool pipelined = false, bool layer_steps = false);
  // After compiling a variant of the decode program into ops_: its device matmuls and weight
  // copies use the places the decode program's (`decode`) do.
  void adopt_device_weights(const std::vector<Op>& decode);
  void fuse_converts();
  float* buf(Buf b);
  int64_t width(Buf b) const;
  void forward(bool want_all, float* logits_out);
  // eval_batch's input checks (throws naming the input and the problem).
  void check_inputs(const std::vector<SeqInput>& in, bool want_all);
  void eval_steps(const std::vector<SeqInput>& in, bool want_all, const std::vector<float*>& dests);
  // Layer `layer`'s attention (its window when it slides); -1: the shape scratch is sized for.
  AttentionShape attention_shape(int layer = -1) const {
    AttentionShape a{cfg_.n_heads, cfg_.n_kv_heads, cfg_.head_dim,
                     cfg_.attn_scale > 0 ? cfg_.attn_scale : 1.0f / std::sqrt(static_cast<float>(cfg_.head_dim)), cfg_.attn_softcap, 0};
    if (layer >= 0 && is_swa(layer)) a.window = cfg_.n_swa;
    return a;
  }
  bool is_swa(int layer) const {
    return cfg_.n_swa > 0 && static_cast<size_t>(layer) < cfg_.swa_layers.size() && cfg_.swa_layers[static_cast<size_t>(layer)] != 0;
  }
  const RopeParams& rope_of(int layer) const { return layer >= 0 && is_swa(layer) ? cfg_.rope_swa : cfg_.rope; }
  std::vector<RopeParams> layer_ropes_;  // rope_of(l) for every layer (KV shifts)
  // Op i on its lane: the lane's kernels (device/kernels.h) and the one op switch, run_op.
  void exec_op(int32_t i);
  void run_op(Kernels& kn, const Op& op, int64_t rows);  // (a sub-batch's op: its own rows, see there)
  // KVPR's recomputation of K and V into the staging slot, on whichever lane runs it.
  void recompute_kv(Kernels& kn, const Op& op);
  // K and V rows of positions [pos0, pos0 + n) into a KV cache, page by page.
  void store_kv(Kernels& kn, KvCache& kv, int64_t idx, const float* k, const float* v, int64_t n, int64_t pos0);
  RowConverts fused_converts(const Op& op, int64_t row0 = 0);
  size_t act_row_stride(GgmlType t) const;
  const float* vec_at(const float* host, Loc l) const;
  float* buf_at(Buf b, Loc l);
  uint8_t* act_at(GgmlType t, Loc l);
  struct Sequence;
  KvCache& kv_for(const Sequence& seq, int layer, int slot);
  void build_sequences();
  void check_seq(int32_t seq, const char* what) const;
  void release_device();
  void op_resources(const Op& op, std::vector<int>* reads, std::vector<int>* writes) const;
  void op_resources_rows(const Op& op, std::vector<int>* reads, std::vector<int>* writes) const;
  void build_deps();
  // Marks runs of host MatMuls that read the same converted input (a layer's Q, K, V; gate, up)
  // as one decode GEMV pass (Op::gemv_group). Run by build_deps: it needs the cross-lane deps.
  void group_gemvs();
  // Whether MatMul `op` runs its gemv_group followers in its pass this step (one row, CPU lane).
  bool gemv_grouped(const Op& op) const;
  void split_gemv_group_times();
  // After compile(): streamed and resident matmuls read their device copies, prefetches fill them.
  void bind_device_weights();
  // One compiled op list and what runs it; the model runs one at a time (ops_ … end_ns_) and
  // keeps the other here.
  struct Program {
    std::vector<Op> ops;
    std::vector<Lane> lanes;
    std::vector<LaneDeps> deps;
    std::vector<uint8_t> sync_after;
    std::vector<int64_t> start_ns, end_ns;
    std::vector<uint64_t> op_ns, op_calls;
  };
  void swap_program();
  // Exchanges the running program (ops_ … op_calls_) with `p`.
  void exchange(Program& p);
  // Compiles a variant of the decode program (compile's flags) into `into`, beside the decode
  // program, which stays the running one; on a throw `into` is left empty.
  void build_variant(Program& into, bool pipelined, bool layer_steps);
  const std::vector<Op>& decode_program_ops() const { return prefill_active_ ? other_.ops : ops_; }
  const std::vector<Op>& prefill_program_ops() const { return !has_prefill_ ? other_empty_ : prefill_active_ ? ops_ : other_.ops; }
  void relocate_matmul_weights();

  ModelConfig cfg_;
  const ArchVariant* variant_ = nullptr;
  std::unique_ptr<MappedFile> file_;
  // Anonymous, huge-page-advised copy of the matmul weights (see relocate_matmul_weights).
  HugeRegion weight_arena_;
  std::map<std::string, TensorEntry> table_;
  std::vector<std::unique_ptr<Weight>> weights_;
  Weight token_embd_, output_, output_norm_;
  std::vector<float> output_norm_f_, output_norm_b_;
  std::vector<Layer> layers_;
  std::unique_ptr<ThreadPool> pool_;
  std::vector<Op> ops_;
  std::vector<float> x_, h_, q_, k_, v_, att_, gate_, up_;
  std::vector<float> step_logits_;  // a step's logits when they do not go straight to the caller's memory
  std::map<GgmlType, std::vector<uint8_t>> act_;  // converted activations per vec_dot_type
  AttentionScratch attn_scratch_;
  MoeFfn moe_host_, moe_dev_;  // MoE scratch for the host lane and the device's
  MoeBuffers dev_moe_;  // a device with its own kernels: the MoE scratch in its memory
  AttentionScratch dev_attn_scratch_;  // attention on the device's pool
  // Each sequence's KV: layers whose KV is on the host, on the device, placed by sequence (on the
  // host or the device as the sequence says), and the two device staging layers of streamed KV.
  // kv_cache_of_[layer] says which cache holds the layer, kv_index_[layer] its index there.
  struct Sequence {
    std::unique_ptr<KvCache> host, dev, by_seq, staging;
    std::vector<std::vector<float>> saved;  // KVPR: per layer [prefix][n_embd] attn_norm rows (host)
    std::atomic<int64_t> n_past{0};         // read by the JS thread while evalAsync runs on a worker
    Loc kv_loc = Loc::Host;                 // for layers placed by sequence
    // Layer-by-layer (SeqInput::layer): the residual after layer `residual_layer` of position
    // `residual_pos` (n_embd floats), which the call for the next layer continues from.
    std::vector<float> residual;
    int64_t residual_pos = -1;
    int32_t residual_layer = -1;
    // APEX's window: the attention of layer deferred_layer (= residual_layer) started on
    // deferred_ (ticket; 0 once joined), over deferred_q, into deferred_att (n_heads × head_dim
    // floats each); residual is X at that layer's input. The call for the next layer joins it.
    uint64_t deferred_ticket = 0;
    int32_t deferred_layer = -1;  // the layer whose attention was deferred and not yet used (-1: none)
    std::vector<float> deferred_q, deferred_att;
  };
  std::vector<std::unique_ptr<Sequence>> seqs_;
  // After seqs_: destroyed first, so no deferred attention outlives the KV pages it reads.
  DeferredAttention deferred_;
  // The layer program's deferred_attention op at each layer: 0 none, 1 for every row (attention on
  // the host), 2 for host-KV sequences' rows (placed by sequence). Set with the program.
  std::vector<int8_t> layer_defers_;
  // Waits for the sequence's deferred attention, if any; `keep` false also forgets the partly
  // done token (its KV or its position is going away).
  void join_deferred(Sequence& q, bool keep);
  std::vector<int8_t> kv_cache_of_;  // 0 host, 1 device, 2 by sequence
  bool profiling_ = false;
  std::vector<uint64_t> op_ns_, op_calls_;  // indexed like ops_

  // Placement and the accelerator's resources.
  Placement placement_;
  std::unique_ptr<Device> device_;
  std::vector<void*> dev_allocs_;               // everything allocated on device_ for the placement
  std::map<Buf, float*> dev_bufs_;              // device copies of the activation buffers
  std::map<GgmlType, uint8_t*> dev_act_;        // device converted activations
  float* dev_logits_ = nullptr;                 // dev_logit_rows_ rows
  int64_t dev_logit_rows_ = 0;                  // max(sequences, 16): a step wanting all logits runs this many rows
  // Rows of a step on a device: its activation buffers hold this many (prompts run in chunks of
  // it), so the device workspace is a few MB whatever the host's batch size.
  static constexpr int64_t kDeviceRows = kDeviceStepRows;
  std::map<const Weight*, uint8_t*> resident_;  // device copies of resident weights (rows [0, r1))
  uint8_t* slots_[2] = {nullptr, nullptr};      // streamed weights, layer l in slot l % 2
  std::vector<int> kv_index_;                   // model layer -> its layer in its cache
  int64_t recompute_rows_ = 0;                  // KVPR: rows per sequence in dev_recompute_
  float* dev_recompute_ = nullptr;              // KVPR: device rows being recomputed [seq][prefix][n_embd]
  float *dev_rk_ = nullptr, *dev_rv_ = nullptr;  // KVPR: device K and V rows being recomputed
  // A device with its own kernels (Vulkan): its kernels, device copies of the norm weights and
  // biases, contiguous K and V pools that attention gathers a sequence's pages into (pages are
  // separate allocations; a shader binds one pool) with their page table, device copies of W_K
  // and W_V for KVPR's recomputation when they are not resident, and which ops end a submission
  // (another lane waits for them, or they end the step).
  Kernels* dk_ = nullptr;
  std::map<const float*, float*> dev_vecs_;
  uint16_t *dev_gather_k_ = nullptr, *dev_gather_v_ = nullptr;
  uint32_t* dev_page_table_ = nullptr;
  // W_K and W_V as KVPR's recomputation reads them on its lane: a device copy in the GGUF layout
  // (Vulkan), or the host's bytes in the CPU's layout, which the loopback device reads in place.
  struct RecomputeWeight {
    const uint8_t* data = nullptr;
    const quant::PackedFormat* packed = nullptr;
  };
  std::map<const Weight*, RecomputeWeight> recompute_w_;
  std::vector<int64_t> recompute_pos_;  // 0, 1, ...: the positions of recomputed rows (RoPE)
  std::vector<uint8_t> sync_after_;
  std::vector<std::string> placement_notes_;
  Executor executor_;
  Program other_;                 // the op list not running now (see Program)
  Program pipe_;                  // the decode placement's pipelined program (outside its steps)
  int8_t pipe_state_ = 0;         // 0: not compiled yet, 1: compiled, -1: the placement has none
  bool pipelined_ = false;        // set_pipelined
  bool pipe_active_ = false;      // ops_ … hold pipe_'s program (during its step)
  size_t pipe_layer_bytes_ = 0;   // a layer's matmul weight bytes, mean over layers (forward)
  Program layer_prog_;            // the decode placement's layer-by-layer program (outside its steps)
  int8_t layer_prog_state_ = 0;   // as pipe_state_
  bool layer_prog_active_ = false;
  static constexpr size_t kShareCoresLayerBytes = 256 << 10;
  const std::vector<Op> other_empty_;
  bool has_prefill_ = false;      // a prefill placement is compiled
  bool prefill_active_ = false;   // ops_ … end_ns_ hold the prefill placement's program
  int64_t prefill_rows_ = 0;
  Placement prefill_placement_;
  std::vector<Lane> lanes_;      // per op
  std::vector<LaneDeps> deps_;   // per op
  std::vector<int64_t> start_ns_, end_ns_;
  bool tracing_ = false;
  // The last op index the CPU lane's current decode GEMV group covered this step (-1: none).
  int32_t gemv_group_end_ = -1;
  size_t max_trace_ = 0;
  int64_t step_ = 0;
  std::vector<TraceEvent> trace_;
  // The step being executed (read by exec_op on every lane).
  struct Span {
    int32_t seq;
    const int32_t* tokens;
    int64_t row0, n, pos0;
    int32_t layer = -1, layer_end = -1;  // SeqInput::layer: layers [layer, layer_end) of its row, or -1 (all)
    // Whether the span's row takes part in layer l's KV store and attention.
    bool runs_layer(int l) const { return layer < 0 || (l >= layer && l < layer_end); }
    // APEX's window: the row continues from the attention it deferred at layer - 1 (joins), and
    // defers its attention at layer_end - 1 (defers): no attention there within this step.
    bool joins = false, defers = false;
    bool attends(int l) const { return runs_layer(l) && !(defers && l == layer_end - 1); }
  };
  struct StepState {
    std::vector<Span> spans;       // device-KV sequences first (eval_batch orders them so)
    int64_t n = 0;                 // rows
    int64_t n_dev_rows = 0;        // rows of the device-KV sequences: [0, n_dev_rows)
    bool want_all = false;
    bool need_logits = true;       // some sequence finishes in this step (or all logits wanted)
    bool layer_steps = false;      // some span runs one layer (SeqInput::layer)
    float* logits_out = nullptr;   // want_all: n rows, else one per span
  } step_state_;
  std::vector<int64_t> row_pos_;   // position of each row of the step
};

}  // namespace fulcrum
