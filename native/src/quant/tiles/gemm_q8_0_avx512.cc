// Q8_0 × Q8_0 prefill tile for AVX-512 VNNI (4 weight rows × 4 tokens per call). Two blocks per
// zmm as in vec_dot_q8_0_avx512, but the signed × signed product goes through vpdpbusd as
// (a + 128) · w − 128 · Σw: the activations are biased once per token (shared by the tile's
// rows) and 128 · Σw once per weight row (shared by its tokens), so each (row, token) pair costs
// one vpdpbusd plus the float scale-and-accumulate. The int32 lanes, scale products and the
// final reduction equal vec_dot's, so results match it bit for bit.
#include "quant/formats/blocks.h"
#include "quant/tiles/gemm_tile_dispatch.h"
#include "quant/tiles/gemm_tiles.h"
#define QUANT_ISA avx512
#include "quant/dot/simd_avx512.h"

namespace fulcrum {
namespace quant {
namespace {
using namespace simd;

struct Q8_0Tile {
  template <int R, int C>
  static void run(int64_t n, float* out, int64_t os, const uint8_t* w, size_t wrb, const uint8_t* a, size_t arb) {
    const int64_t nb = n / QK8_0;
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
    __m512 acc[R][C];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
      __m512i au[C];
      __m512 ad[C];
      for (int c = 0; c < C; ++c) {
        const block_q8_0* y = reinterpret_cast<const block_q8_0*>(a + c * arb) + i;
        au[c] = _mm512_xor_si512(load_2x32(y[0].qs, y[1].qs), bias);
        ad[c] = scales_2(f16(y[0].d), f16(y[1].d));
      }
      for (int r = 0; r < R; ++r) {
        const block_q8_0* x = reinterpret_cast<const block_q8_0*>(w + r * wrb) + i;
        prefetch_ahead<128>(x);
        const __m512i xv = load_2x32(x[0].qs, x[1].qs);
        const __m512i neg_corr = _mm512_sub_epi32(_mm512_setzero_si512(), dot_us8_512(bias, xv));
        const __m512 wd = scales_2(f16(x[0].d), f16(x[1].d));
        for (int c = 0; c < C; ++c) {
          const __m512i s = _mm512_dpbusd_epi32(neg_corr, au[c], xv);
          acc[r][c] = _mm512_fmadd_ps(_mm512_mul_ps(wd, ad[c]), _mm512_cvtepi32_ps(s), acc[r][c]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      const block_q8_0* x = reinterpret_cast<const block_q8_0*>(w + r * wrb);
      for (int c = 0; c < C; ++c) {
        const block_q8_0* y = reinterpret_cast<const block_q8_0*>(a + c * arb);
        float sum = _mm512_reduce_add_ps(acc[r][c]);
        if (i < nb) {  // odd block count: the last block at 256 bits, as vec_dot does
          const __m256i p = dot_ss8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs)),
                                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs)));
          sum += f16(x[i].d) * f16(y[i].d) * static_cast<float>(hsum_i32(p));
        }
        out[c * os + r] = sum;
      }
    }
  }
};

}  // namespace

void gemm_tile_q8_0_avx512(int64_t n, float* out, int64_t out_stride, const void* w, size_t w_row_bytes, int rows,
                           const void* act, size_t act_row_bytes, int cols) {
  gemm_tile_any<Q8_0Tile, kTileRowsAvx512, kTileColsAvx512>(n, out, out_stride, w, w_row_bytes, rows, act, act_row_bytes, cols);
}

}  // namespace quant
}  // namespace fulcrum
