// AVX-512 float primitives. Helpers stay in an anonymous namespace (ISA-file ODR rule).
#include <immintrin.h>

#include <cmath>

// GCC 12 reports the _mm512_undefined_* pass-through operand of its own inlined intrinsics
// (`__Y = __Y`) as uninitialised; the operand is never read (all-ones masks). False reports.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

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

// The sum of a vector's 16 lanes, in the tree of GCC's _mm512_reduce_add_ps: 256-bit halves
// (lane l + lane l+8), then 128-bit halves (+4), then lanes 0+2 and 1+3, then those two. Spelled
// out because the blocked prefill kernel reproduces this exact tree one lane class at a time.
inline float hsum16(__m512 v) {
  const __m256 b = _mm256_add_ps(_mm512_extractf32x8_ps(v, 1), _mm512_castps512_ps256(v));
  const __m128 c = _mm_add_ps(_mm256_extractf128_ps(b, 1), _mm256_castps256_ps128(b));
  const __m128 d = _mm_add_ps(c, _mm_movehl_ps(c, c));
  return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
}

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
      scores[j * ld + t] = hsum16(acc) * scale;
    }
  }
}

// Rows [0, JN) of out (JN query heads, stride hd) at dims [16·c0, 16·(c0 + CN)) += Σ_t p[j][t]
// · v[t], the JN × CN accumulators in registers across the whole run of positions (at most 16 +
// V's 4 + the broadcast of 32 zmm), each element accumulated over t in increasing order.
template <int JN, int CN>
inline void pv_regs(int64_t n, const uint16_t* v, int64_t vstride, const float* p, int64_t ld, float* out, int64_t hd, int64_t c0) {
  __m512 acc[JN][CN];
  for (int j = 0; j < JN; ++j)
    for (int c = 0; c < CN; ++c) acc[j][c] = _mm512_loadu_ps(out + j * hd + 16 * (c0 + c));
  for (int64_t t = 0; t < n; ++t) {
    const uint16_t* vr = v + t * vstride + 16 * c0;
    if (t + kAheadRows < n)
      for (int c = 0; c < CN; c += 2) _mm_prefetch(reinterpret_cast<const char*>(vr + kAheadRows * vstride + 16 * c), _MM_HINT_T0);
    __m512 vv[CN];
    for (int c = 0; c < CN; ++c) vv[c] = load_h(vr + 16 * c);
    for (int j = 0; j < JN; ++j) {
      const __m512 a = _mm512_set1_ps(p[j * ld + t]);
      for (int c = 0; c < CN; ++c) acc[j][c] = _mm512_fmadd_ps(a, vv[c], acc[j][c]);
    }
  }
  for (int j = 0; j < JN; ++j)
    for (int c = 0; c < CN; ++c) _mm512_storeu_ps(out + j * hd + 16 * (c0 + c), acc[j][c]);
}

template <int JN>
inline void pv_heads(int64_t n, const uint16_t* v, int64_t vstride, const float* p, int64_t ld, float* out, int64_t hd, int64_t c0, int64_t cn) {
  switch (cn) {
    case 4: pv_regs<JN, 4>(n, v, vstride, p, ld, out, hd, c0); break;
    case 3: pv_regs<JN, 3>(n, v, vstride, p, ld, out, hd, c0); break;
    case 2: pv_regs<JN, 2>(n, v, vstride, p, ld, out, hd, c0); break;
    case 1: pv_regs<JN, 1>(n, v, vstride, p, ld, out, hd, c0); break;
    default: break;
  }
}

