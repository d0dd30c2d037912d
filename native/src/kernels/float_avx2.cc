// AVX2/FMA/F16C float primitives: the vector operations (Avx2Ops, 8 lanes, 16 ymm registers) the
// shared bodies in float_simd.h are instantiated with, and the K-side attention kernels whose
// tiling is this register file's own. Compiled with -mavx2 -mfma -mf16c (binding.gyp).
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "kernels/float_fns.h"
#include "kernels/float_simd.h"

namespace fulcrum {
namespace kernels {
namespace {

struct Avx2Ops {
  using V = __m256;
  static constexpr int64_t L = 8;
  // Remainders shorter than a vector run through the scalar loop (no masked loads in AVX2).
  static constexpr bool kMaskedTail = false;
  // Decode PV: 2 heads × 4 vectors = 8 accumulators + 4 V vectors + the broadcast in 16 ymm.
  static constexpr int kPvHeads = 2;
  // Blocked PV: 4 rows × 2 vectors = 8 accumulators, 2 V vectors and a broadcast in 16 ymm.
  static constexpr int kPvRows = 4;
  static constexpr int kPvTileVectors = 2;
  // The float formats' prefill tile (gemm_tile_float): 3 rows × 4 tokens, one chain's 12
  // accumulators a pass, the 3 rows' vectors and one token's in the 16 registers.
  static constexpr int kFloatTileRows = 3, kFloatTileCols = 4;

  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float a) { return _mm256_set1_ps(a); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V load_h(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static V load_bf(const uint16_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
  }
  static void store_h(uint16_t* p, V v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static V round_f16(V v) { return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)); }
  // The f16 scale of the Q8_0 block at b, in every lane; 8 of its int8 values at q times it.
  static V q8_scale(const uint8_t* b) {
    uint16_t d;
    std::memcpy(&d, b, sizeof d);
    return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(d)));
  }
  static V q8_values(const uint8_t* q, V scale) {
    return _mm256_mul_ps(scale, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q)))));
  }
  // Lanes (l, l+4), then (0, 2) and (1, 3), then those two.
  static float hsum(V v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
  }
  static float hmax(V v) {
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
  }
  static V neg_abs(V g) { return _mm256_or_ps(g, _mm256_set1_ps(-0.0f)); }
  // Sums 8 vectors' lanes at once: a[i]'s 8 lanes become lane i of the result, each through
  // hsum's own tree (lane l + l+4, then 0+2 and 1+3, then those two), so every sum has hsum's
  // bits. Three rounds of pairwise shuffles and adds, then one permutation puts the sums in order.
  static V hsum_lanes(const V* a) {
    V s1[4], s2[2];
    // l + l+4: the 128-bit halves of two vectors side by side.
    for (int m = 0; m < 4; ++m)
      s1[m] = _mm256_add_ps(_mm256_permute2f128_ps(a[2 * m], a[2 * m + 1], 0x20), _mm256_permute2f128_ps(a[2 * m], a[2 * m + 1], 0x31));
    // c0 + c2 and c1 + c3: half h of s2[n] holds vectors 4n + h and 4n + 2 + h.
    for (int n = 0; n < 2; ++n) {
      const __m256d u = _mm256_castps_pd(s1[2 * n]), v = _mm256_castps_pd(s1[2 * n + 1]);
      s2[n] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(u, v)), _mm256_castpd_ps(_mm256_unpackhi_pd(u, v)));
    }
    // d0 + d1: lane 4h + j holds vector 2j + h.
    const V r = _mm256_add_ps(_mm256_shuffle_ps(s2[0], s2[1], _MM_SHUFFLE(2, 0, 2, 0)), _mm256_shuffle_ps(s2[0], s2[1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  }
  // The first m ≤ 8 lanes of v stored to p; a whole vector by a plain store (the masked store is
  // slow on Zen 3: decode's K side, one store per head and 8 positions, 29.1 -> 24.5 µs with
  // this, float_simd.h kq_lanes).
  static void store_first(float* p, V v, int64_t m) {
    if (m == 8) return _mm256_storeu_ps(p, v);
    _mm256_maskstore_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(m)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)), v);
  }

  // The first lane of v equal to m's, or -1.
  static int first_eq(V v, V m) {
    const int k = _mm256_movemask_ps(_mm256_cmp_ps(v, m, _CMP_EQ_OQ));
    return k ? __builtin_ctz(static_cast<unsigned>(k)) : -1;
  }
  static V mul_if_neg(V g, V e) { return _mm256_blendv_ps(g, _mm256_mul_ps(g, e), _mm256_cmp_ps(g, _mm256_setzero_ps(), _CMP_LT_OQ)); }
  // exp(x) for x ≤ 0, as in the AVX-512 file; 2^n is built in the exponent bits.
  static V exp_nonpos(V x) {
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
};

using S = Avx2Ops;

// ---- Attention, K side (the decode kernel and the blocked prefill kernel) ----

// As the AVX-512 version, 8 lanes: K/V rows of up to 128 values stay in 16 ymm registers.
// Rows of JN query heads against one K row: a product for the first 8 dims then FMAs in
// increasing d per lane, then hsum. Processing at most 4 heads at a time keeps the accumulators
// and one K chunk in registers (a whole 128-wide K row in 16 ymm spilled); the per-lane order,
// and so every score, is the same as one head at a time.
template <int JN>
inline void kq_heads(const uint16_t* kr, int64_t nc, const float* q, int64_t hd, float scale, float* scores, int64_t ld, int64_t t) {
  __m256 acc[JN];
  const __m256 k0 = S::load_h(kr);
  for (int j = 0; j < JN; ++j) acc[j] = _mm256_mul_ps(_mm256_loadu_ps(q + j * hd), k0);
  for (int64_t c = 1; c < nc; ++c) {
    const __m256 kc = S::load_h(kr + 8 * c);
    for (int j = 0; j < JN; ++j) acc[j] = _mm256_fmadd_ps(_mm256_loadu_ps(q + j * hd + 8 * c), kc, acc[j]);
  }
  for (int j = 0; j < JN; ++j) scores[j * ld + t] = S::hsum(acc[j]) * scale;
}

