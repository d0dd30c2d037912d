// Q6_K × Q8_K prefill tile for AVX2 (kTileRowsQ6kAvx2 weight rows × kTileColsQ6kAvx2 tokens per
// call). Rebuilding the 6-bit values from ql and qh costs more than multiplying them (about 20
// instructions per 128 weights), so the tile does it once per row and shares the result across
// its tokens; each token's activations are read once per row pair. Every (row, token) pair keeps
// vec_dot_q6_k_avx2's integer sums (the −32 offset through bsums, the scale pairs spread by
// permute), its accumulation order and reduction: outputs equal vec_dot's bit for bit.
#include "quant/formats/blocks.h"
#include "quant/tiles/gemm_tile_dispatch.h"
#include "quant/tiles/gemm_tiles.h"
#define QUANT_ISA QUANT_AVX2_LEVEL
#include "quant/dot/simd_avx2.h"

namespace fulcrum {
namespace quant {
namespace {
using namespace simd;

struct Q6_KTile {
  template <int R, int C>
  static void run(int64_t n, float* out, int64_t os, const uint8_t* w, size_t wrb, const uint8_t* a, size_t arb) {
    const int64_t nsb = n / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
    const __m256i pair[4] = {_mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1), _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3),
                             _mm256_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5), _mm256_setr_epi32(6, 6, 6, 6, 7, 7, 7, 7)};
    __m256 acc[R][C];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nsb; ++i) {
      const block_q6_K* xr[R];
      const block_q8_K* yc[C];
      for (int c = 0; c < C; ++c) yc[c] = reinterpret_cast<const block_q8_K*>(a + c * arb) + i;
      __m256i sumi[R][C];
      for (int r = 0; r < R; ++r) {
        xr[r] = reinterpret_cast<const block_q6_K*>(w + r * wrb) + i;
        prefetch_ahead<256>(xr[r]);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xr[r]->scales)));
        for (int c = 0; c < C; ++c) {
          const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yc[c]->bsums));
          sumi[r][c] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16), 5));
        }
      }
      for (int h = 0; h < 2; ++h) {
        for (int r = 0; r < R; ++r) {
          const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xr[r]->scales));
          const __m256i dup = _mm256_cvtepi8_epi16(h == 0 ? _mm_unpacklo_epi8(sc8, sc8) : _mm_unpackhi_epi8(sc8, sc8));
          const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr[r]->ql + 64 * h));
          const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr[r]->ql + 64 * h + 32));
          const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr[r]->qh + 32 * h));
          const __m256i q[4] = {
              _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4)),
              _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4)),
              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4)),
              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4))};
          // vec_dot adds the four products in order after computing them; integer adds are
          // exact in any order, so the sums here are its sums.
          for (int k = 0; k < 4; ++k) {
            const __m256i s = _mm256_permutevar8x32_epi32(dup, pair[k]);
            for (int c = 0; c < C; ++c) {
              const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yc[c]->qs + 128 * h + 32 * k));
              sumi[r][c] = _mm256_add_epi32(sumi[r][c], _mm256_madd_epi16(_mm256_maddubs_epi16(q[k], y), s));
            }
          }
        }
      }
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c)
          acc[r][c] = _mm256_fmadd_ps(_mm256_set1_ps(yc[c]->d * f16(xr[r]->d)), _mm256_cvtepi32_ps(sumi[r][c]), acc[r][c]);
    }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) out[c * os + r] = hsum(acc[r][c]);
  }
};

}  // namespace

void QUANT_FN(gemm_tile_q6_k)(int64_t n, float* out, int64_t out_stride, const void* w, size_t w_row_bytes, int rows,
                         const void* act, size_t act_row_bytes, int cols) {
  gemm_tile_any<Q6_KTile, kTileRowsQ6kAvx2, kTileColsQ6kAvx2>(n, out, out_stride, w, w_row_bytes, rows, act, act_row_bytes, cols);
}

}  // namespace quant
}  // namespace fulcrum
