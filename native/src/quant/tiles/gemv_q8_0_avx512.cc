// Q8_0 × Q8_0 decode GEMV for AVX-512 VNNI: kGemvRowsAvx512 weight rows per pass over one
// activation row, sharing the activation loads and scales; each row keeps
// vec_dot_q8_0_avx512's sign trick (|x| as u8 against y with x's sign, then vpdpbusd), lanes,
// scale products and reduction order: outputs match it bit for bit. Rows are prefetched
// kGemvQ8PrefetchAhead bytes ahead (gemm_tiles.h: the measured distances).
#include "quant/formats/blocks.h"
#include "quant/tiles/gemm_tile_dispatch.h"
#include "quant/tiles/gemm_tiles.h"
#define QUANT_ISA avx512
#include "quant/dot/simd_avx512.h"

namespace fulcrum {
namespace quant {
namespace {
using namespace simd;

template <int R>
void gemv_rows(int64_t n, float* out, const uint8_t* w, size_t wrb, const block_q8_0* y) {
  const int64_t nb = n / QK8_0;
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 1 < nb; i += 2) {
    const __m512i yv = load_2x32(y[i].qs, y[i + 1].qs);
    const float dy0 = f16(y[i].d), dy1 = f16(y[i + 1].d);
    for (int r = 0; r < R; ++r) {
      const block_q8_0* x = reinterpret_cast<const block_q8_0*>(w + r * wrb) + i;
      _mm_prefetch(reinterpret_cast<const char*>(x) + kGemvQ8PrefetchAhead, _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(x) + kGemvQ8PrefetchAhead + 64, _MM_HINT_T1);
      const __m512i xv = load_2x32(x[0].qs, x[1].qs);
      const __m512i sy = _mm512_mask_sub_epi8(yv, _mm512_movepi8_mask(xv), _mm512_setzero_si512(), yv);
      const __m512i s = dot_us8_512(_mm512_abs_epi8(xv), sy);
      acc[r] = _mm512_fmadd_ps(scales_2(f16(x[0].d) * dy0, f16(x[1].d) * dy1), _mm512_cvtepi32_ps(s), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    const block_q8_0* x = reinterpret_cast<const block_q8_0*>(w + r * wrb);
    float sum = _mm512_reduce_add_ps(acc[r]);
    if (i < nb) {  // odd block count: the last block at 256 bits, as vec_dot does
      const __m256i p = dot_ss8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs)),
                                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs)));
      sum += f16(x[i].d) * f16(y[i].d) * static_cast<float>(hsum_i32(p));
    }
    out[r] = sum;
  }
}

struct Q8_0Gemv {
  template <int R>
  static void run(int64_t n, float* out, const uint8_t* w, size_t wrb, const void* act) {
    gemv_rows<R>(n, out, w, wrb, static_cast<const block_q8_0*>(act));
  }
};

}  // namespace

void gemv_q8_0_avx512(int64_t n, float* out, const void* w, size_t w_row_bytes, int rows, const void* act) {
  gemv_any<Q8_0Gemv, kGemvRowsAvx512>(n, out, w, w_row_bytes, rows, act);
}

}  // namespace quant
}  // namespace fulcrum
