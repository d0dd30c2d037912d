// The CPU's kernels behind the Kernels interface: the row kernels (kernels/ops.h), attention
// (kernels/attention.h) and the matmuls (kernels/matmul.h) on one thread pool. The host lanes
// run them on the model's pool; the loopback device runs the same ones on its own pool over its
// own arena, so its results are bit-identical to the host's. An object is two words (vtable and
// pool), made where an op runs: nothing to keep in step with set_threads.
#pragma once
#include "core/thread_pool.h"
#include "device/kernels.h"
#include "kernels/matmul.h"

namespace fulcrum {

class CpuKernels final : public Kernels {
 public:
  explicit CpuKernels(ThreadPool& pool) : pool_(pool) {}

  bool runs(GgmlType type) const override;
  GgmlType act_type(GgmlType type) const override;
  void matmul(GgmlType type, const void* w, const quant::PackedFormat* packed, int64_t rows, int64_t cols, const void* x, int64_t tokens, float* y,
              int64_t y_stride, bool as_decode) override;
  void convert(GgmlType type, const float* x, int64_t rows, int64_t width, void* dst) override;
  void rmsnorm(const float* x, const float* w, float* y, int64_t rows, int64_t groups, int64_t width, float eps, const RowConverts& cv) override;
  void layernorm(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t width, float eps, const RowConverts& cv) override;
  void rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int64_t* pos, const RopeParams& p) override;
  void add(float* y, const float* b, int64_t rows, int64_t width, int64_t b_stride) override;
  void swiglu(float* g, const float* u, int64_t rows, int64_t width, const RowConverts& cv) override;
  void geglu(float* g, const float* u, int64_t rows, int64_t width, const RowConverts& cv) override;
  void gelu(float* x, int64_t rows, int64_t width, const RowConverts& cv) override;
  void kv_store(const float* rows, int64_t stride, void* page, KvFormat format, int64_t n_pos, int64_t pos_in_page, int64_t n_kv_heads, int64_t head_dim,
                int64_t page_tokens) override;
  void attention(const AttentionShape& shape, const float* q, int64_t rows, int64_t pos0, const KvPages& kv, float* out,
                 const AttentionWork& work) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void gather_rows(const float* src, float* dst, const uint32_t* rows, int64_t n, int64_t width) override;
  void scatter_rows(const float* src, float* dst, const uint32_t* rows, const float* weights, int64_t n, int64_t width) override;
  void embed(GgmlType type, const uint8_t* table, size_t row_bytes, const int32_t* tokens, int64_t n, float* out, int64_t width, float scale) override;
  void softcap(float* x, int64_t n, float cap) override;
  // One decode token's products with several packed matrices in one pool run (gemv_packed_group).
  void gemv_group(const PackedGemv* items, int n);
  CpuKernels* as_cpu() override { return this; }
  void sync() override {}
  void discard() override {}

 private:
  // fn(r) for r < rows, spread over the pool (one row, or a pool of one: on the calling thread).
  template <typename Fn>
  void for_rows(int64_t rows, Fn&& fn);
  ThreadPool& pool_;
};

}  // namespace fulcrum