// out[j] += Σ_t p[j][t] · v[t], each output element accumulated over t in increasing order (the
// same fma per element and position as the multi-token path: decode and verification rows agree
// bit for bit). Tiles of up to 4 heads × 64 dims keep their outputs in registers across the run
// of positions; V is re-read once per tile, from L1/L2. (Before, several heads' outputs were
// loaded and stored at every position.)
void pv_f16(int64_t n, int64_t hd, const uint16_t* v, int64_t vstride, const float* p, int64_t nq, int64_t ld, float* out) {
  if (hd % 16 != 0 || hd > 256) {
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < nq; ++j)
        for (int64_t d = 0; d < hd; ++d) out[j * hd + d] += p[j * ld + t] * fp16_to_fp32(v[t * vstride + d]);
    return;
  }
  const int64_t nc = hd / 16;
  for (int64_t c0 = 0; c0 < nc; c0 += 4) {
    const int64_t cn = nc - c0 < 4 ? nc - c0 : 4;
    int64_t j = 0;
    for (; j + 4 <= nq; j += 4) pv_heads<4>(n, v, vstride, p + j * ld, ld, out + j * hd, hd, c0, cn);
    switch (nq - j) {
      case 3: pv_heads<3>(n, v, vstride, p + j * ld, ld, out + j * hd, hd, c0, cn); break;
      case 2: pv_heads<2>(n, v, vstride, p + j * ld, ld, out + j * hd, hd, c0, cn); break;
      case 1: pv_heads<1>(n, v, vstride, p + j * ld, ld, out + j * hd, hd, c0, cn); break;
      default: break;
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

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 e = exp_nonpos(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(g)));  // exp(−|g|)
    const __mmask16 neg = _mm512_cmp_ps_mask(g, _mm512_setzero_ps(), _CMP_LT_OQ);
    const __m512 num = _mm512_mask_mul_ps(g, neg, g, e);
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_div_ps(num, _mm512_add_ps(one, e)), _mm512_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

float max_f32(const float* x, int64_t n) {
  __m512 m0 = _mm512_set1_ps(-__builtin_inff()), m1 = m0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i));
    m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + i + 16));
  }
  if (i + 16 <= n) m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i)), i += 16;
  if (i < n) m1 = _mm512_mask_max_ps(m1, tail_mask(n - i), m1, _mm512_maskz_loadu_ps(tail_mask(n - i), x + i));
  return _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
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


// ---- Blocked prefill attention (see float_fns.h) ----

