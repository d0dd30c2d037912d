// Q4_0 × Q8_0 prefill tile for AVX2 (4 weight rows × 2 tokens per call), one block per ymm. The
// nibbles stay unsigned (0..15, so maddubs(q, y) cannot saturate) and are unpacked once per
// weight block; maddubs(8, y) is computed once per token block: Σ(q − 8)·y = madd(maddubs(q, y)
// − maddubs(8, y)). Integer block sums equal vec_dot_q4_0_avx2's; only the float summation
// order differs (one accumulator, not two).
#define QUANT_ISA QUANT_AVX2_LEVEL
#include "quant/formats/blocks.h"
#include "quant/tiles/gemm_tile_dispatch.h"
#include "quant/tiles/gemm_tiles.h"
#include "quant/dot/simd_avx2.h"

namespace fulcrum {
namespace quant {
namespace {
using namespace simd;

struct Q4_0Tile {
  template <int R, int C>
  static void run(int64_t n, float* out, int64_t os, const uint8_t* w, size_t wrb, const uint8_t* a, size_t arb) {
    const int64_t nb = n / QK4_0;
    const __m256i eight = _mm256_set1_epi8(8);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[R][C];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      __m256i ay[C], y8[C];
      __m256 ad[C];
      for (int c = 0; c < C; ++c) {
        const block_q8_0* y = reinterpret_cast<const block_q8_0*>(a + c * arb) + i;
        ay[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y->qs));
        y8[c] = _mm256_maddubs_epi16(eight, ay[c]);
        ad[c] = _mm256_set1_ps(f16(y->d));
      }
      for (int r = 0; r < R; ++r) {
        const block_q4_0* x = reinterpret_cast<const block_q4_0*>(w + r * wrb) + i;
        if ((i & 3) == 0) prefetch_ahead<64>(x);
        const __m256i q = nibbles_32(x->qs);
        const __m256 wd = _mm256_set1_ps(f16(x->d));
        for (int c = 0; c < C; ++c) {
          const __m256i p = _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(q, ay[c]), y8[c]), ones);
          acc[r][c] = _mm256_fmadd_ps(_mm256_mul_ps(wd, ad[c]), _mm256_cvtepi32_ps(p), acc[r][c]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) out[c * os + r] = hsum(acc[r][c]);
  }
};

}  // namespace

void QUANT_FN(gemm_tile_q4_0)(int64_t n, float* out, int64_t out_stride, const void* w, size_t w_row_bytes, int rows,
                         const void* act, size_t act_row_bytes, int cols) {
  gemm_tile_any<Q4_0Tile, kTileRowsAvx2, kTileColsAvx2>(n, out, out_stride, w, w_row_bytes, rows, act, act_row_bytes, cols);
}

}  // namespace quant
}  // namespace fulcrum
