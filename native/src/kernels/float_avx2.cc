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
// Rows of JN query heads against one K row: a product for the first 8 dims then FMAs in
// increasing d per lane, then hsum. Processing at most 4 heads at a time keeps the accumulators
// and one K chunk in registers (a whole 128-wide K row in 16 ymm spilled); the per-lane order,
// and so every score, is the same as one head at a time.
template <int JN>
inline void kq_heads(const uint16_t* kr, int64_t nc, const float* q, int64_t hd, float scale, float* scores, int64_t ld, int64_t t) {
  __m256 acc[JN];
  const __m256 k0 = load_h(kr);
  for (int j = 0; j < JN; ++j) acc[j] = _mm256_mul_ps(_mm256_loadu_ps(q + j * hd), k0);
  for (int64_t c = 1; c < nc; ++c) {
    const __m256 kc = load_h(kr + 8 * c);
    for (int j = 0; j < JN; ++j) acc[j] = _mm256_fmadd_ps(_mm256_loadu_ps(q + j * hd + 8 * c), kc, acc[j]);
  }
  for (int j = 0; j < JN; ++j) scores[j * ld + t] = hsum(acc[j]) * scale;
}

constexpr int64_t kAheadRows = 8;  // software prefetch distance in K/V rows, as in the AVX-512 file

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
  for (int64_t t = 0; t < n; ++t) {
    const uint16_t* kr = k + t * kstride;
    if (t + kAheadRows < n)
      for (int64_t c = 0; c < nc; c += 4) _mm_prefetch(reinterpret_cast<const char*>(kr + kAheadRows * kstride + 8 * c), _MM_HINT_T0);
    int64_t j = 0;
    for (; j + 4 <= nq; j += 4) kq_heads<4>(kr, nc, q + j * hd, hd, scale, scores + j * ld, ld, t);
    switch (nq - j) {
      case 3: kq_heads<3>(kr, nc, q + j * hd, hd, scale, scores + j * ld, ld, t); break;
      case 2: kq_heads<2>(kr, nc, q + j * hd, hd, scale, scores + j * ld, ld, t); break;
      case 1: kq_heads<1>(kr, nc, q + j * hd, hd, scale, scores + j * ld, ld, t); break;
      default: break;
    }
  }
}

