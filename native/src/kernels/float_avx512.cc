// AVX-512 float primitives. Helpers stay in an anonymous namespace (ISA-file ODR rule).
#include <immintrin.h>

#include "core/fp16.h"
#include "kernels/float_fns.h"

namespace fulcrum {
namespace kernels {
namespace {

inline __m512 load_h(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline __m512 load_bf(const uint16_t* p) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
}
inline __mmask16 tail_mask(int64_t r) { return static_cast<__mmask16>((1u << r) - 1u); }

void dot_f32(int64_t n, float* out, const void* w, const void* x) {
  const float* a = static_cast<const float*>(w);
  const float* b = static_cast<const float*>(x);
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    s2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(b + i + 32), s2);
    s3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(b + i + 48), s3);
  }
  for (; i + 16 <= n; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s1);
  }
  *out = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

void dot_f16(int64_t n, float* out, const void* w, const void* x) {
  const uint16_t* a = static_cast<const uint16_t*>(w);
  const uint16_t* b = static_cast<const uint16_t*>(x);
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    s0 = _mm512_fmadd_ps(load_h(a + i), load_h(b + i), s0);
    s1 = _mm512_fmadd_ps(load_h(a + i + 16), load_h(b + i + 16), s1);
    s2 = _mm512_fmadd_ps(load_h(a + i + 32), load_h(b + i + 32), s2);
    s3 = _mm512_fmadd_ps(load_h(a + i + 48), load_h(b + i + 48), s3);
  }
  for (; i + 16 <= n; i += 16) s0 = _mm512_fmadd_ps(load_h(a + i), load_h(b + i), s0);
  float sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
  for (; i < n; ++i) sum += fp16_to_fp32(a[i]) * fp16_to_fp32(b[i]);
  *out = sum;
}

void dot_bf16(int64_t n, float* out, const void* w, const void* x) {
  const uint16_t* a = static_cast<const uint16_t*>(w);
  const uint16_t* b = static_cast<const uint16_t*>(x);
  __m512 s0 = _mm512_setzero_ps(), s1 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm512_fmadd_ps(load_bf(a + i), load_bf(b + i), s0);
    s1 = _mm512_fmadd_ps(load_bf(a + i + 16), load_bf(b + i + 16), s1);
  }
  float sum = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
  for (; i < n; ++i) sum += bf16_to_fp32(a[i]) * bf16_to_fp32(b[i]);
  *out = sum;
}

void f32_to_f16(const float* src, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) d[i] = fp32_to_fp16(src[i]);
}

void f16_to_f32(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, load_h(s + i));
  for (; i < n; ++i) dst[i] = fp16_to_fp32(s[i]);
}

void f32_to_bf16(const float* src, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_bf16(src[i]);
}

void bf16_to_f32(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, load_bf(s + i));
  for (; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
}

void axpy_f16(int64_t n, float a, const uint16_t* x, float* y) {
  const __m512 va = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, load_h(x + i), _mm512_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * fp16_to_fp32(x[i]);
}

constexpr int64_t kAheadRows = 8;

// K rows of up to 256 values are held in registers (16 zmm) while every head of the group
// reads them; other head sizes take the row-at-a-time fallback.
void kq_f16(int64_t n, int64_t hd, const uint16_t* k, int64_t kstride, const float* q, int64_t nq, float scale,
            float* scores, int64_t ld) {
  if (hd % 16 != 0 || hd > 256) {
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < nq; ++j) {
        float s = 0;
        for (int64_t d = 0; d < hd; ++d) s += q[j * hd + d] * fp16_to_fp32(k[t * kstride + d]);
        scores[j * ld + t] = s * scale;
      }
    return;
  }
  const int64_t nc = hd / 16;
  __m512 kv[16];
  for (int64_t t = 0; t < n; ++t) {
    const uint16_t* kr = k + t * kstride;
    // Rows are kstride apart (a whole cache row per position): prefetch a few rows ahead, the
    // hardware stride prefetcher gives up at page-sized strides.
    if (t + kAheadRows < n)
      for (int64_t c = 0; c < nc; c += 2) _mm_prefetch(reinterpret_cast<const char*>(kr + kAheadRows * kstride + 16 * c), _MM_HINT_T0);
    for (int64_t c = 0; c < nc; ++c) kv[c] = load_h(kr + 16 * c);
    for (int64_t j = 0; j < nq; ++j) {
      const float* qj = q + j * hd;
      __m512 acc = _mm512_mul_ps(_mm512_loadu_ps(qj), kv[0]);
      for (int64_t c = 1; c < nc; ++c) acc = _mm512_fmadd_ps(_mm512_loadu_ps(qj + 16 * c), kv[c], acc);
      scores[j * ld + t] = _mm512_reduce_add_ps(acc) * scale;
    }
  }
}

void pv_f16(int64_t n, int64_t hd, const uint16_t* v, int64_t vstride, const float* p, int64_t nq, int64_t ld, float* out) {
  if (hd % 16 != 0 || hd > 256) {
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < nq; ++j)
        for (int64_t d = 0; d < hd; ++d) out[j * hd + d] += p[j * ld + t] * fp16_to_fp32(v[t * vstride + d]);
    return;
  }
  const int64_t nc = hd / 16;
  __m512 vv[16];
  for (int64_t t = 0; t < n; ++t) {
    const uint16_t* vr = v + t * vstride;
    if (t + kAheadRows < n)
      for (int64_t c = 0; c < nc; c += 2) _mm_prefetch(reinterpret_cast<const char*>(vr + kAheadRows * vstride + 16 * c), _MM_HINT_T0);
    for (int64_t c = 0; c < nc; ++c) vv[c] = load_h(vr + 16 * c);
    for (int64_t j = 0; j < nq; ++j) {
      const __m512 a = _mm512_set1_ps(p[j * ld + t]);
      float* oj = out + j * hd;
      for (int64_t c = 0; c < nc; ++c) _mm512_storeu_ps(oj + 16 * c, _mm512_fmadd_ps(a, vv[c], _mm512_loadu_ps(oj + 16 * c)));
    }
  }
}

// exp(x) for x ≤ 0 (softmax arguments): Cody–Waite reduction x = n·ln2 + r, |r| ≤ ln2/2, a
// degree-6 Taylor polynomial for e^r (relative error ~2e-7), then scalef by 2^n. Arguments
// below -87 give 0.
inline __m512 exp_nonpos(__m512 x) {
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512 e = _mm512_scalef_ps(p, n);
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_GE_OQ), e);
}

float exp_sub_sum(float* x, int64_t n, float m) {
  const __m512 vm = _mm512_set1_ps(m);
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = exp_nonpos(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm));
    _mm512_storeu_ps(x + i, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (i < n) {
    const __mmask16 k = tail_mask(n - i);
    const __m512 e = _mm512_maskz_mov_ps(k, exp_nonpos(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vm)));
    _mm512_mask_storeu_ps(x + i, k, e);
    acc = _mm512_add_ps(acc, e);
  }
  return _mm512_reduce_add_ps(acc);
}

void scale_round_f16(float* x, int64_t n, float a) {
  const __m512 va = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(x + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_mul_ps(_mm512_loadu_ps(x + i), va), _MM_FROUND_TO_NEAREST_INT)));
  for (; i < n; ++i) x[i] = fp16_to_fp32(fp32_to_fp16(x[i] * a));
}

}  // namespace

void fill_float_fns_avx512(FloatFns* f) {
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
