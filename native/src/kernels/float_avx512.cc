// AVX-512 float primitives: the vector operations (Avx512Ops, 16 lanes, 32 zmm registers, masked
// tails) the shared bodies in float_simd.h are instantiated with, and the K-side attention kernels
// whose tiling is this register file's own. Compiled with the AVX-512 F/BW/VL/DQ/VNNI/BF16 flags
// (binding.gyp).
#include <immintrin.h>

#include <cmath>
#include <cstring>

// GCC 12 reports the _mm512_undefined_* pass-through operand of its own inlined intrinsics
// (`__Y = __Y`) as uninitialised; the operand is never read (all-ones masks). False reports.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "core/fp16.h"
#include "kernels/float_fns.h"
#include "kernels/float_simd.h"

namespace fulcrum {
namespace kernels {
namespace {

inline __mmask16 tail_mask(int64_t r) { return static_cast<__mmask16>((1u << r) - 1u); }

struct Avx512Ops {
  using V = __m512;
  static constexpr int64_t L = 16;
  // Remainders shorter than a vector run through masked loads and stores.
  static constexpr bool kMaskedTail = true;
  // Decode PV: up to 7 heads × 4 vectors = 28 accumulators + 4 V vectors + the broadcast (GCC
  // keeps one accumulator on the stack): a 0.5B KV head's 7 query heads in one tile, each V
  // vector converted once for all 7, where 4 + 3 converted it twice. bench.attention, 14 heads of
  // 64 over 2, 1 thread, 2-vCPU Zen 4, alternating processes, 280 / 1024 / 2048 positions, from
  // DRAM (256 MiB ring), medians of 4: 21.0 / 85.3 / 158 -> 18.9 / 67.8 / 136 µs (the 4 + 3 runs
  // spread 72.6-87.2 and 144-177 µs at the longer two; these 67.5-68.0 and 134-141); with
  // kq_paired below, against neither, medians of 5: 20.8 / 72.1 / 143.5 -> 17.1 / 65.0 / 127.6.
  static constexpr int kPvHeads = 7;
  // Blocked PV: rows 6 at a time: 6 × 4 accumulators, 4 V vectors and a broadcast fill the 32
  // registers; each V value loaded is used by 6 FMAs.
  static constexpr int kPvRows = 6;
  static constexpr int kPvTileVectors = 4;
  // The float formats' prefill tile (gemm_tile_float): 4 rows × 6 tokens, one chain's 24
  // accumulators a pass, the 4 rows' vectors and one token's in the 32 registers (2 × 3 with all
  // four chains in registers at once: 32 tokens of F16 4864 x 896 from L3 5513 µs, this 4616).
  static constexpr int kFloatTileRows = 4, kFloatTileCols = 6;

  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float a) { return _mm512_set1_ps(a); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V load_h(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static V load_bf(const uint16_t* p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
  }
  static void store_h(uint16_t* p, V v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static V round_f16(V v) { return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)); }
  // The f16 scale of the Q8_0 block at b, in every lane; 16 of its int8 values at q times it.
  static V q8_scale(const uint8_t* b) {
    uint16_t d;
    std::memcpy(&d, b, sizeof d);
    return _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(d)));
  }
  static V q8_values(const uint8_t* q, V scale) {
    return _mm512_mul_ps(scale, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)))));
  }
  // GCC's tree: 256-bit halves, 128-bit halves, then lanes 0+2 and 1+3, then those two (hsum16).
  static float hsum(V v) { return _mm512_reduce_add_ps(v); }
  static float hmax(V v) { return _mm512_reduce_max_ps(v); }
  // The first r < 16 values (the rest read as 0).
  static V load_tail(const float* p, int64_t r) { return _mm512_maskz_loadu_ps(tail_mask(r), p); }
  // max(m, x[i]) in the first r < 16 lanes; m elsewhere.
  static V max_tail(V m, const float* x, int64_t r) { return _mm512_mask_max_ps(m, tail_mask(r), m, _mm512_maskz_loadu_ps(tail_mask(r), x)); }
  // exp_sub_sum's last r < 16 values: x[i] = exp(x[i] - m) stored; returns them (0 past r).
  static V exp_sub_tail(float* x, int64_t r, V vm) {
    const __mmask16 k = tail_mask(r);
    const __m512 e = _mm512_maskz_mov_ps(k, exp_nonpos(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x), vm)));
    _mm512_mask_storeu_ps(x, k, e);
    return e;
  }
  static V neg_abs(V g) { return _mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(g)); }
  // Sums 16 vectors' lanes at once: a[i]'s 16 lanes become lane i of the result, each through
  // hsum16's own tree (lane l + l+8, then + l+4, then 0+2 and 1+3, then those two), so every sum
  // has hsum16's bits. Four rounds of pairwise shuffles and adds (15 adds for 16 sums, against 4
  // per hsum16), then one permutation puts the sums in order.
  static V hsum_lanes(const V* a) {
    V s1[8];
    // l + l+8: 256-bit halves of two vectors side by side.
    for (int m = 0; m < 8; ++m)
      s1[m] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * m], a[2 * m + 1], 0x44), _mm512_shuffle_f32x4(a[2 * m], a[2 * m + 1], 0xEE));
    return hsum_pairs(s1);
  }
  // hsum_lanes from its first step on: lanes 0-7 of s1[m] hold vector 2m's l + l+8, lanes 8-15
  // vector 2m + 1's.
  static V hsum_pairs(const V* s1) {
    V s2[4], s3[2];
    // l + l+4: 128-bit lane k of s2[n] holds vector 4n + k's four sums c0..c3.
    for (int n = 0; n < 4; ++n)
      s2[n] = _mm512_add_ps(_mm512_shuffle_f32x4(s1[2 * n], s1[2 * n + 1], 0x88), _mm512_shuffle_f32x4(s1[2 * n], s1[2 * n + 1], 0xDD));
    // c0 + c2 and c1 + c3 (hsum16's movehl step): lane k of s3[p] holds vectors 8p + k and 8p + 4 + k.
    for (int p = 0; p < 2; ++p) {
      const __m512d u = _mm512_castps_pd(s2[2 * p]), v = _mm512_castps_pd(s2[2 * p + 1]);
      s3[p] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(u, v)), _mm512_castpd_ps(_mm512_unpackhi_pd(u, v)));
    }
    // d0 + d1 (the movehdup step): lane 4k + j holds vector 4j + k.
    const V r = _mm512_add_ps(_mm512_shuffle_ps(s3[0], s3[1], _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_ps(s3[0], s3[1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), r);
  }
  // The first m ≤ 16 lanes of v stored to p.
  static void store_first(float* p, V v, int64_t m) { _mm512_mask_storeu_ps(p, m >= 16 ? static_cast<__mmask16>(0xFFFF) : tail_mask(m), v); }

  // The first lane of v equal to m's, or -1.
  static int first_eq(V v, V m) {
    const __mmask16 k = _mm512_cmp_ps_mask(v, m, _CMP_EQ_OQ);
    return k ? __builtin_ctz(static_cast<unsigned>(k)) : -1;
  }
  static V mul_if_neg(V g, V e) { return _mm512_mask_mul_ps(g, _mm512_cmp_ps_mask(g, _mm512_setzero_ps(), _CMP_LT_OQ), g, e); }
  // exp(x) for x ≤ 0 (softmax arguments): Cody–Waite reduction x = n·ln2 + r, |r| ≤ ln2/2, a
  // degree-6 Taylor polynomial for e^r (relative error ~2e-7), then scalef by 2^n. Arguments
  // below -87 give 0.
  static V exp_nonpos(V x) {
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
};

using S = Avx512Ops;

// ---- Attention, K side (the decode kernel and the blocked prefill kernel) ----

// The sum of a vector's 16 lanes, in the tree of GCC's _mm512_reduce_add_ps: 256-bit halves
// (lane l + lane l+8), then 128-bit halves (+4), then lanes 0+2 and 1+3, then those two. Spelled
// out because the blocked prefill kernel reproduces this exact tree one lane class at a time.
inline float hsum16(__m512 v) {
  const __m256 b = _mm256_add_ps(_mm512_extractf32x8_ps(v, 1), _mm512_castps512_ps256(v));
  const __m128 c = _mm_add_ps(_mm256_extractf128_ps(b, 1), _mm256_castps256_ps128(b));
  const __m128 d = _mm_add_ps(c, _mm_movehl_ps(c, c));
  return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
}

// kq_lanes (float_simd.h) for several query heads per K row, with hsum_lanes' first step
// (lane l + lane l+8 of one position's sums) done by the layout instead of shuffles: K rows are
// staged in pairs, vector X of a pair holding values [16c, 16c + 8) of both rows (row 2m in lanes
// 0-7, row 2m + 1 in 8-15) and Y values [16c + 8, 16c + 16), and a head's q chunk is repeated in
// both halves (QX: its low 8 values twice, QY: its high 8). X's lanes then carry exactly the
// chains of kq_lanes' lanes 0-7 of the two positions and Y's of lanes 8-15 (the same product and
// FMAs in increasing c), so X + Y is hsum_lanes' first step, and hsum_pairs finishes its tree:
// every score keeps its bits. Staging converts 8 values at a time into 256-bit halves (as many
// conversions and stores as a whole row's), where hsum_lanes spent 16 of its 31 512-bit shuffles
// per head and block on that step. bench.attention, 14 heads of 64 over 2, 1 thread, 2-vCPU Zen
// 4, medians of 6 alternating processes, 280 / 1024 / 2048 positions: from DRAM (256 MiB ring)
// 19.2 / 68.1 / 134.9 -> 18.1 / 63.4 / 125.3 µs; from L2/L3 ~2 % (the multiply-adds bound it).
template <int NC>
void kq_paired(int64_t n, const uint16_t* k, int64_t kstride, const float* q, int64_t nq, float scale, float* scores, int64_t ld,
               int64_t ahead) {
  alignas(64) float kf[8][NC][2][16];
  const __m512 vs = _mm512_set1_ps(scale);
  for (int64_t t0 = 0; t0 < n; t0 += 16) {
    const int64_t m = n - t0 < 16 ? n - t0 : 16;
    for (int i = 0; i < 16; ++i) {
      const uint16_t* kr = k + (t0 + i) * kstride;
      if (i < m) prefetch_ahead(reinterpret_cast<const uint8_t*>(kr), ahead, 32 * NC);
      float* half = &kf[i / 2][0][0][0] + (i % 2) * 8;
      for (int c = 0; c < NC; ++c) {
        const __m256 lo = i < m ? _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kr + 16 * c))) : _mm256_setzero_ps();
        const __m256 hi = i < m ? _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kr + 16 * c + 8))) : _mm256_setzero_ps();
        _mm256_store_ps(half + c * 32, lo);
        _mm256_store_ps(half + c * 32 + 16, hi);
      }
    }
    // As in kq_lanes: the heads read the block through a pointer the compiler cannot equate with
    // kf, so it does not hoist the block's vectors out of the head loop and spill them.
    const float* kb = &kf[0][0][0][0];
    __asm__("" : "+r"(kb));
    for (int64_t j = 0; j < nq; ++j) {
      const float* qj = q + j * 16 * NC;
      __m512 x[8], y[8];
      {
        const __m512 qx = _mm512_broadcast_f32x8(_mm256_loadu_ps(qj)), qy = _mm512_broadcast_f32x8(_mm256_loadu_ps(qj + 8));
        for (int p = 0; p < 8; ++p) {
          x[p] = _mm512_mul_ps(qx, _mm512_load_ps(kb + (p * NC) * 32));
          y[p] = _mm512_mul_ps(qy, _mm512_load_ps(kb + (p * NC) * 32 + 16));
        }
      }
      for (int c = 1; c < NC; ++c) {
        const __m512 qx = _mm512_broadcast_f32x8(_mm256_loadu_ps(qj + 16 * c)), qy = _mm512_broadcast_f32x8(_mm256_loadu_ps(qj + 16 * c + 8));
        for (int p = 0; p < 8; ++p) {
          x[p] = _mm512_fmadd_ps(qx, _mm512_load_ps(kb + (p * NC + c) * 32), x[p]);
          y[p] = _mm512_fmadd_ps(qy, _mm512_load_ps(kb + (p * NC + c) * 32 + 16), y[p]);
        }
      }
      for (int p = 0; p < 8; ++p) x[p] = _mm512_add_ps(x[p], y[p]);
      S::store_first(scores + j * ld + t0, _mm512_mul_ps(S::hsum_pairs(x), vs), m);
    }
  }
}