void kq_f16(int64_t n, int64_t hd, const uint16_t* k, int64_t kstride, const float* q, int64_t nq, float scale,
            float* scores, int64_t ld, int64_t ahead) {
  // Head sizes 64 and 128: 8 positions at a time (float_simd.h).
  const uint8_t* kb = reinterpret_cast<const uint8_t*>(k);
  const int64_t kstride_bytes = kstride * static_cast<int64_t>(sizeof(uint16_t));
  if (hd == 64) return kq_lanes<S, 8>(n, kb, kstride_bytes, q, nq, scale, scores, ld, ahead);
  if (hd == 128) return kq_lanes<S, 16>(n, kb, kstride_bytes, q, nq, scale, scores, ld, ahead);
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

// kt[d*8 + i] = K row i, value d, as f32, for i < m; rows [m, 8) are zero (8×8 transposes).
// Rows: the cache's element format; k and kstride in bytes.
template <class Rows>
void transpose_k8(const uint8_t* k, int64_t kstride, int64_t m, int64_t nc, float* kt) {
  for (int64_t c = 0; c < nc; ++c) {
    __m256 r[8], a[8], b[8];
    for (int i = 0; i < 8; ++i) r[i] = i < m ? Rows::template load<S>(k + i * kstride, 8 * c) : _mm256_setzero_ps();
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

// Positions go in runs of kKqRunFloats / hd (their 8-position blocks transposed side by side in
// `work`, 16 KiB), and each row triple passes over the whole run, so its query values stay in L1
// across the run's blocks. Block by block (as before), all the rows' query values (7 heads × a
// block of query tokens: tens of KiB) came back from L2 for every 8 positions, one broadcast per
// FMA. Same FMAs, same order within each score.
constexpr int64_t kKqRunFloats = 4096;
static_assert(kKqRunFloats <= kAttnWorkFloats, "a run's transposed blocks fit the scratch");

// R rows [r0, r0 + R) over a run of len positions transposed at kt (block b at kt + 8·hd·b).
template <int R>
inline void kq_run(const float* q, int64_t r0, int64_t rpt, int64_t qstride, int64_t hd, const float* kt, int64_t len, float scale,
                   float* scores, int64_t ld) {
  for (int64_t b = 0; 8 * b < len; ++b)
    kq_rows<R>(q, r0, rpt, qstride, hd, kt + b * 8 * hd, scale, scores + 8 * b, ld, len - 8 * b < 8 ? len - 8 * b : 8);
}

// Rows: the cache's element format; k and kstride in bytes; hd a multiple of 8 up to 128.
template <class Rows>
void kq_block_rows(int64_t n, int64_t hd, const uint8_t* k, int64_t kstride, const float* q, int64_t rows, int64_t rpt,
                   int64_t qstride, float scale, float* scores, int64_t ld, float* work) {
  const int64_t run = kKqRunFloats / hd;  // whole blocks of 8: hd is a multiple of 8
  for (int64_t t0 = 0; t0 < n; t0 += run) {
    const int64_t len = n - t0 < run ? n - t0 : run;
    for (int64_t b = 0; 8 * b < len; ++b)
      transpose_k8<Rows>(k + (t0 + 8 * b) * kstride, kstride, len - 8 * b < 8 ? len - 8 * b : 8, hd / 8, work + b * 8 * hd);
    float* st = scores + t0;
    int64_t r = 0;
    for (; r + kKqRows <= rows; r += kKqRows) kq_run<3>(q, r, rpt, qstride, hd, work, len, scale, st, ld);
    switch (rows - r) {
      case 2: kq_run<2>(q, r, rpt, qstride, hd, work, len, scale, st, ld); break;
      case 1: kq_run<1>(q, r, rpt, qstride, hd, work, len, scale, st, ld); break;
      default: break;
    }
  }
}

bool kq_block_f16(int64_t n, int64_t hd, const uint16_t* k, int64_t kstride, const float* q, int64_t rows, int64_t rpt,
                  int64_t qstride, float scale, float* scores, int64_t ld, float* work) {
  if (hd % 8 != 0 || hd > 128) return false;  // kq_f16's own fallback order applies
  kq_block_rows<F16Rows>(n, hd, reinterpret_cast<const uint8_t*>(k), kstride * static_cast<int64_t>(sizeof(uint16_t)), q, rows, rpt, qstride,
                         scale, scores, ld, work);
  return true;
}

// Head sizes above 128 take kq_q8_0 per token (kq_lanes: the same sums).
bool kq_block_q8_0(int64_t n, int64_t hd, const uint8_t* k, int64_t kstride, const float* q, int64_t rows, int64_t rpt,
                   int64_t qstride, float scale, float* scores, int64_t ld, float* work) {
  if (hd % 32 != 0 || hd > 128) return false;
  kq_block_rows<Q8Rows>(n, hd, k, kstride, q, rows, rpt, qstride, scale, scores, ld, work);
  return true;
}

}  // namespace

void fill_float_fns_avx2(FloatFns* f) {
  fill_float_fns_simd<Avx2Ops>(f);
  f->kq_f16 = kq_f16;
  f->kq_block_f16 = kq_block_f16;
  f->kq_block_q8_0 = kq_block_q8_0;
}

}  // namespace kernels
}  // namespace fulcrum
