// F32, F16 and BF16 in the type-traits table, plus the scalar float primitives.
// vec_dot_type follows llama.cpp's CPU backend so results round the same way: F16 weights take
// activations converted to F16, BF16 weights take BF16, F32 takes F32.
#include "ggml_types.h"
#include "core/fp16.h"
#include "kernels/float_fns.h"
#include "quant/formats/blocks.h"

#include <cmath>
#include <cstring>

namespace fulcrum {
namespace kernels {
namespace {

void dot_f32_scalar(int64_t n, float* out, const void* w, const void* x) {
  const float* a = static_cast<const float*>(w);
  const float* b = static_cast<const float*>(x);
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) s[j] += a[i + j] * b[i + j];
  float sum = 0;
  for (; i < n; ++i) sum += a[i] * b[i];
  for (int j = 0; j < 8; ++j) sum += s[j];
  *out = sum;
}

void dot_f16_scalar(int64_t n, float* out, const void* w, const void* x) {
  const uint16_t* a = static_cast<const uint16_t*>(w);
  const uint16_t* b = static_cast<const uint16_t*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += fp16_to_fp32(a[i]) * fp16_to_fp32(b[i]);
  *out = sum;
}

void dot_bf16_scalar(int64_t n, float* out, const void* w, const void* x) {
  const uint16_t* a = static_cast<const uint16_t*>(w);
  const uint16_t* b = static_cast<const uint16_t*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += bf16_to_fp32(a[i]) * bf16_to_fp32(b[i]);
  *out = sum;
}

void f32_to_f16_scalar(const float* src, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_fp16(src[i]);
}
void f16_to_f32_scalar(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(s[i]);
}
void f32_to_bf16_scalar(const float* src, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_bf16(src[i]);
}
void bf16_to_f32_scalar(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
}
void axpy_f16_scalar(int64_t n, float a, const uint16_t* x, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * fp16_to_fp32(x[i]);
}

// The scalar attention kernels are the reference, not a fast path: they take decode's prefetch
// distance (ahead, float_fns.h) and do not prefetch.
void kq_f16_scalar(int64_t n, int64_t hd, const uint16_t* k, int64_t kstride, const float* q, int64_t nq, float scale,
                   float* scores, int64_t ld, int64_t /*ahead*/) {
  for (int64_t t = 0; t < n; ++t) {
    const uint16_t* kr = k + t * kstride;
    for (int64_t j = 0; j < nq; ++j) {
      float s = 0;
      for (int64_t d = 0; d < hd; ++d) s += q[j * hd + d] * fp16_to_fp32(kr[d]);
      scores[j * ld + t] = s * scale;
    }
  }
}

void pv_f16_scalar(int64_t n, int64_t hd, const uint16_t* v, int64_t vstride, const float* p, int64_t nq, int64_t ld,
                   float* out, int64_t /*ahead*/) {
  for (int64_t t = 0; t < n; ++t) {
    const uint16_t* vr = v + t * vstride;
    for (int64_t j = 0; j < nq; ++j) {
      const float a = p[j * ld + t];
      for (int64_t d = 0; d < hd; ++d) out[j * hd + d] += a * fp16_to_fp32(vr[d]);
    }
  }
}

// A Q8_0 cache value: d·q of its block (exact in f32, as the SIMD kernels compute it).
inline float q8_0_value(const uint8_t* row, int64_t d) {
  const uint8_t* b = row + (d / quant::QK8_0) * static_cast<int64_t>(sizeof(quant::block_q8_0));
  uint16_t h;
  std::memcpy(&h, b, sizeof h);
  return fp16_to_fp32(h) * static_cast<float>(static_cast<int8_t>(b[2 + d % quant::QK8_0]));
}

void kq_q8_0_scalar(int64_t n, int64_t hd, const uint8_t* k, int64_t kstride, const float* q, int64_t nq, float scale, float* scores,
                    int64_t ld, int64_t /*ahead*/) {
  for (int64_t t = 0; t < n; ++t) {
    const uint8_t* kr = k + t * kstride;
    for (int64_t j = 0; j < nq; ++j) {
      float s = 0;
      for (int64_t d = 0; d < hd; ++d) s += q[j * hd + d] * q8_0_value(kr, d);
      scores[j * ld + t] = s * scale;
    }
  }
}

void pv_q8_0_scalar(int64_t n, int64_t hd, const uint8_t* v, int64_t vstride, const float* p, int64_t nq, int64_t ld, float* out, float*,
                    int64_t /*ahead*/) {
  for (int64_t t = 0; t < n; ++t) {
    const uint8_t* vr = v + t * vstride;
    for (int64_t j = 0; j < nq; ++j) {
      const float a = p[j * ld + t];
      for (int64_t d = 0; d < hd; ++d) out[j * hd + d] += a * q8_0_value(vr, d);
    }
  }
}

float max_f32_scalar(const float* x, int64_t n) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

float exp_sub_sum_scalar(float* x, int64_t n, float m) {
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  return sum;
}

void scale_round_f16_scalar(float* x, int64_t n, float a) {
  for (int64_t i = 0; i < n; ++i) x[i] = fp16_to_fp32(fp32_to_fp16(x[i] * a));
}

// No blocked layout without SIMD registers: attention falls back to kq_f16 / pv_f16 per token.
bool kq_block_f16_none(int64_t, int64_t, const uint16_t*, int64_t, const float*, int64_t, int64_t, int64_t, float, float*, int64_t, float*) {
  return false;
}
bool pv_block_f16_none(int64_t, int64_t, const uint16_t*, int64_t, const float*, int64_t, int64_t, int64_t, int64_t, float*, int64_t, float*) {
  return false;
}

bool kq_block_q8_0_none(int64_t, int64_t, const uint8_t*, int64_t, const float*, int64_t, int64_t, int64_t, float, float*, int64_t, float*) {
  return false;
}
bool pv_block_q8_0_none(int64_t, int64_t, const uint8_t*, int64_t, const float*, int64_t, int64_t, int64_t, int64_t, float*, int64_t, float*) {
  return false;
}

void f32_copy_row(const float* src, void* dst, int64_t n) { std::memcpy(dst, src, static_cast<size_t>(n) * 4); }
void f32_dequant_row(const void* src, float* dst, int64_t n) { std::memcpy(dst, src, static_cast<size_t>(n) * 4); }

int64_t argmax_finite_scalar(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return -1;
    if (x[i] > x[best]) best = i;
  }
  return best;
}

void swiglu_scalar(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void rmsnorm_scalar(const float* x, const float* w, float* y, int64_t n, float eps) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = w ? (x[i] * scale) * w[i] : x[i] * scale;
}

}  // namespace

