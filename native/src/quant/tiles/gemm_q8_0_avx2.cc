// Q8_0 × Q8_0 prefill tile for AVX2 (4 weight rows × 2 tokens per call), one 32-element block
// per ymm. |w| is taken once per weight block (shared by the tile's tokens), the activation
// block and its scale are loaded once per token (shared by the tile's rows); each (row, token)
// pair costs sign + maddubs + madd and the float scale-and-accumulate. Integer block sums equal
// vec_dot_q8_0_avx2's; only the float summation order differs (one accumulator, not two).
#define QUANT_ISA QUANT_AVX2_LEVEL
#include "quant/formats/blocks.h"
#include "quant/tiles/gemm_tile_dispatch.h"
#include "quant/tiles/gemm_tiles.h"
#include "quant/dot/simd_avx2.h"

namespace fulcrum {
namespace quant {
namespace {
using namespace simd;

struct Q8_0Tile {
  template <int R, int C>
  static void run(int64_t n, float* out, int64_t os, const uint8_t* w, size_t wrb, const uint8_t* a, size_t arb) {
    const int64_t nb = n / QK8_0;
    __m256 acc[R][C];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      __m256i ay[C];
      __m256 ad[C];
      for (int c = 0; c < C; ++c) {
        const block_q8_0* y = reinterpret_cast<const block_q8_0*>(a + c * arb) + i;
        ay[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y->qs));
        ad[c] = _mm256_set1_ps(f16(y->d));
      }
      for (int r = 0; r < R; ++r) {
        const block_q8_0* x = reinterpret_cast<const block_q8_0*>(w + r * wrb) + i;
        if ((i & 1) == 0) prefetch_ahead<128>(x);
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->qs));
        const __m256i ax = _mm256_sign_epi8(xv, xv);
        const __m256 wd = _mm256_set1_ps(f16(x->d));
        for (int c = 0; c < C; ++c) {
          const __m256i p = dot_us8(ax, _mm256_sign_epi8(ay[c], xv));
          acc[r][c] = _mm256_fmadd_ps(_mm256_mul_ps(wd, ad[c]), _mm256_cvtepi32_ps(p), acc[r][c]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) out[c * os + r] = hsum(acc[r][c]);
  }
};

}  // namespace

void QUANT_FN(gemm_tile_q8_0)(int64_t n, float* out, int64_t out_stride, const void* w, size_t w_row_bytes, int rows,
                         const void* act, size_t act_row_bytes, int cols) {
  gemm_tile_any<Q8_0Tile, kTileRowsQ8Avx2, kTileColsQ8Avx2>(n, out, out_stride, w, w_row_bytes, rows, act, act_row_bytes, cols);
}

}  // namespace quant
}  // namespace fulcrum