void kq_f16(int64_t n, int64_t hd, const uint16_t* k, int64_t kstride, const float* q, int64_t nq, float scale,
            float* scores, int64_t ld, int64_t ahead) {
  // Head sizes 64, 128 and 256: 16 positions at a time (float_simd.h; several query heads a K
  // row: kq_paired).
  if (nq > 1) switch (hd) {
    case 64: return kq_paired<4>(n, k, kstride, q, nq, scale, scores, ld, ahead);
    case 128: return kq_paired<8>(n, k, kstride, q, nq, scale, scores, ld, ahead);
    case 256: return kq_paired<16>(n, k, kstride, q, nq, scale, scores, ld, ahead);
    default: break;
  }
  switch (hd) {
    case 64: return kq_lanes<S, 4>(n, reinterpret_cast<const uint8_t*>(k), kstride * 2, q, nq, scale, scores, ld, ahead);
    case 128: return kq_lanes<S, 8>(n, reinterpret_cast<const uint8_t*>(k), kstride * 2, q, nq, scale, scores, ld, ahead);
    case 256: return kq_lanes<S, 16>(n, reinterpret_cast<const uint8_t*>(k), kstride * 2, q, nq, scale, scores, ld, ahead);
    default: break;
  }
  if (hd % 16 != 0 || hd > 256) {
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < nq; ++j) {
        float s = 0;
        for (int64_t d = 0; d < hd; ++d) s += q[j * hd + d] * fp16_to_fp32(k[t * kstride + d]);
        scores[j * ld + t] = s * scale;
      }
    return;
  }
  // Other multiples of 16 up to 256 (80, 96, 112, ...): the same sums, one position at a time.
  const int64_t nc = hd / 16;
  __m512 kv[16];
  for (int64_t t = 0; t < n; ++t) {
    const uint16_t* kr = k + t * kstride;
    for (int64_t c = 0; c < nc; ++c) kv[c] = S::load_h(kr + 16 * c);
    for (int64_t j = 0; j < nq; ++j) {
      const float* qj = q + j * hd;
      __m512 acc = _mm512_mul_ps(_mm512_loadu_ps(qj), kv[0]);
      for (int64_t c = 1; c < nc; ++c) acc = _mm512_fmadd_ps(_mm512_loadu_ps(qj + 16 * c), kv[c], acc);
      scores[j * ld + t] = hsum16(acc) * scale;
    }
  }
}

