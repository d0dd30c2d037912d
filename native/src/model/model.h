// A decoder-only transformer (llama, qwen2) over memory-mapped GGUF weights. The forward pass
// is compiled once at load into a flat list of ops (one switch of op kinds runs it), so a step
// never returns to JS per op and allocates nothing: all buffers are sized at load.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "ggml_types.h"
#include "kernels/attention.h"
#include "kernels/ops.h"
#include "model/kv_cache.h"

namespace fulcrum {

struct ModelConfig {
  std::string arch;  // "llama" | "qwen2"
  int64_t n_layers = 0, n_embd = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, n_ff = 0, n_vocab = 0;
  float norm_eps = 1e-5f;
  RopeParams rope;
  int64_t context_length = 0;  // KV cache positions
  int64_t batch_size = 512;    // most tokens per forward step (longer inputs are chunked)
  int threads = 1;
  uint64_t memory_limit_bytes = 0;  // 0: /proc/meminfo MemAvailable only
  int64_t kv_page_tokens = KvCache::kPageTokens;  // positions per KV cache page
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
  const uint8_t* data = nullptr;
  size_t row_bytes = 0;
};

class Model {
 public:
  // Throws std::runtime_error naming the problem (file, tensor, type, numbers).
  Model(const std::string& path, const std::vector<TensorEntry>& tensors, const ModelConfig& cfg);

  // Runs tokens at positions [start_pos, start_pos + n). Returns the logits of the last token
  // (n_vocab floats), or of every token (n × n_vocab) when want_all. Throws on bad input.
  std::vector<float> eval(const int32_t* tokens, int64_t n, int64_t start_pos, bool want_all);
  // Forgets KV positions ≥ from_pos.
  void clear_kv(int64_t from_pos);
  int64_t n_past() const { return n_past_.load(std::memory_order_relaxed); }
  int threads() const { return pool_->size(); }
  void set_threads(int n);
  const ModelConfig& config() const { return cfg_; }
  uint64_t kv_bytes() const;  // the whole context's KV cache (what the load-time check counts)
  // KV cache pages held by the page tables, and all pages allocated (free list included).
  uint64_t kv_bytes_in_use() const { return kv_->bytes_in_use(); }
  uint64_t kv_bytes_reserved() const { return kv_->bytes_reserved(); }

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

 private:
  enum class Buf { X, H, Q, K, V, Att, Gate, Up, Logits };
  enum class OpKind { Embed, RmsNorm, Convert, MatMul, AddBias, Rope, StoreKv, Attention, AddResidual, SwiGlu, LastRows };
  struct Op {
    OpKind kind;
    int layer = -1;
    Buf src = Buf::X, dst = Buf::X;
    const Weight* w = nullptr;
    const float* vec = nullptr;  // norm weight or bias (f32, owned by the model)
    GgmlType act_type = GgmlType::F32;  // Convert: target format; MatMul: the activation format
    int64_t width = 0;                  // row width of src/dst where it matters
    // RmsNorm / SwiGlu: Convert ops folded into this one (compile's fuse pass): each output row
    // is also converted to these activation formats while it is still in L1, instead of a
    // second pass over the whole batch (4-11 MB per op for a 512-token prefill) from L2/L3.
    GgmlType fused_convert[2] = {GgmlType::F32, GgmlType::F32};
    int n_fused_convert = 0;
  };
  struct Layer {
    Weight attn_norm, wq, wk, wv, wo, ffn_norm, gate, up, down;
    std::vector<float> attn_norm_f, ffn_norm_f, bq, bk, bv;
  };

  const Weight& find(const std::string& name, int64_t cols, int64_t rows, bool required, bool matmul);
  std::vector<float> vector_f32(const Weight& w, int64_t n);
  void compile();
  void fuse_converts();
  void emit_matmuls(Buf src, int64_t width, const std::vector<std::pair<const Weight*, Buf>>& outs, int layer);
  float* buf(Buf b);
  int64_t width(Buf b) const;
  void forward(const int32_t* tokens, int64_t n, int64_t pos, bool want_all, float* logits_out);
  void relocate_matmul_weights();

  // Anonymous, huge-page-advised copy of the matmul weights (see relocate_matmul_weights).
  struct Arena {
    void* base = nullptr;
    size_t size = 0;
    Arena() = default;
    Arena(const Arena&) = delete;
    Arena& operator=(const Arena&) = delete;
    ~Arena();
  };

  ModelConfig cfg_;
  std::unique_ptr<MappedFile> file_;
  Arena arena_;
  std::map<std::string, TensorEntry> table_;
  std::vector<std::unique_ptr<Weight>> weights_;
  Weight token_embd_, output_, output_norm_;
  std::vector<float> output_norm_f_;
  std::vector<Layer> layers_;
  std::unique_ptr<ThreadPool> pool_;
  std::vector<Op> ops_;
  std::vector<float> x_, h_, q_, k_, v_, att_, gate_, up_, logits_;
  std::map<GgmlType, std::vector<uint8_t>> act_;  // converted activations per vec_dot_type
  AttentionScratch attn_scratch_;
  std::unique_ptr<KvCache> kv_;  // every layer's K and V, paged
  std::atomic<int64_t> n_past_{0};  // read by the JS thread while evalAsync runs on a worker
  bool profiling_ = false;
  std::vector<uint64_t> op_ns_, op_calls_;  // indexed like ops_
};

}  // namespace fulcrum
