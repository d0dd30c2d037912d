// AVX2/FMA/F16C float primitives. Helpers stay in an anonymous namespace (ISA-file ODR rule).
#include <immintrin.h>

#include <cmath>

#include "core/fp16.h"
#include "kernels/float_fns.h"

namespace fulcrum {
namespace kernels {
namespace {

inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

inline __m256 load_h(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256 load_bf(const uint16_t* p) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
}

void dot_f32(int64_t n, float* out, const void* w, const void* x) {
  const float* a = static_cast<const float*>(w);
  const float* b = static_cast<const float*>(x);
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
    s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  float sum = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  for (; i < n; ++i) sum += a[i] * b[i];
  *out = sum;
}

void dot_f16(int64_t n, float* out, const void* w, const void* x) {
  const uint16_t* a = static_cast<const uint16_t*>(w);
  const uint16_t* b = static_cast<const uint16_t*>(x);
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_fmadd_ps(load_h(a + i), load_h(b + i), s0);
    s1 = _mm256_fmadd_ps(load_h(a + i + 8), load_h(b + i + 8), s1);
    s2 = _mm256_fmadd_ps(load_h(a + i + 16), load_h(b + i + 16), s2);
    s3 = _mm256_fmadd_ps(load_h(a + i + 24), load_h(b + i + 24), s3);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(load_h(a + i), load_h(b + i), s0);
  float sum = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  for (; i < n; ++i) sum += fp16_to_fp32(a[i]) * fp16_to_fp32(b[i]);
  *out = sum;
}

void dot_bf16(int64_t n, float* out, const void* w, const void* x) {
  const uint16_t* a = static_cast<const uint16_t*>(w);
  const uint16_t* b = static_cast<const uint16_t*>(x);
  __m256 s0 = _mm256_setzero_ps(), s1 = s0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(load_bf(a + i), load_bf(b + i), s0);
    s1 = _mm256_fmadd_ps(load_bf(a + i + 8), load_bf(b + i + 8), s1);
  }
  float sum = hsum(_mm256_add_ps(s0, s1));
  for (; i < n; ++i) sum += bf16_to_fp32(a[i]) * bf16_to_fp32(b[i]);
  *out = sum;
}

void f32_to_f16(const float* src, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) d[i] = fp32_to_fp16(src[i]);
}

void f16_to_f32(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_h(s + i));
  for (; i < n; ++i) dst[i] = fp16_to_fp32(s[i]);
}

void f32_to_bf16(const float* src, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_bf16(src[i]);
}

void bf16_to_f32(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_bf(s + i));
  for (; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
}

void axpy_f16(int64_t n, float a, const uint16_t* x, float* y) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, load_h(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * fp16_to_fp32(x[i]);
}

// As the AVX-512 version, 8 lanes: K/V rows of up to 128 values stay in 16 ymm registers.
void kq_f16(int64_t n, int64_t hd, const uint16_t* k, int64_t kstride, const float* q, int64_t nq, float scale,
            float* scores, int64_t ld) {
  if (hd % 8 != 0 || hd > 128) {
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < nq; ++j) {
        float s = 0;
        for (int64_t d = 0; d < hd; ++d) s += q[j * hd + d] * fp16_to_fp32(k[t * kstride + d]);
        scores[j * ld + t] = s * scale;
      }
    return;
  }
  const int64_t nc = hd / 8;
  __m256 kv[16];
  for (int64_t t = 0; t < n; ++t) {
    const uint16_t* kr = k + t * kstride;
    for (int64_t c = 0; c < nc; ++c) kv[c] = load_h(kr + 8 * c);
    for (int64_t j = 0; j < nq; ++j) {
      const float* qj = q + j * hd;
      __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(qj), kv[0]);
      for (int64_t c = 1; c < nc; ++c) acc = _mm256_fmadd_ps(_mm256_loadu_ps(qj + 8 * c), kv[c], acc);
      scores[j * ld + t] = hsum(acc) * scale;
    }
  }
}

void pv_f16(int64_t n, int64_t hd, const uint16_t* v, int64_t vstride, const float* p, int64_t nq, int64_t ld, float* out) {
  if (hd % 8 != 0 || hd > 128) {
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < nq; ++j)
        for (int64_t d = 0; d < hd; ++d) out[j * hd + d] += p[j * ld + t] * fp16_to_fp32(v[t * vstride + d]);
    return;
  }
  const int64_t nc = hd / 8;
  __m256 vv[16];
  for (int64_t t = 0; t < n; ++t) {
    const uint16_t* vr = v + t * vstride;
    for (int64_t c = 0; c < nc; ++c) vv[c] = load_h(vr + 8 * c);
    for (int64_t j = 0; j < nq; ++j) {
      const __m256 a = _mm256_set1_ps(p[j * ld + t]);
      float* oj = out + j * hd;
      for (int64_t c = 0; c < nc; ++c) _mm256_storeu_ps(oj + 8 * c, _mm256_fmadd_ps(a, vv[c], _mm256_loadu_ps(oj + 8 * c)));
    }
  }
}

// exp(x) for x ≤ 0, as in the AVX-512 file; 2^n is built in the exponent bits.
inline __m256 exp_nonpos(__m256 x) {
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256 ok = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_GE_OQ);
  // n ≥ -126 wherever ok is set, so the biased exponent stays positive.
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(_mm256_max_ps(n, _mm256_set1_ps(-126.0f))), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(ok, _mm256_mul_ps(p, _mm256_castsi256_ps(bits)));
}

float exp_sub_sum(float* x, int64_t n, float m) {
  const __m256 vm = _mm256_set1_ps(m);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp_nonpos(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  float sum = hsum(acc);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  return sum;
}

void scale_round_f16(float* x, int64_t n, float a) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(x + i), va), _MM_FROUND_TO_NEAREST_INT)));
  for (; i < n; ++i) x[i] = fp16_to_fp32(fp32_to_fp16(x[i] * a));
}

}  // namespace

void fill_float_fns_avx2(FloatFns* f) {
  f->dot_f32 = dot_f32;
  f->dot_f16 = dot_f16;
  f->dot_bf16 = dot_bf16;
  f->f32_to_f16 = f32_to_f16;
  f->f16_to_f32 = f16_to_f32;
  f->f32_to_bf16 = f32_to_bf16;
  f->bf16_to_f32 = bf16_to_f32;
  f->axpy_f16 = axpy_f16;
  f->kq_f16 = kq_f16;
  f->pv_f16 = pv_f16;
  f->exp_sub_sum = exp_sub_sum;
  f->scale_round_f16 = scale_round_f16;
}

}  // namespace kernels
}  // namespace fulcrum
