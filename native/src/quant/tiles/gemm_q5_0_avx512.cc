// Q5_0 × Q8_0 prefill tile for AVX-512 VNNI (4 weight rows × 4 tokens per call), the Q4_0 tile
// with the fifth bit: each block pair's 64 high bits are a byte mask that adds 16 to the
// nibbles (0..31, unsigned), and Σ(q − 16)·y = dpbusd(q, y) − dpbusd(16, y) with −dpbusd(16, y)
// computed once per token. The fifth bits and nibbles of a block pair are unpacked once per
// weight row and shared by the tile's tokens. Lanes, scales and reduction equal
// vec_dot_q5_0_avx512's: results match bit for bit.
#include "quant/formats/blocks.h"
#include "quant/tiles/gemm_tile_dispatch.h"
#include "quant/tiles/gemm_tiles.h"
#define QUANT_ISA avx512
#include "quant/dot/simd_avx512.h"

namespace fulcrum {
namespace quant {
namespace {
using namespace simd;

struct Q5_0Tile {
  template <int R, int C>
  static void run(int64_t n, float* out, int64_t os, const uint8_t* w, size_t wrb, const uint8_t* a, size_t arb) {
    const int64_t nb = n / QK5_0;
    const __m512i sixteen = _mm512_set1_epi8(16);
    __m512 acc[R][C];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
      __m512i ay[C], neg16[C];
      float dy0[C], dy1[C];
      for (int c = 0; c < C; ++c) {
        const block_q8_0* y = reinterpret_cast<const block_q8_0*>(a + c * arb) + i;
        ay[c] = load_2x32(y[0].qs, y[1].qs);
        neg16[c] = _mm512_sub_epi32(_mm512_setzero_si512(), dot_us8_512(sixteen, ay[c]));
        dy0[c] = f16(y[0].d);
        dy1[c] = f16(y[1].d);
      }
      for (int r = 0; r < R; ++r) {
        const block_q5_0* x = reinterpret_cast<const block_q5_0*>(w + r * wrb) + i;
        prefetch_ahead<64>(x);
        __m512i q = nibbles_2x32(x[0].qs, x[1].qs);
        q = _mm512_mask_add_epi8(q, _cvtu64_mask64(qh_2(x[0].qh, x[1].qh)), q, sixteen);
        const float dx0 = f16(x[0].d), dx1 = f16(x[1].d);
        for (int c = 0; c < C; ++c) {
          const __m512i s = _mm512_dpbusd_epi32(neg16[c], q, ay[c]);
          // vec_dot's scale: the product d_x · d_y per block, rounded once as a float.
          acc[r][c] = _mm512_fmadd_ps(scales_2(dx0 * dy0[c], dx1 * dy1[c]), _mm512_cvtepi32_ps(s), acc[r][c]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      const block_q5_0* x = reinterpret_cast<const block_q5_0*>(w + r * wrb);
      for (int c = 0; c < C; ++c) {
        const block_q8_0* y = reinterpret_cast<const block_q8_0*>(a + c * arb);
        float sum = _mm512_reduce_add_ps(acc[r][c]);
        if (i < nb) {  // odd block count: the last block at 256 bits, as vec_dot does
          const __m256i hi = _mm256_and_si256(bits_to_bytes_32(x[i].qh), _mm256_set1_epi8(0x10));
          const __m256i qx = _mm256_sub_epi8(_mm256_or_si256(nibbles_32(x[i].qs), hi), _mm256_set1_epi8(16));
          const __m256i p = dot_ss8(qx, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs)));
          sum += f16(x[i].d) * f16(y[i].d) * static_cast<float>(hsum_i32(p));
        }
        out[c * os + r] = sum;
      }
    }
  }
};

}  // namespace

void gemm_tile_q5_0_avx512(int64_t n, float* out, int64_t out_stride, const void* w, size_t w_row_bytes, int rows,
                           const void* act, size_t act_row_bytes, int cols) {
  gemm_tile_any<Q5_0Tile, kTileRowsAvx512, kTileColsAvx512>(n, out, out_stride, w, w_row_bytes, rows, act, act_row_bytes, cols);
}

}  // namespace quant
}  // namespace fulcrum