void fill_float_fns_scalar(FloatFns* f) {
  f->dot_f32 = dot_f32_scalar;
  f->dot_f16 = dot_f16_scalar;
  f->dot_bf16 = dot_bf16_scalar;
  f->gemm_tile_f32 = f->gemm_tile_f16 = f->gemm_tile_bf16 = nullptr;
  f->float_tile_rows = f->float_tile_cols = 0;
  f->f32_to_f16 = f32_to_f16_scalar;
  f->f16_to_f32 = f16_to_f32_scalar;
  f->f32_to_bf16 = f32_to_bf16_scalar;
  f->bf16_to_f32 = bf16_to_f32_scalar;
  f->axpy_f16 = axpy_f16_scalar;
  f->kq_f16 = kq_f16_scalar;
  f->pv_f16 = pv_f16_scalar;
  f->max_f32 = max_f32_scalar;
  f->exp_sub_sum = exp_sub_sum_scalar;
  f->swiglu = swiglu_scalar;
  f->rmsnorm = rmsnorm_scalar;
  f->argmax_finite = argmax_finite_scalar;
  f->scale_round_f16 = scale_round_f16_scalar;
  f->kq_block_f16 = kq_block_f16_none;
  f->pv_block_f16 = pv_block_f16_none;
  f->kq_q8_0 = kq_q8_0_scalar;
  f->pv_q8_0 = pv_q8_0_scalar;
  f->kq_block_q8_0 = kq_block_q8_0_none;
  f->pv_block_q8_0 = pv_block_q8_0_none;
}

namespace {
FloatFns g_fns{};
}  // namespace

const FloatFns& select_float_fns(Isa isa) {
  switch (isa) {
    case Isa::Avx512: fill_float_fns_avx512(&g_fns); break;
    case Isa::AvxVnni:  // VNNI is an integer dot: the float kernels are AVX2's
    case Isa::Avx2: fill_float_fns_avx2(&g_fns); break;
    case Isa::Scalar: fill_float_fns_scalar(&g_fns); break;
  }
  return g_fns;
}

const FloatFns& float_fns() {
  (void)kernel_choice();  // the first use makes the choice, which installs g_fns
  return g_fns;
}

void register_float_types(TypeTraits* table, const FloatFns& fns) {
  TypeTraits& f32 = table[static_cast<int>(GgmlType::F32)];
  f32 = TypeTraits{"F32", 1, 4, true, GgmlType::F32, f32_dequant_row, f32_copy_row, fns.dot_f32};
  TypeTraits& f16 = table[static_cast<int>(GgmlType::F16)];
  f16 = TypeTraits{"F16", 1, 2, true, GgmlType::F16, fns.f16_to_f32, fns.f32_to_f16, fns.dot_f16};
  TypeTraits& bf16 = table[static_cast<int>(GgmlType::BF16)];
  bf16 = TypeTraits{"BF16", 1, 2, true, GgmlType::BF16, fns.bf16_to_f32, fns.f32_to_bf16, fns.dot_bf16};
  // Prefill tiles where the ISA has them, in vec_dot's order (float_simd.h); decode keeps vec_dot
  // row after row.
  const struct {
    TypeTraits* tt;
    GemmTileFn tile;
  } tiles[] = {{&f32, fns.gemm_tile_f32}, {&f16, fns.gemm_tile_f16}, {&bf16, fns.gemm_tile_bf16}};
  for (const auto& t : tiles) {
    if (!t.tile) continue;
    t.tt->gemm_tile = t.tile;
    t.tt->tile_rows = fns.float_tile_rows;
    t.tt->tile_cols = fns.float_tile_cols;
    t.tt->tile_matches_decode = true;
  }
}

}  // namespace kernels
}  // namespace fulcrum
