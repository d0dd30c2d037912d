// Q4_K × Q8_K prefill tile for AVX2 (kTileRowsQ4kAvx2 weight rows × kTileColsQ4kAvx2 tokens per
// call). Per super-block each row's 6-bit scales and mins are unpacked once and each 64-element
// chunk's nibbles once, shared by the tile's tokens; each token's activations and bsums are read
// once per chunk, shared by the rows. Every (row, token) pair keeps vec_dot_q4_k_avx2's integer
// sums, its two accumulators (products and mins), their order and the final reduction, so the
// outputs equal vec_dot's bit for bit (AVX2 decodes Q4_K with vec_dot).
#include "quant/formats/blocks.h"
#include "quant/tiles/gemm_tile_dispatch.h"
#include "quant/tiles/gemm_tiles.h"
#include "quant/formats/k_scales.h"
#define QUANT_ISA QUANT_AVX2_LEVEL
#include "quant/dot/simd_avx2.h"

namespace fulcrum {
namespace quant {
namespace {
using namespace simd;

struct Q4_KTile {
  template <int R, int C>
  static void run(int64_t n, float* out, int64_t os, const uint8_t* w, size_t wrb, const uint8_t* a, size_t arb) {
    const int64_t nsb = n / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[R][C], acc_m[R][C];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) acc[r][c] = acc_m[r][c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nsb; ++i) {
      uint8_t sc[R][8];
      __m256i mins16[R];
      const block_q4_K* xr[R];
      for (int r = 0; r < R; ++r) {
        xr[r] = reinterpret_cast<const block_q4_K*>(w + r * wrb) + i;
        prefetch_ahead<192>(xr[r]);
        uint8_t mn[8];
        unpack_scales_mins_k4(xr[r]->scales, sc[r], mn);
        const __m128i mins8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn));
        mins16[r] = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins8, mins8));
      }
      const block_q8_K* yc[C];
      for (int c = 0; c < C; ++c) yc[c] = reinterpret_cast<const block_q8_K*>(a + c * arb) + i;
      __m256i sumi[R][C];
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) sumi[r][c] = _mm256_setzero_si256();
      for (int ch = 0; ch < 4; ++ch) {
        for (int r = 0; r < R; ++r) {
          const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr[r]->qs + 32 * ch));
          const __m256i lo = _mm256_and_si256(q, m4);
          const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
          const __m256i slo = _mm256_set1_epi16(sc[r][2 * ch]), shi = _mm256_set1_epi16(sc[r][2 * ch + 1]);
          for (int c = 0; c < C; ++c) {
            const __m256i ylo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yc[c]->qs + 64 * ch));
            const __m256i yhi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yc[c]->qs + 64 * ch + 32));
            const __m256i plo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, ylo), slo);
            const __m256i phi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, yhi), shi);
            sumi[r][c] = _mm256_add_epi32(sumi[r][c], _mm256_add_epi32(plo, phi));
          }
        }
      }
      for (int c = 0; c < C; ++c) {
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yc[c]->bsums));
        for (int r = 0; r < R; ++r) {
          const __m256i summ = _mm256_madd_epi16(bsums, mins16[r]);
          acc[r][c] = _mm256_fmadd_ps(_mm256_set1_ps(yc[c]->d * f16(xr[r]->d)), _mm256_cvtepi32_ps(sumi[r][c]), acc[r][c]);
          acc_m[r][c] = _mm256_fmadd_ps(_mm256_set1_ps(yc[c]->d * f16(xr[r]->dmin)), _mm256_cvtepi32_ps(summ), acc_m[r][c]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) out[c * os + r] = hsum(_mm256_sub_ps(acc[r][c], acc_m[r][c]));
  }
};

}  // namespace

void QUANT_FN(gemm_tile_q4_k)(int64_t n, float* out, int64_t out_stride, const void* w, size_t w_row_bytes, int rows,
                         const void* act, size_t act_row_bytes, int cols) {
  gemm_tile_any<Q4_KTile, kTileRowsQ4kAvx2, kTileColsQ4kAvx2>(n, out, out_stride, w, w_row_bytes, rows, act, act_row_bytes, cols);
}

}  // namespace quant
}  // namespace fulcrum
