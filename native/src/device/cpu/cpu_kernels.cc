// The CPU's kernels: each op's rows spread over the pool, every row computed by the same row
// kernel as a single-threaded run would (so results do not depend on the thread count).
#include "device/cpu/cpu_kernels.h"

#include <cmath>
#include <cstring>

#include "kernels/float_fns.h"
#include "kernels/matmul.h"
#include "quant/packed/repack.h"

namespace fulcrum {
namespace {

// Row r of an op's output into the activation formats of its fused conversions.
inline void convert_row(const RowConverts& cv, const float* row, int64_t r, int64_t width) {
  for (int k = 0; k < cv.n; ++k) type_traits(cv.type[k]).quantize_row(row, cv.dst[k] + static_cast<size_t>(r) * converted_bytes(cv.type[k], width, 1), width);
}

}  // namespace

template <typename Fn>
void CpuKernels::for_rows(int64_t rows, Fn&& fn) {
  if (rows == 1 || pool_.size() == 1) {
    for (int64_t r = 0; r < rows; ++r) fn(r);
    return;
  }
  pool_.run([&](int ith, int nth) {
    int64_t b, e;
    ThreadPool::split(rows, ith, nth, &b, &e);
    for (int64_t r = b; r < e; ++r) fn(r);
  });
}

bool CpuKernels::runs(GgmlType type) const {
  const TypeTraits& tt = type_traits(type);
  return tt.supported && tt.vec_dot;
}

GgmlType CpuKernels::act_type(GgmlType type) const { return type_traits(type).vec_dot_type; }

void CpuKernels::matmul(GgmlType type, const void* w, const quant::PackedFormat* packed, int64_t rows, int64_t cols, const void* x, int64_t tokens,
                        float* y, int64_t y_stride, bool as_decode) {
  if (packed) matmul_packed(pool_, *packed, w, rows, cols, x, tokens, y, y_stride);
  else matmul_prepared(pool_, type, w, rows, cols, x, tokens, y, y_stride, true, as_decode);
}

void CpuKernels::gemv_group(const PackedGemv* items, int n) { gemv_packed_group(pool_, items, n); }

void CpuKernels::convert(GgmlType type, const float* x, int64_t rows, int64_t width, void* dst) { convert_rows(pool_, type, x, rows, width, dst); }

void CpuKernels::rmsnorm(const float* x, const float* w, float* y, int64_t rows, int64_t groups, int64_t width, float eps, const RowConverts& cv) {
  const int64_t rw = groups * width;
  for_rows(rows, [&](int64_t r) {
    for (int64_t g = 0; g < groups; ++g) rmsnorm_row(x + r * rw + g * width, w, y + r * rw + g * width, width, eps);
    convert_row(cv, y + r * rw, r, rw);
  });
}

void CpuKernels::layernorm(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t width, float eps, const RowConverts& cv) {
  for_rows(rows, [&](int64_t r) {
    layernorm_row(x + r * width, w, b, y + r * width, width, eps);
    convert_row(cv, y + r * width, r, width);
  });
}

void CpuKernels::rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int64_t* pos, const RopeParams& p) {
  const int64_t w = heads * head_dim;
  for_rows(rows, [&](int64_t r) { rope_row(x + r * w, heads, head_dim, pos[r], p); });
}

void CpuKernels::add(float* y, const float* b, int64_t rows, int64_t width, int64_t b_stride) {
  for_rows(rows, [&](int64_t r) { add_row(y + r * width, b + r * b_stride, width); });
}

void CpuKernels::swiglu(float* g, const float* u, int64_t rows, int64_t width, const RowConverts& cv) {
  for_rows(rows, [&](int64_t r) {
    swiglu_row(g + r * width, u + r * width, g + r * width, width);
    convert_row(cv, g + r * width, r, width);
  });
}

void CpuKernels::geglu(float* g, const float* u, int64_t rows, int64_t width, const RowConverts& cv) {
  for_rows(rows, [&](int64_t r) {
    geglu_row(g + r * width, u + r * width, g + r * width, width);
    convert_row(cv, g + r * width, r, width);
  });
}

void CpuKernels::gelu(float* x, int64_t rows, int64_t width, const RowConverts& cv) {
  for_rows(rows, [&](int64_t r) {
    gelu_row(x + r * width, x + r * width, width);
    convert_row(cv, x + r * width, r, width);
  });
}

void CpuKernels::kv_store(const float* rows, int64_t stride, void* page, KvFormat format, int64_t n_pos, int64_t pos_in_page, int64_t n_kv_heads,
                          int64_t head_dim, int64_t page_tokens) {
  // Head-major page: each position's row scatters into one row per KV head. A few KB per token:
  // on the calling thread. Q8_0 rows are quantized as llama.cpp quantizes a q8_0 cache row (and
  // the Q8_0 matmul inputs): d = amax / 127 per block of 32, values rounded to nearest.
  const kernels::FloatFns& fns = kernels::float_fns();
  const int64_t row_bytes = kv_row_bytes(format, head_dim);
  const auto quantize = format == KvFormat::Q8_0 ? type_traits(GgmlType::Q8_0).quantize_row : nullptr;
  uint8_t* base = static_cast<uint8_t*>(page);
  for (int64_t r = 0; r < n_pos; ++r)
    for (int64_t g = 0; g < n_kv_heads; ++g) {
      const float* src = rows + r * stride + g * head_dim;
      uint8_t* dst = base + (g * page_tokens + pos_in_page + r) * row_bytes;
      if (quantize) quantize(src, dst, head_dim);
      else fns.f32_to_f16(src, dst, head_dim);
    }
}

void CpuKernels::attention(const AttentionShape& shape, const float* q, int64_t rows, int64_t pos0, const KvPages& kv, float* out,
                           const AttentionWork& work) {
  fulcrum::attention(pool_, shape, q, rows, pos0, kv, out, *work.scratch);
}

void CpuKernels::copy(void* dst, const void* src, size_t bytes) { std::memmove(dst, src, bytes); }

void CpuKernels::gather_rows(const float* src, float* dst, const uint32_t* rows, int64_t n, int64_t width) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * width, src + static_cast<int64_t>(rows[i]) * width, static_cast<size_t>(width) * sizeof(float));
}

void CpuKernels::scatter_rows(const float* src, float* dst, const uint32_t* rows, const float* weights, int64_t n, int64_t width) {
  for (int64_t i = 0; i < n; ++i) {
    float* d = dst + static_cast<int64_t>(rows[i]) * width;
    for (int64_t c = 0; c < width; ++c) d[c] = weights[i] * src[i * width + c];
  }
}

void CpuKernels::embed(GgmlType type, const uint8_t* table, size_t row_bytes, const int32_t* tokens, int64_t n, float* out, int64_t width, float scale) {
  const DequantizeRowFn dq = type_traits(type).dequantize_row;
  for (int64_t i = 0; i < n; ++i) dq(table + static_cast<size_t>(tokens[i]) * row_bytes, out + i * width, width);
  if (scale != 1.f)
    for (int64_t i = 0; i < n * width; ++i) out[i] *= scale;
}

void CpuKernels::softcap(float* x, int64_t n, float cap) {
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i] * inv) * cap;
}

}  // namespace fulcrum
