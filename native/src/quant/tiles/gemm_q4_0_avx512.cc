// Q4_0 × Q8_0 prefill tile for AVX-512 VNNI (4 weight rows × 4 tokens per call). As in
// vec_dot_q4_0_avx512 the nibbles stay unsigned: Σ(q − 8)·y = dpbusd(q, y) − dpbusd(8, y). The
// nibbles of a block pair are unpacked once per weight row (shared by the tile's tokens) and
// −dpbusd(8, y) once per token (shared by its rows), seeding the accumulator of the one vpdpbusd
// each (row, token) pair costs. Lanes, scales and reduction equal vec_dot's: results match bit
// for bit.
#include "quant/formats/blocks.h"
#include "quant/tiles/gemm_tile_dispatch.h"
#include "quant/tiles/gemm_tiles.h"
#define QUANT_ISA avx512
#include "quant/dot/simd_avx512.h"

namespace fulcrum {
namespace quant {
namespace {
using namespace simd;

struct Q4_0Tile {
  template <int R, int C>
  static void run(int64_t n, float* out, int64_t os, const uint8_t* w, size_t wrb, const uint8_t* a, size_t arb) {
    const int64_t nb = n / QK4_0;
    const __m512i eight = _mm512_set1_epi8(8);
    __m512 acc[R][C];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
      __m512i ay[C], neg8[C];
      __m512 ad[C];
      for (int c = 0; c < C; ++c) {
        const block_q8_0* y = reinterpret_cast<const block_q8_0*>(a + c * arb) + i;
        ay[c] = load_2x32(y[0].qs, y[1].qs);
        neg8[c] = _mm512_sub_epi32(_mm512_setzero_si512(), dot_us8_512(eight, ay[c]));
        ad[c] = scales_2(f16(y[0].d), f16(y[1].d));
      }
      for (int r = 0; r < R; ++r) {
        const block_q4_0* x = reinterpret_cast<const block_q4_0*>(w + r * wrb) + i;
        prefetch_ahead<64>(x);
        const __m512i q = nibbles_2x32(x[0].qs, x[1].qs);
        const __m512 wd = scales_2(f16(x[0].d), f16(x[1].d));
        for (int c = 0; c < C; ++c) {
          const __m512i s = _mm512_dpbusd_epi32(neg8[c], q, ay[c]);
          acc[r][c] = _mm512_fmadd_ps(_mm512_mul_ps(wd, ad[c]), _mm512_cvtepi32_ps(s), acc[r][c]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      const block_q4_0* x = reinterpret_cast<const block_q4_0*>(w + r * wrb);
      for (int c = 0; c < C; ++c) {
        const block_q8_0* y = reinterpret_cast<const block_q8_0*>(a + c * arb);
        float sum = _mm512_reduce_add_ps(acc[r][c]);
        if (i < nb) {  // odd block count: the last block at 256 bits, as vec_dot does
          const __m256i qx = _mm256_sub_epi8(nibbles_32(x[i].qs), _mm256_set1_epi8(8));
          const __m256i p = dot_ss8(qx, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs)));
          sum += f16(x[i].d) * f16(y[i].d) * static_cast<float>(hsum_i32(p));
        }
        out[c * os + r] = sum;
      }
    }
  }
};

}  // namespace

void gemm_tile_q4_0_avx512(int64_t n, float* out, int64_t out_stride, const void* w, size_t w_row_bytes, int rows,
                           const void* act, size_t act_row_bytes, int cols) {
  gemm_tile_any<Q4_0Tile, kTileRowsAvx512, kTileColsAvx512>(n, out, out_stride, w, w_row_bytes, rows, act, act_row_bytes, cols);
}

}  // namespace quant
}  // namespace fulcrum
