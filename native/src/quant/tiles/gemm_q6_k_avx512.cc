// Q6_K × Q8_K prefill tile for AVX-512 VNNI (kTileRowsQ6kAvx512 weight rows × kTileColsQ6kAvx512
// tokens per call), the blocking of the Q4_K tile applied to vec_dot_q6_k_avx512: per super-block
// each weight row's 6-bit values are assembled from ql/qh once (four zmm) and its int8 scales
// spread once, and each token's 256 activations are loaded once per half, shared by the rows.
// A (row, token) pair then costs four maddubs + vpdpwssd and one scale-and-accumulate. Each pair
// keeps vec_dot's int32 lanes (starting from −32·Σ sc·bsum), its vpdpwssd order, scale product
// and reduction: results match it bit for bit. Q4_K_M files store attn_v, half of ffn_down and
// the output matrix in Q6_K, so this is most of a Q4_K_M prompt's non-Q4_K work.
#include "quant/formats/blocks.h"
#include "quant/tiles/gemm_tile_dispatch.h"
#include "quant/tiles/gemm_tiles.h"
#include "quant/dot/k_idx_avx512.h"
#define QUANT_ISA avx512
#include "quant/dot/simd_avx2.h"

namespace fulcrum {
namespace quant {
namespace {
using namespace simd;

struct Q6_KTile {
  template <int R, int C>
  static void run(int64_t n, float* out, int64_t os, const uint8_t* w, size_t wrb, const uint8_t* a, size_t arb) {
    const int64_t nsb = n / QK_K;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i m2 = _mm512_set1_epi8(0x03);
    // per-int16-lane right shifts of qh: quarters 1|2 use bits 0-1|2-3, quarters 3|4 bits 4-5|6-7
    const __m512i sh12 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i sh34 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
    __m512 acc[R][C];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nsb; ++i) {
      const block_q6_K* xr[R];
      __m256i sc256[R];
      for (int r = 0; r < R; ++r) {
        xr[r] = reinterpret_cast<const block_q6_K*>(w + r * wrb) + i;
        if constexpr (C == 1) {  // decode (the GEMV): R row streams, prefetched far ahead (gemm_tiles.h)
          for (int o = 0; o < 256; o += 64) _mm_prefetch(reinterpret_cast<const char*>(xr[r]) + kGemvQ8PrefetchAhead + o, _MM_HINT_T1);
        } else {
          prefetch_ahead<256>(xr[r]);
        }
        sc256[r] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xr[r]->scales)));
      }
      const block_q8_K* yc[C];
      for (int c = 0; c < C; ++c) yc[c] = reinterpret_cast<const block_q8_K*>(a + c * arb) + i;
      __m512i sumi[R][C];
      for (int c = 0; c < C; ++c) {
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yc[c]->bsums));
        for (int r = 0; r < R; ++r) {
          const __m256i off = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc256[r]), 5));
          sumi[r][c] = _mm512_inserti64x4(_mm512_castsi256_si512(off), _mm256_setzero_si256(), 1);
        }
      }
      for (int h = 0; h < 2; ++h) {
        __m512i y12[C], y34[C];
        for (int c = 0; c < C; ++c) {
          y12[c] = _mm512_loadu_si512(yc[c]->qs + 128 * h);
          y34[c] = _mm512_loadu_si512(yc[c]->qs + 128 * h + 64);
        }
        const __m512i idx12 = _mm512_load_si512(kQ6kScaleIdx[2 * h]), idx34 = _mm512_load_si512(kQ6kScaleIdx[2 * h + 1]);
        for (int r = 0; r < R; ++r) {
          const __m512i ql = _mm512_loadu_si512(xr[r]->ql + 64 * h);
          const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr[r]->qh + 32 * h));
          const __m512i qh2 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), qh, 1);
          const __m512i q12 = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh2, sh12), m2), 4));
          const __m512i q34 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                              _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh2, sh34), m2), 4));
          const __m512i sc16 = _mm512_castsi256_si512(sc256[r]);
          const __m512i s12 = _mm512_permutexvar_epi16(idx12, sc16), s34 = _mm512_permutexvar_epi16(idx34, sc16);
          for (int c = 0; c < C; ++c) {
            sumi[r][c] = _mm512_dpwssd_epi32(sumi[r][c], _mm512_maddubs_epi16(q12, y12[c]), s12);
            sumi[r][c] = _mm512_dpwssd_epi32(sumi[r][c], _mm512_maddubs_epi16(q34, y34[c]), s34);
          }
        }
      }
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c)
          acc[r][c] = _mm512_fmadd_ps(_mm512_set1_ps(yc[c]->d * f16(xr[r]->d)), _mm512_cvtepi32_ps(sumi[r][c]), acc[r][c]);
    }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) out[c * os + r] = _mm512_reduce_add_ps(acc[r][c]);
  }
};

}  // namespace

void gemm_tile_q6_k_avx512(int64_t n, float* out, int64_t out_stride, const void* w, size_t w_row_bytes, int rows,
                           const void* act, size_t act_row_bytes, int cols) {
  gemm_tile_any<Q6_KTile, kTileRowsQ6kAvx512, kTileColsQ6kAvx512>(n, out, out_stride, w, w_row_bytes, rows, act, act_row_bytes, cols);
}

// Decode GEMV: the tile kernel at one token, kGemvRowsK rows per pass (each row's arithmetic is
// the tile's, whatever the tile's shape, so decode and prefill give a token the same bits).
void gemv_q6_k_avx512(int64_t n, float* out, const void* w, size_t w_row_bytes, int rows, const void* act) {
  gemm_tile_any<Q6_KTile, kGemvRowsK, 1>(n, out, 1, w, w_row_bytes, rows, act, 0, 1);
}

}  // namespace quant
}  // namespace fulcrum
