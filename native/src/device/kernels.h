// The kernels a forward step calls, one interface for every lane that computes: the CPU's
// (device/cpu/cpu_kernels.h: the host lanes on the model's pool, and the loopback device on its
// own pool over its own arena) and a device's own (Vulkan). The executor's one op switch
// (model/forward.cc) resolves each op's buffers for its lane's memory and calls these.
//
// Why an abstract class rather than a table of function pointers: the Vulkan kernels already
// are an object (they record on the calling lane's stream of one device), the CPU kernels carry
// the pool they run on, and a call is made once per op, not per row, so the virtual call costs
// nothing measurable; a class also keeps each signature's documentation in one place.
//
// Every op works on whole buffers of `rows` rows (the step's tokens); the CPU spreads rows over
// its pool, a device over its cores. Pointers are in the lane's memory: host addresses for the
// CPU (loopback arena included), handles the host must never dereference for a device with its
// own memory (Vulkan: device/vulkan/vulkan_device.cc). A device records calls on the calling
// lane's stream, in order, and runs them at sync().
#pragma once
#include <cstddef>
#include <cstdint>

#include "ggml_types.h"
#include "kernels/attention.h"
#include "kernels/ops.h"

namespace fulcrum {
namespace quant {
struct PackedFormat;
}
class CpuKernels;

// Conversions of a row op's output rows into matmul activation formats, made while each row is
// still in L1 (compile's fuse pass folds a Convert op into the RmsNorm / LayerNorm / GLU before
// it). Row r of type[i] goes to dst[i] + r * converted_bytes(type[i], width, 1). CPU only: a
// device with its own kernels reads f32 activations (Kernels::act_type).
struct RowConverts {
  int n = 0;
  GgmlType type[2] = {GgmlType::F32, GgmlType::F32};
  uint8_t* dst[2] = {nullptr, nullptr};
};

// The working memory attention needs on its lane, sized when the placement is set: the CPU's
// scratch, or a device's contiguous K and V pools with their page table (a shader binds one
// pool; KV pages are separate allocations, so a sequence's pages are gathered into it).
struct AttentionWork {
  AttentionScratch* scratch = nullptr;
  uint16_t* k_pool = nullptr;
  uint16_t* v_pool = nullptr;
  const uint32_t* page_table = nullptr;
};

class Kernels {
 public:
  virtual ~Kernels() = default;

  // Whether matmul has a kernel for weights of `type`.
  virtual bool runs(GgmlType type) const = 0;
  // The format matmul reads its activations in for weights of `type`: the CPU's dot products
  // read the format's vec_dot_type (convert() makes it), a device's shaders read f32.
  virtual GgmlType act_type(GgmlType type) const = 0;
  // y[t][r] (y_stride floats between tokens) = row r of w (rows × cols of `type`) · x[t], for
  // t < tokens; x holds `tokens` rows in act_type(type). `packed`: w is in this repacked layout
  // (quant/packed/repack.h; CPU only). `as_decode`: each token's outputs are the bits it gives alone
  // (speculative verification).
  virtual void matmul(GgmlType type, const void* w, const quant::PackedFormat* packed, int64_t rows, int64_t cols, const void* x, int64_t tokens,
                      float* y, int64_t y_stride, bool as_decode) = 0;
  // `rows` rows of `width` f32 into format `type` (activations for matmul).
  virtual void convert(GgmlType type, const float* x, int64_t rows, int64_t width, void* dst) = 0;
  // RMSNorm of rows × groups runs of `width` floats, each run on its own with the same weights w
  // (groups > 1: per head, qk_norm). y may be x.
  virtual void rmsnorm(const float* x, const float* w, float* y, int64_t rows, int64_t groups, int64_t width, float eps, const RowConverts& cv) = 0;
  // LayerNorm per row: (x - mean) / sqrt(var + eps) · w + b.
  virtual void layernorm(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t width, float eps, const RowConverts& cv) = 0;
  // Row r (heads × head_dim floats) rotated in place at position pos[r] (a host array).
  virtual void rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int64_t* pos, const RopeParams& p) = 0;
  // y[r] += b[r] for each of `rows` rows of `width` floats, with b's rows `b_stride` floats
  // apart (0: one bias row for all, a residual otherwise).
  virtual void add(float* y, const float* b, int64_t rows, int64_t width, int64_t b_stride) = 0;
  // g = silu(g) · u (SwiGLU) and g = gelu(g) · u (GeGLU), per row.
  virtual void swiglu(float* g, const float* u, int64_t rows, int64_t width, const RowConverts& cv) = 0;
  virtual void geglu(float* g, const float* u, int64_t rows, int64_t width, const RowConverts& cv) = 0;
  // x = gelu(x) in place (the ungated FFN).
  virtual void gelu(float* x, int64_t rows, int64_t width, const RowConverts& cv) = 0;
  // n_pos rows of K or V (f32, `stride` floats apart) into a head-major KV page of `format` (the
  // layout of KvCache) at positions [pos_in_page, pos_in_page + n_pos) of the page. A device
  // whose attention does not read `format` throws DeviceError naming it.
  virtual void kv_store(const float* rows, int64_t stride, void* page, KvFormat format, int64_t n_pos, int64_t pos_in_page, int64_t n_kv_heads,
                        int64_t head_dim, int64_t page_tokens) = 0;
  // Causal attention of `rows` query rows at positions [pos0, pos0 + rows) over one sequence's
  // KV pages (kernels/attention.h), with the lane's working memory.
  virtual void attention(const AttentionShape& shape, const float* q, int64_t rows, int64_t pos0, const KvPages& kv, float* out,
                         const AttentionWork& work) = 0;
  // Memory to memory, on the lane (regions may overlap on the CPU).
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  // dst[i] = src[rows[i]] for i < n (rows of `width` floats): an expert's tokens, gathered.
  virtual void gather_rows(const float* src, float* dst, const uint32_t* rows, int64_t n, int64_t width) = 0;
  // dst[rows[i]] = weights[i] · src[i] for i < n: an expert's outputs to their (token, slot) rows.
  virtual void scatter_rows(const float* src, float* dst, const uint32_t* rows, const float* weights, int64_t n, int64_t width) = 0;

  // Host-only ops (the embedding table and the logits live in host memory); a device throws.
  // Rows of the embedding table (row_bytes apart, of `type`) for tokens[i] into out[i], × scale.
  virtual void embed(GgmlType type, const uint8_t* table, size_t row_bytes, const int32_t* tokens, int64_t n, float* out, int64_t width, float scale) = 0;
  // x = tanh(x / cap) · cap for n floats.
  virtual void softcap(float* x, int64_t n, float cap) = 0;

  // These kernels as the CPU's, for the host-only passes an op may take on them (a MoE decode
  // step's experts in one grouped GEMV pass, model/moe.cc); nullptr on a device's own kernels.
  virtual CpuKernels* as_cpu() { return nullptr; }

  // A device runs what the calling lane recorded and waits for it; the CPU has run it already.
  virtual void sync() = 0;
  // Drops every lane's recorded, unsubmitted work (after a step failed part-way).
  virtual void discard() = 0;
};

}  // namespace fulcrum
