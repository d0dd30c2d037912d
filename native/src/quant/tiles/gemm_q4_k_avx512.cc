// Q4_K × Q8_K prefill tile for AVX-512 VNNI (kTileRowsQ4kAvx512 weight rows × kTileColsQ4kAvx512
// tokens per call). Per super-block, each weight row's scales and mins are unpacked once and
// each 64-element chunk's nibbles once (shared by the tile's tokens); each token's 64
// activations are loaded once per chunk (shared by the tile's rows). A (row, token) pair then
// costs maddubs + vpdpwssd per chunk into an int32 super-block sum, and one scale-and-accumulate
// plus the mins term per super-block. Same integer sums as vec_dot_q4_k_avx512; the mins term is
// folded into the main accumulator here, so float summation order differs slightly.
#include "quant/formats/blocks.h"
#include "quant/tiles/gemm_tile_dispatch.h"
#include "quant/tiles/gemm_tiles.h"
#include "quant/dot/k_idx_avx512.h"
#include "quant/formats/k_scales.h"
#define QUANT_ISA avx512
#include "quant/dot/simd_avx2.h"

namespace fulcrum {
namespace quant {
namespace {
using namespace simd;

struct Q4_KTile {
  template <int R, int C>
  static void run(int64_t n, float* out, int64_t os, const uint8_t* w, size_t wrb, const uint8_t* a, size_t arb) {
    const int64_t nsb = n / QK_K;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 acc[R][C];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nsb; ++i) {
      __m512i sc16[R];
      __m256i mins16[R];
      float dx[R], dmx[R];
      const block_q4_K* xr[R];
      for (int r = 0; r < R; ++r) {
        xr[r] = reinterpret_cast<const block_q4_K*>(w + r * wrb) + i;
        if constexpr (C == 1) {  // decode (the GEMV): R row streams, prefetched far ahead (gemm_tiles.h)
          for (int o = 0; o < 192; o += 64) _mm_prefetch(reinterpret_cast<const char*>(xr[r]) + kGemvQ8PrefetchAhead + o, _MM_HINT_T1);
        } else {
          prefetch_ahead<192>(xr[r]);
        }
        uint8_t sc[8], mn[8];
        unpack_scales_mins_k4(xr[r]->scales, sc, mn);
        sc16[r] = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc))));
        const __m128i mins8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn));
        mins16[r] = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins8, mins8));
        dx[r] = f16(xr[r]->d);
        dmx[r] = f16(xr[r]->dmin);
      }
      const block_q8_K* yc[C];
      for (int c = 0; c < C; ++c) yc[c] = reinterpret_cast<const block_q8_K*>(a + c * arb) + i;
      __m512i sumi[R][C];
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) sumi[r][c] = _mm512_setzero_si512();
      for (int ch = 0; ch < 4; ++ch) {
        __m512i yv[C];
        for (int c = 0; c < C; ++c) yv[c] = _mm512_loadu_si512(yc[c]->qs + 64 * ch);
        const __m512i idx = _mm512_load_si512(kQ4kScaleIdx[ch]);
        for (int r = 0; r < R; ++r) {
          const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr[r]->qs + 32 * ch));
          const __m512i q512 = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1), m4);
          const __m512i s = _mm512_permutexvar_epi16(idx, sc16[r]);
          for (int c = 0; c < C; ++c) sumi[r][c] = _mm512_dpwssd_epi32(sumi[r][c], _mm512_maddubs_epi16(q512, yv[c]), s);
        }
      }
      for (int c = 0; c < C; ++c) {
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yc[c]->bsums));
        const float dy = yc[c]->d;
        for (int r = 0; r < R; ++r) {
          const __m256 mins = _mm256_cvtepi32_ps(_mm256_madd_epi16(bsums, mins16[r]));
          acc[r][c] = _mm512_fmadd_ps(_mm512_set1_ps(dy * dx[r]), _mm512_cvtepi32_ps(sumi[r][c]), acc[r][c]);
          acc[r][c] = _mm512_fnmadd_ps(_mm512_set1_ps(dy * dmx[r]), _mm512_zextps256_ps512(mins), acc[r][c]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) out[c * os + r] = _mm512_reduce_add_ps(acc[r][c]);
  }
};

}  // namespace

void gemm_tile_q4_k_avx512(int64_t n, float* out, int64_t out_stride, const void* w, size_t w_row_bytes, int rows,
                           const void* act, size_t act_row_bytes, int cols) {
  gemm_tile_any<Q4_KTile, kTileRowsQ4kAvx512, kTileColsQ4kAvx512>(n, out, out_stride, w, w_row_bytes, rows, act, act_row_bytes, cols);
}

// Decode GEMV: the tile kernel at one token, kGemvRowsK rows per pass (each row's arithmetic is
// the tile's, whatever the tile's shape, so decode and prefill give a token the same bits).
void gemv_q4_k_avx512(int64_t n, float* out, const void* w, size_t w_row_bytes, int rows, const void* act) {
  gemm_tile_any<Q4_KTile, kGemvRowsK, 1>(n, out, 1, w, w_row_bytes, rows, act, 0, 1);
}

}  // namespace quant
}  // namespace fulcrum