// Rows [0, JN) of out (JN query heads, stride hd) at dims [8·c0, 8·(c0 + CN)) += Σ_t p[j][t] ·
// v[t], the JN × CN accumulators in registers across the whole run of positions (at most 8 + V's
// 4 + the broadcast: no spills in 16 ymm), each element accumulated over t in increasing order.
template <int JN, int CN>
inline void pv_regs(int64_t n, const uint16_t* v, int64_t vstride, const float* p, int64_t ld, float* out, int64_t hd, int64_t c0) {
  __m256 acc[JN][CN];
  for (int j = 0; j < JN; ++j)
    for (int c = 0; c < CN; ++c) acc[j][c] = _mm256_loadu_ps(out + j * hd + 8 * (c0 + c));
  for (int64_t t = 0; t < n; ++t) {
    const uint16_t* vr = v + t * vstride + 8 * c0;
    if (t + kAheadRows < n) _mm_prefetch(reinterpret_cast<const char*>(vr + kAheadRows * vstride), _MM_HINT_T0);
    __m256 vv[CN];
    for (int c = 0; c < CN; ++c) vv[c] = load_h(vr + 8 * c);
    for (int j = 0; j < JN; ++j) {
      const __m256 a = _mm256_set1_ps(p[j * ld + t]);
      for (int c = 0; c < CN; ++c) acc[j][c] = _mm256_fmadd_ps(a, vv[c], acc[j][c]);
    }
  }
  for (int j = 0; j < JN; ++j)
    for (int c = 0; c < CN; ++c) _mm256_storeu_ps(out + j * hd + 8 * (c0 + c), acc[j][c]);
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
// same fma per element and position as the multi-token path, so decode and verification rows
// agree bit for bit). Tiles of 2 heads × 32 dims keep their outputs in registers across the run
// of positions (one head: 1 × 32); V is re-read once per head pair, from L1/L2. (The version
// before kept one head's 64-128 dims in an 8-ymm array that GCC placed on the stack, and several
// heads' outputs in memory, loaded and stored at every position.)
void pv_f16(int64_t n, int64_t hd, const uint16_t* v, int64_t vstride, const float* p, int64_t nq, int64_t ld, float* out) {
  if (hd % 8 != 0 || hd > 128) {
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < nq; ++j)
        for (int64_t d = 0; d < hd; ++d) out[j * hd + d] += p[j * ld + t] * fp16_to_fp32(v[t * vstride + d]);
    return;
  }
  const int64_t nc = hd / 8;
  for (int64_t c0 = 0; c0 < nc; c0 += 4) {
    const int64_t cn = nc - c0 < 4 ? nc - c0 : 4;
    int64_t j = 0;
    for (; j + 2 <= nq; j += 2) pv_heads<2>(n, v, vstride, p + j * ld, ld, out + j * hd, hd, c0, cn);
    if (j < nq) pv_heads<1>(n, v, vstride, p + j * ld, ld, out + j * hd, hd, c0, cn);
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

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = exp_nonpos(_mm256_or_ps(g, sign));  // exp(−|g|)
    const __m256 neg = _mm256_cmp_ps(g, _mm256_setzero_ps(), _CMP_LT_OQ);
    const __m256 num = _mm256_blendv_ps(g, _mm256_mul_ps(g, e), neg);
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(num, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

float max_f32(const float* x, int64_t n) {
  __m256 m0 = _mm256_set1_ps(-__builtin_inff()), m1 = m0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
    m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + i + 8));
  }
  m0 = _mm256_max_ps(m0, m1);
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m0), _mm256_extractf128_ps(m0, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  float mx = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
  for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  return mx;
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


// ---- Blocked prefill attention (see float_fns.h and the AVX-512 file), 8 lanes ----

// kt[d*8 + i] = K row i, value d, as f32, for i < m; rows [m, 8) are zero (8×8 transposes).
void transpose_k8(const uint16_t* k, int64_t kstride, int64_t m, int64_t nc, float* kt) {
  for (int64_t c = 0; c < nc; ++c) {
    __m256 r[8], a[8], b[8];
    for (int i = 0; i < 8; ++i) r[i] = i < m ? load_h(k + i * kstride + 8 * c) : _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      a[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      a[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // b[4j + e], 128-bit lane L: rows 4j..4j+3 of value 4L + e.
    for (int j = 0; j < 2; ++j) {
      const __m256d a0 = _mm256_castps_pd(a[4 * j]), a1 = _mm256_castps_pd(a[4 * j + 1]);
      const __m256d a2 = _mm256_castps_pd(a[4 * j + 2]), a3 = _mm256_castps_pd(a[4 * j + 3]);
      b[4 * j] = _mm256_castpd_ps(_mm256_unpacklo_pd(a0, a2));
      b[4 * j + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(a0, a2));
      b[4 * j + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(a1, a3));
      b[4 * j + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(a1, a3));
    }
    float* o = kt + 64 * c;
    for (int e = 0; e < 4; ++e) {
      _mm256_storeu_ps(o + 8 * e, _mm256_permute2f128_ps(b[e], b[4 + e], 0x20));
      _mm256_storeu_ps(o + 8 * (4 + e), _mm256_permute2f128_ps(b[e], b[4 + e], 0x31));
    }
  }
}

// kq_f16's lane l sums q[d]·k[d] over d ≡ l (mod 8) (a product, then FMAs in increasing d); hsum
// adds lanes (l, l+4), then (0, 2) and (1, 3), then those two. Here each lane class is a vector
// over 8 positions, added in the same tree. pair_sum: B_l = A_l + A_{l+4} for R rows.
template <int R>
inline void pair_sum(const float* const* qr, const float* kt, int64_t nc, int l, __m256* out) {
  const float* k0 = kt + 8 * l;
  const float* k1 = kt + 8 * (l + 4);
  __m256 a[R], b[R];
  const __m256 ka = _mm256_loadu_ps(k0), kb = _mm256_loadu_ps(k1);
  for (int r = 0; r < R; ++r) {
    a[r] = _mm256_mul_ps(_mm256_set1_ps(qr[r][l]), ka);
    b[r] = _mm256_mul_ps(_mm256_set1_ps(qr[r][l + 4]), kb);
  }
  for (int64_t c = 1; c < nc; ++c) {
    const __m256 kc = _mm256_loadu_ps(k0 + 64 * c), kd = _mm256_loadu_ps(k1 + 64 * c);
    for (int r = 0; r < R; ++r) {
      a[r] = _mm256_fmadd_ps(_mm256_set1_ps(qr[r][l + 8 * c]), kc, a[r]);
      b[r] = _mm256_fmadd_ps(_mm256_set1_ps(qr[r][l + 4 + 8 * c]), kd, b[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = _mm256_add_ps(a[r], b[r]);
}

// 8 scores for each of R rows: (B0 + B2) + (B1 + B3), × scale; the first m stored.
template <int R>
inline void kq_tile(const float* const* qr, const float* kt, int64_t nc, float scale, float* const* sr, int64_t m) {
  __m256 c0[R], c1[R], x[R];
  pair_sum<R>(qr, kt, nc, 0, c0);
  pair_sum<R>(qr, kt, nc, 2, x);
  for (int r = 0; r < R; ++r) c0[r] = _mm256_add_ps(c0[r], x[r]);
  pair_sum<R>(qr, kt, nc, 1, c1);
  pair_sum<R>(qr, kt, nc, 3, x);
  const __m256 vs = _mm256_set1_ps(scale);
  for (int r = 0; r < R; ++r) {
    const __m256 e = _mm256_mul_ps(_mm256_add_ps(c0[r], _mm256_add_ps(c1[r], x[r])), vs);
    if (m == 8) {
      _mm256_storeu_ps(sr[r], e);
    } else {
      alignas(32) float tmp[8];
      _mm256_store_ps(tmp, e);
      for (int64_t i = 0; i < m; ++i) sr[r][i] = tmp[i];
    }
  }
}

template <int R>
inline void kq_rows(const float* q, int64_t r0, int64_t rpt, int64_t qstride, int64_t hd, const float* kt, float scale, float* scores,
                    int64_t ld, int64_t m) {
  const float* qr[R];
  float* sr[R];
  for (int r = 0; r < R; ++r) {
    const int64_t row = r0 + r;
    qr[r] = q + (row / rpt) * qstride + (row % rpt) * hd;
    sr[r] = scores + row * ld;
  }
  kq_tile<R>(qr, kt, hd / 8, scale, sr, m);
}

// 3 rows: their partial trees (4 × 3 registers) and two K vectors fit the 16 ymm registers.
constexpr int64_t kKqRows = 3;

bool kq_block_f16(int64_t n, int64_t hd, const uint16_t* k, int64_t kstride, const float* q, int64_t rows, int64_t rpt,
                  int64_t qstride, float scale, float* scores, int64_t ld, float* work) {
  if (hd % 8 != 0 || hd > 128) return false;  // kq_f16's own fallback order applies
  for (int64_t t0 = 0; t0 < n; t0 += 8) {
    const int64_t m = n - t0 < 8 ? n - t0 : 8;
    transpose_k8(k + t0 * kstride, kstride, m, hd / 8, work);
    float* st = scores + t0;
    int64_t r = 0;
    for (; r + kKqRows <= rows; r += kKqRows) kq_rows<3>(q, r, rpt, qstride, hd, work, scale, st, ld, m);
    switch (rows - r) {
      case 2: kq_rows<2>(q, r, rpt, qstride, hd, work, scale, st, ld, m); break;
      case 1: kq_rows<1>(q, r, rpt, qstride, hd, work, scale, st, ld, m); break;
      default: break;
    }
  }
  return true;
}

// R output rows × W vectors of 8 columns in registers, FMA chains in position order over
// [0, lim[r]) (lim nondecreasing in r).
template <int R, int W>
inline void pv_tile(const float* vf, int64_t hd, int64_t col, const float* const* pr, float* const* orow, const int64_t* lim) {
  __m256 acc[R][W];
  for (int r = 0; r < R; ++r)
    for (int w = 0; w < W; ++w) acc[r][w] = _mm256_loadu_ps(orow[r] + col + 8 * w);
  const int64_t lo = lim[0];
  for (int64_t t = 0; t < lo; ++t) {
    const float* vt = vf + t * hd + col;
    __m256 vv[W];
    for (int w = 0; w < W; ++w) vv[w] = _mm256_loadu_ps(vt + 8 * w);
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_set1_ps(pr[r][t]);
      for (int w = 0; w < W; ++w) acc[r][w] = _mm256_fmadd_ps(a, vv[w], acc[r][w]);
    }
  }
  for (int r = 1; r < R; ++r)
    for (int64_t t = lo; t < lim[r]; ++t) {
      const __m256 a = _mm256_set1_ps(pr[r][t]);
      for (int w = 0; w < W; ++w) acc[r][w] = _mm256_fmadd_ps(a, _mm256_loadu_ps(vf + t * hd + col + 8 * w), acc[r][w]);
    }
  for (int r = 0; r < R; ++r)
    for (int w = 0; w < W; ++w) _mm256_storeu_ps(orow[r] + col + 8 * w, acc[r][w]);
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
  for (; col + 16 <= hd; col += 16) pv_tile<R, 2>(vf, hd, col, pr, orow, lim);
  if (col < hd) pv_tile<R, 1>(vf, hd, col, pr, orow, lim);
}

// 4 rows × 2 vectors: 8 accumulators, 2 V vectors and a broadcast in the 16 registers.
constexpr int64_t kPvRows = 4;

bool pv_block_f16(int64_t n, int64_t hd, const uint16_t* v, int64_t vstride, const float* p, int64_t rows, int64_t rpt, int64_t ld,
                  int64_t n_first, float* out, int64_t ostride, float* work) {
  if (hd % 8 != 0 || hd > 128) return false;  // pv_f16's own fallback order applies
  const int64_t block = kAttnVBlockFloats / hd;
  const int64_t last_token = (rows - 1) / rpt;
  for (int64_t b = 0; b < n; b += block) {
    const int64_t first = n_first - b;
    int64_t m = n - b < block ? n - b : block;
    if (first + last_token < m) m = first + last_token;
    if (m <= 0) break;
    for (int64_t i = 0; i < m; ++i) {
      const uint16_t* vr = v + (b + i) * vstride;
      for (int64_t d = 0; d < hd; d += 8) _mm256_storeu_ps(work + i * hd + d, load_h(vr + d));
    }
    const float* pb = p + b;
    int64_t r = 0;
    for (; r + kPvRows <= rows; r += kPvRows) pv_rows<4>(work, hd, pb, r, rpt, ld, first, m, out, ostride);
    switch (rows - r) {
      case 3: pv_rows<3>(work, hd, pb, r, rpt, ld, first, m, out, ostride); break;
      case 2: pv_rows<2>(work, hd, pb, r, rpt, ld, first, m, out, ostride); break;
      case 1: pv_rows<1>(work, hd, pb, r, rpt, ld, first, m, out, ostride); break;
      default: break;
    }
  }
  return true;
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
  f->max_f32 = max_f32;
  f->exp_sub_sum = exp_sub_sum;
  f->swiglu = swiglu;
  f->scale_round_f16 = scale_round_f16;
  f->kq_block_f16 = kq_block_f16;
  f->pv_block_f16 = pv_block_f16;
}

}  // namespace kernels
}  // namespace fulcrum
