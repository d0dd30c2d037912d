// Q4_0 × Q8_0 decode GEMV for AVX-512 VNNI: kGemvRowsAvx512 weight rows per pass over one
// activation row. Per block pair the activation bytes, their −dpbusd(8, y) term and their f16
// scales are loaded once and shared by the rows, which leaves each row the nibble unpack, one
// vpdpbusd and the scale-and-accumulate: about 40 % fewer instructions per weight byte than one
// vec_dot per row, so one core keeps up with DRAM. Each row keeps vec_dot_q4_0_avx512's lanes,
// integer sums, scale products and reduction order: outputs match it bit for bit.
#include "quant/blocks.h"
#include "quant/gemm_tiles.h"
#define QUANT_ISA avx512
#include "quant/simd_avx512.h"

namespace fulcrum {
namespace quant {
namespace {
using namespace simd;

template <int R>
void gemv_rows(int64_t n, float* out, const uint8_t* w, size_t wrb, const block_q8_0* y) {
  const int64_t nb = n / QK4_0;
  const __m512i eight = _mm512_set1_epi8(8);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 1 < nb; i += 2) {
    const __m512i qy = load_2x32(y[i].qs, y[i + 1].qs);
    const __m512i neg8 = _mm512_sub_epi32(_mm512_setzero_si512(), dot_us8_512(eight, qy));
    const float dy0 = f16(y[i].d), dy1 = f16(y[i + 1].d);
    for (int r = 0; r < R; ++r) {
      const block_q4_0* x = reinterpret_cast<const block_q4_0*>(w + r * wrb) + i;
      // The same spot R rows further down: the next pass's rows. (Each pass covers R whole
      // rows, so a fixed distance ahead inside this row would only re-request lines another
      // row of this pass already streams, and each pass would start R − 1 rows cold.)
      _mm_prefetch(reinterpret_cast<const char*>(x) + R * wrb, _MM_HINT_T0);
      const __m512i s = _mm512_dpbusd_epi32(neg8, nibbles_2x32(x[0].qs, x[1].qs), qy);
      acc[r] = _mm512_fmadd_ps(scales_2(f16(x[0].d) * dy0, f16(x[1].d) * dy1), _mm512_cvtepi32_ps(s), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    const block_q4_0* x = reinterpret_cast<const block_q4_0*>(w + r * wrb);
    float sum = _mm512_reduce_add_ps(acc[r]);
    if (i < nb) {  // odd block count: the last block at 256 bits, as vec_dot does
      const __m256i qx = _mm256_sub_epi8(nibbles_32(x[i].qs), _mm256_set1_epi8(8));
      const __m256i p = dot_ss8(qx, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs)));
      sum += f16(x[i].d) * f16(y[i].d) * static_cast<float>(hsum_i32(p));
    }
    out[r] = sum;
  }
}

}  // namespace

void gemv_q4_0_avx512(int64_t n, float* out, const void* w, size_t w_row_bytes, int rows, const void* act) {
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  const block_q8_0* y = static_cast<const block_q8_0*>(act);
  switch (rows) {
    case 4: gemv_rows<4>(n, out, wb, w_row_bytes, y); break;
    case 3: gemv_rows<3>(n, out, wb, w_row_bytes, y); break;
    case 2: gemv_rows<2>(n, out, wb, w_row_bytes, y); break;
    case 1: gemv_rows<1>(n, out, wb, w_row_bytes, y); break;
    default: break;
  }
}

}  // namespace quant
}  // namespace fulcrum