// kt[d*ldt + i] = K row i, value d, as f32, for i < m; rows [m, 16) are zero. One 16×16
// transpose per 16 values of the rows (unpack 32-bit, unpack 64-bit, then two 128-bit lane
// shuffles).
void transpose_k16(const uint16_t* k, int64_t kstride, int64_t m, int64_t nc, float* kt, int64_t ldt) {
  for (int64_t c = 0; c < nc; ++c) {
    __m512 r[16], a[16], b[16];
    for (int i = 0; i < 16; ++i) r[i] = i < m ? load_h(k + i * kstride + 16 * c) : _mm512_setzero_ps();
    for (int i = 0; i < 8; ++i) {
      a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // b[4j + e], 128-bit lane L: rows 4j..4j+3 of value 4L + e.
    for (int j = 0; j < 4; ++j) {
      const __m512d a0 = _mm512_castps_pd(a[4 * j]), a1 = _mm512_castps_pd(a[4 * j + 1]);
      const __m512d a2 = _mm512_castps_pd(a[4 * j + 2]), a3 = _mm512_castps_pd(a[4 * j + 3]);
      b[4 * j] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
      b[4 * j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
      b[4 * j + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
      b[4 * j + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
    }
    float* o = kt + 16 * c * ldt;
    for (int e = 0; e < 4; ++e) {
      const __m512 u0 = _mm512_shuffle_f32x4(b[e], b[4 + e], 0x44), u1 = _mm512_shuffle_f32x4(b[e], b[4 + e], 0xEE);
      const __m512 u2 = _mm512_shuffle_f32x4(b[8 + e], b[12 + e], 0x44), u3 = _mm512_shuffle_f32x4(b[8 + e], b[12 + e], 0xEE);
      _mm512_storeu_ps(o + ldt * e, _mm512_shuffle_f32x4(u0, u2, 0x88));
      _mm512_storeu_ps(o + ldt * (4 + e), _mm512_shuffle_f32x4(u0, u2, 0xDD));
      _mm512_storeu_ps(o + ldt * (8 + e), _mm512_shuffle_f32x4(u1, u3, 0x88));
      _mm512_storeu_ps(o + ldt * (12 + e), _mm512_shuffle_f32x4(u1, u3, 0xDD));
    }
  }
}

// kq_f16 keeps 16 lane sums per (row, position): lane l sums q[d]·k[d] over d ≡ l (mod 16), a
// product then FMAs in increasing d; hsum16 then adds lanes (l, l+8), (l, l+4), (0, 2)/(1, 3),
// (0, 1). Here the lanes of a vector are 16 positions instead, and each of kq_f16's lane sums is
// a vector of its own (lane class l: broadcast q[l + 16c] times transposed K row l + 16c), added
// in the same tree.
// pair_sum: B_l = A_l + A_{l+8} for R rows. NC: values per row / 16 when known at compile time
// (0: nc at run time; a run-time trip count makes GCC keep accumulator arrays in memory across
// the loop). PW: vectors of 16 positions side by side (kt rows hold 16·PW positions), each
// broadcast q value feeding PW FMAs.
template <int R, int NC, int PW>
inline void pair_sum(const float* const* qr, const float* kt, int64_t nc_rt, int l, __m512* out) {
  const int64_t nc = NC > 0 ? NC : nc_rt;
  constexpr int64_t ldt = 16 * PW;
  const float* k0 = kt + ldt * l;
  const float* k1 = kt + ldt * (l + 8);
  __m512 a[R][PW], b[R][PW], ka[PW], kb[PW];
  for (int p = 0; p < PW; ++p) ka[p] = _mm512_loadu_ps(k0 + 16 * p), kb[p] = _mm512_loadu_ps(k1 + 16 * p);
  for (int r = 0; r < R; ++r) {
    const __m512 qa = _mm512_set1_ps(qr[r][l]), qb = _mm512_set1_ps(qr[r][l + 8]);
    for (int p = 0; p < PW; ++p) a[r][p] = _mm512_mul_ps(qa, ka[p]), b[r][p] = _mm512_mul_ps(qb, kb[p]);
  }
#pragma GCC unroll 16
  for (int64_t c = 1; c < nc; ++c) {
    for (int p = 0; p < PW; ++p) ka[p] = _mm512_loadu_ps(k0 + 16 * ldt * c + 16 * p), kb[p] = _mm512_loadu_ps(k1 + 16 * ldt * c + 16 * p);
    for (int r = 0; r < R; ++r) {
      const __m512 qa = _mm512_set1_ps(qr[r][l + 16 * c]), qb = _mm512_set1_ps(qr[r][l + 8 + 16 * c]);
      for (int p = 0; p < PW; ++p) a[r][p] = _mm512_fmadd_ps(qa, ka[p], a[r][p]), b[r][p] = _mm512_fmadd_ps(qb, kb[p], b[r][p]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < PW; ++p) out[r * PW + p] = _mm512_add_ps(a[r][p], b[r][p]);
}

// The 8 pair sums B_l = A_l + A_{l+8} of R rows go through a small buffer (b[l][r][p]) so the
// FMA phase holds only 2·R·PW accumulators; then the tree: C_l = B_l + B_{l+4},
// (C0 + C2) + (C1 + C3), × scale. m: positions stored (≤ 16·PW).
template <int R, int NC, int PW>
inline void kq_tile(const float* const* qr, const float* kt, int64_t nc, float scale, float* const* sr, int64_t m) {
  __m512 b[8 * R * PW];
#pragma GCC unroll 1
  for (int l = 0; l < 8; ++l) pair_sum<R, NC, PW>(qr, kt, nc, l, b + l * R * PW);
  const __m512 vs = _mm512_set1_ps(scale);
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < PW; ++p) {
      const int j = r * PW + p;
      constexpr int S = R * PW;
      const __m512 c0 = _mm512_add_ps(b[0 * S + j], b[4 * S + j]), c1 = _mm512_add_ps(b[1 * S + j], b[5 * S + j]);
      const __m512 c2 = _mm512_add_ps(b[2 * S + j], b[6 * S + j]), c3 = _mm512_add_ps(b[3 * S + j], b[7 * S + j]);
      const int64_t left = m - 16 * p;
      const __mmask16 mask = left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (left > 0 ? left : 0)) - 1u);
      _mm512_mask_storeu_ps(sr[r] + 16 * p, mask, _mm512_mul_ps(_mm512_add_ps(_mm512_add_ps(c0, c2), _mm512_add_ps(c1, c3)), vs));
    }
}

template <int R, int NC, int PW>
inline void kq_rows(const float* q, int64_t r0, int64_t rpt, int64_t qstride, int64_t hd, const float* kt, float scale, float* scores,
                    int64_t ld, int64_t m) {
  const float* qr[R];
  float* sr[R];
  for (int r = 0; r < R; ++r) {
    const int64_t row = r0 + r;
    qr[r] = q + (row / rpt) * qstride + (row % rpt) * hd;
    sr[r] = scores + row * ld;
  }
  kq_tile<R, NC, PW>(qr, kt, hd / 16, scale, sr, m);
}

// 6 rows × 32 positions: each K block vector loaded feeds 6 FMAs and each broadcast q value 2
// (0.67 loads per FMA); 24 accumulators and 4 K vectors fit the 32 registers. Measured on this
// kernel alone (112 rows × 512 positions, head size 64): 4 rows × 16 positions with the whole tree
// in registers 91 GFLOP/s (spills), × 32 positions 104, 6 × 32 with the pair sums in memory 121.
constexpr int64_t kKqRows = 6;

template <int NC, int PW>
void kq_rows_all(const float* q, int64_t rows, int64_t rpt, int64_t qstride, int64_t hd, const float* kt, float scale, float* st, int64_t ld,
                 int64_t m) {
  int64_t r = 0;
  for (; r + kKqRows <= rows; r += kKqRows) kq_rows<6, NC, PW>(q, r, rpt, qstride, hd, kt, scale, st, ld, m);
  switch (rows - r) {
    case 5: kq_rows<5, NC, PW>(q, r, rpt, qstride, hd, kt, scale, st, ld, m); break;
    case 4: kq_rows<4, NC, PW>(q, r, rpt, qstride, hd, kt, scale, st, ld, m); break;
    case 3: kq_rows<3, NC, PW>(q, r, rpt, qstride, hd, kt, scale, st, ld, m); break;
    case 2: kq_rows<2, NC, PW>(q, r, rpt, qstride, hd, kt, scale, st, ld, m); break;
    case 1: kq_rows<1, NC, PW>(q, r, rpt, qstride, hd, kt, scale, st, ld, m); break;
    default: break;
  }
}

template <int NC>
void kq_blocks(int64_t n, int64_t hd, const uint16_t* k, int64_t kstride, const float* q, int64_t rows, int64_t rpt, int64_t qstride,
               float scale, float* scores, int64_t ld, float* work) {
  for (int64_t t0 = 0; t0 < n;) {
    const int64_t m = n - t0;
    if (m > 16) {  // 32 positions (the second half zero-padded past m)
      const int64_t m2 = m < 32 ? m : 32;
      transpose_k16(k + t0 * kstride, kstride, 16, hd / 16, work, 32);
      transpose_k16(k + (t0 + 16) * kstride, kstride, m2 - 16, hd / 16, work + 16, 32);
      kq_rows_all<NC, 2>(q, rows, rpt, qstride, hd, work, scale, scores + t0, ld, m2);
      t0 += m2;
    } else {
      transpose_k16(k + t0 * kstride, kstride, m, hd / 16, work, 16);
      kq_rows_all<NC, 1>(q, rows, rpt, qstride, hd, work, scale, scores + t0, ld, m);
      t0 += m;
    }
  }
}

bool kq_block_f16(int64_t n, int64_t hd, const uint16_t* k, int64_t kstride, const float* q, int64_t rows, int64_t rpt,
                  int64_t qstride, float scale, float* scores, int64_t ld, float* work) {
  if (hd % 16 != 0 || hd > 256) return false;  // kq_f16's own fallback order applies
  switch (hd) {
    case 64: kq_blocks<4>(n, hd, k, kstride, q, rows, rpt, qstride, scale, scores, ld, work); break;
    case 128: kq_blocks<8>(n, hd, k, kstride, q, rows, rpt, qstride, scale, scores, ld, work); break;
    case 256: kq_blocks<16>(n, hd, k, kstride, q, rows, rpt, qstride, scale, scores, ld, work); break;
    default: kq_blocks<0>(n, hd, k, kstride, q, rows, rpt, qstride, scale, scores, ld, work); break;
  }
  return true;
}

// R output rows × W vectors of 16 columns in registers; every row runs an FMA chain in position
// order (pv_f16's), over [0, lim[r]) of the converted V block vf (rows hd apart). lim is
// nondecreasing in r (rows are ordered by token), so [0, lim[0]) is common to all rows.
template <int R, int W>
inline void pv_tile(const float* vf, int64_t hd, int64_t col, const float* const* pr, float* const* orow, const int64_t* lim) {
  __m512 acc[R][W];
  for (int r = 0; r < R; ++r)
    for (int w = 0; w < W; ++w) acc[r][w] = _mm512_loadu_ps(orow[r] + col + 16 * w);
  const int64_t lo = lim[0];
  for (int64_t t = 0; t < lo; ++t) {
    const float* vt = vf + t * hd + col;
    __m512 vv[W];
    for (int w = 0; w < W; ++w) vv[w] = _mm512_loadu_ps(vt + 16 * w);
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(pr[r][t]);
      for (int w = 0; w < W; ++w) acc[r][w] = _mm512_fmadd_ps(a, vv[w], acc[r][w]);
    }
  }
  for (int r = 1; r < R; ++r)
    for (int64_t t = lo; t < lim[r]; ++t) {
      const __m512 a = _mm512_set1_ps(pr[r][t]);
      for (int w = 0; w < W; ++w) acc[r][w] = _mm512_fmadd_ps(a, _mm512_loadu_ps(vf + t * hd + col + 16 * w), acc[r][w]);
    }
  for (int r = 0; r < R; ++r)
    for (int w = 0; w < W; ++w) _mm512_storeu_ps(orow[r] + col + 16 * w, acc[r][w]);
}

template <int R>
inline void pv_rows(const float* vf, int64_t hd, const float* p, int64_t r0, int64_t rpt, int64_t ld, int64_t first, int64_t m, float* out,
                    int64_t ostride) {
  const float* pr[R];
  float* orow[R];
  int64_t lim[R];
  for (int r = 0; r < R; ++r) {
    const int64_t row = r0 + r;
    pr[r] = p + row * ld;
    orow[r] = out + (row / rpt) * ostride + (row % rpt) * hd;
    const int64_t l = first + row / rpt;
    lim[r] = l < 0 ? 0 : (l > m ? m : l);
  }
  if (lim[R - 1] == 0) return;
  int64_t col = 0;
  for (; col + 64 <= hd; col += 64) pv_tile<R, 4>(vf, hd, col, pr, orow, lim);
  if (col + 32 <= hd) pv_tile<R, 2>(vf, hd, col, pr, orow, lim), col += 32;
  if (col < hd) pv_tile<R, 1>(vf, hd, col, pr, orow, lim);
}

// Rows 6 at a time: 6 × 4 accumulators, 4 V vectors and a broadcast fill the 32 registers; each V
// value loaded is used by 6 FMAs.
constexpr int64_t kPvRows = 6;

bool pv_block_f16(int64_t n, int64_t hd, const uint16_t* v, int64_t vstride, const float* p, int64_t rows, int64_t rpt, int64_t ld,
                  int64_t n_first, float* out, int64_t ostride, float* work) {
  if (hd % 16 != 0 || hd > 256) return false;  // pv_f16's own fallback order applies
  const int64_t block = kAttnVBlockFloats / hd;  // V rows converted to f32 at a time (≥ 16)
  const int64_t last_token = (rows - 1) / rpt;
  for (int64_t b = 0; b < n; b += block) {
    const int64_t first = n_first - b;            // positions of this block the first token sees
    int64_t m = n - b < block ? n - b : block;
    if (first + last_token < m) m = first + last_token;  // no row reads past the last token's limit
    if (m <= 0) break;
    for (int64_t i = 0; i < m; ++i) {
      const uint16_t* vr = v + (b + i) * vstride;
      for (int64_t d = 0; d < hd; d += 16) _mm512_storeu_ps(work + i * hd + d, load_h(vr + d));
    }
    const float* pb = p + b;
    int64_t r = 0;
    for (; r + kPvRows <= rows; r += kPvRows) pv_rows<6>(work, hd, pb, r, rpt, ld, first, m, out, ostride);
    switch (rows - r) {
      case 5: pv_rows<5>(work, hd, pb, r, rpt, ld, first, m, out, ostride); break;
      case 4: pv_rows<4>(work, hd, pb, r, rpt, ld, first, m, out, ostride); break;
      case 3: pv_rows<3>(work, hd, pb, r, rpt, ld, first, m, out, ostride); break;
      case 2: pv_rows<2>(work, hd, pb, r, rpt, ld, first, m, out, ostride); break;
      case 1: pv_rows<1>(work, hd, pb, r, rpt, ld, first, m, out, ostride); break;
      default: break;
    }
  }
  return true;
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
  f->max_f32 = max_f32;
  f->exp_sub_sum = exp_sub_sum;
  f->swiglu = swiglu;
  f->scale_round_f16 = scale_round_f16;
  f->kq_block_f16 = kq_block_f16;
  f->pv_block_f16 = pv_block_f16;
}

}  // namespace kernels
}  // namespace fulcrum