// kt[d*ldt + i] = K row i, value d, as f32, for i < m; rows [m, 16) are zero. One 16×16
// transpose per 16 values of the rows (unpack 32-bit, unpack 64-bit, then two 128-bit lane
// shuffles). Rows: the cache's element format; k and kstride in bytes.
template <class Rows>
void transpose_k16(const uint8_t* k, int64_t kstride, int64_t m, int64_t nc, float* kt, int64_t ldt) {
  for (int64_t c = 0; c < nc; ++c) {
    __m512 r[16], a[16], b[16];
    for (int i = 0; i < 16; ++i) r[i] = i < m ? Rows::template load<S>(k + i * kstride, 16 * c) : _mm512_setzero_ps();
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

template <int NC, class Rows>
void kq_blocks(int64_t n, int64_t hd, const uint8_t* k, int64_t kstride, const float* q, int64_t rows, int64_t rpt, int64_t qstride,
               float scale, float* scores, int64_t ld, float* work) {
  for (int64_t t0 = 0; t0 < n;) {
    const int64_t m = n - t0;
    if (m > 16) {  // 32 positions (the second half zero-padded past m)
      const int64_t m2 = m < 32 ? m : 32;
      transpose_k16<Rows>(k + t0 * kstride, kstride, 16, hd / 16, work, 32);
      transpose_k16<Rows>(k + (t0 + 16) * kstride, kstride, m2 - 16, hd / 16, work + 16, 32);
      kq_rows_all<NC, 2>(q, rows, rpt, qstride, hd, work, scale, scores + t0, ld, m2);
      t0 += m2;
    } else {
      transpose_k16<Rows>(k + t0 * kstride, kstride, m, hd / 16, work, 16);
      kq_rows_all<NC, 1>(q, rows, rpt, qstride, hd, work, scale, scores + t0, ld, m);
      t0 += m;
    }
  }
}

// Head sizes with a compile-time trip count, the others at run time (k and kstride in bytes).
template <class Rows>
void kq_blocks_any(int64_t n, int64_t hd, const uint8_t* k, int64_t kstride, const float* q, int64_t rows, int64_t rpt, int64_t qstride,
                   float scale, float* scores, int64_t ld, float* work) {
  switch (hd) {
    case 64: kq_blocks<4, Rows>(n, hd, k, kstride, q, rows, rpt, qstride, scale, scores, ld, work); break;
    case 128: kq_blocks<8, Rows>(n, hd, k, kstride, q, rows, rpt, qstride, scale, scores, ld, work); break;
    case 256: kq_blocks<16, Rows>(n, hd, k, kstride, q, rows, rpt, qstride, scale, scores, ld, work); break;
    default: kq_blocks<0, Rows>(n, hd, k, kstride, q, rows, rpt, qstride, scale, scores, ld, work); break;
  }
}

bool kq_block_f16(int64_t n, int64_t hd, const uint16_t* k, int64_t kstride, const float* q, int64_t rows, int64_t rpt,
                  int64_t qstride, float scale, float* scores, int64_t ld, float* work) {
  if (hd % 16 != 0 || hd > 256) return false;  // kq_f16's own fallback order applies
  kq_blocks_any<F16Rows>(n, hd, reinterpret_cast<const uint8_t*>(k), kstride * static_cast<int64_t>(sizeof(uint16_t)), q, rows, rpt, qstride,
                         scale, scores, ld, work);
  return true;
}

bool kq_block_q8_0(int64_t n, int64_t hd, const uint8_t* k, int64_t kstride, const float* q, int64_t rows, int64_t rpt,
                   int64_t qstride, float scale, float* scores, int64_t ld, float* work) {
  if (hd % 32 != 0 || hd > 256) return false;
  kq_blocks_any<Q8Rows>(n, hd, k, kstride, q, rows, rpt, qstride, scale, scores, ld, work);
  return true;
}

}  // namespace

// BF16 with AVX512-BF16 (part of this ISA level, core/isa.h): a chunk is 32 raw BF16 values and
// one vdpbf16ps adds their 32 products into 16 f32 lanes (lane l: values 2l and 2l + 1), as
// llama.cpp's BF16 vec_dot does on such a CPU, with no conversion (BF16 inputs below the normal
// range count as zero there). The BF16 tile and vec_dot take it (the same bits, gemm_tile_float),
// with four chains: with two, vec_dot one row at a time waited on vdpbf16ps's latency (0.5B BF16
// decode 33.4 -> 26.0 tok/s against the converting dot; four: 29.2 -> 32.3, level). 0.5B BF16
// prefill, 1 thread, medians of 3: converting tile 104-106 tok/s, pairs with two chains 171.5,
// with four 139.8.
namespace {
struct Bf16PairChunks {
  using E = uint16_t;
  template <class S>
  using Reg = __m512bh;
  template <class S>
  static constexpr int64_t chunk() { return 32; }
  template <class S>
  static __m512bh load(const E* p) { return (__m512bh)_mm512_loadu_si512(p); }
  template <class S>
  static __m512 madd(__m512 acc, __m512bh w, __m512bh x) { return _mm512_dpbf16_ps(acc, w, x); }
  static float value(E x) { return bf16_to_fp32(x); }
};
}  // namespace

void fill_float_fns_avx512(FloatFns* f) {
  fill_float_fns_simd<Avx512Ops>(f);
  f->dot_bf16 = dot_float<Avx512Ops, Bf16PairChunks, 4>;
  f->gemm_tile_bf16 = gemm_tile_float<Avx512Ops, Bf16PairChunks, 4, Avx512Ops::kFloatTileRows, Avx512Ops::kFloatTileCols>;
  f->kq_f16 = kq_f16;
  f->kq_block_f16 = kq_block_f16;
  f->kq_block_q8_0 = kq_block_q8_0;
}

}  // namespace kernels
}  // namespace fulcrum
