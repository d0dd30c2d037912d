// Q4_0 × Q8_0 decode GEMV for AVX-512 VNNI: kGemvRowsAvx512 weight rows per pass over one
// activation row, four blocks per step. A block's 16 packed bytes hold its elements 0..15 in
// the low nibbles and 16..31 in the high ones, so one zmm of four blocks' packed bytes gives
// all four blocks' low halves with one AND and their high halves with a shift and an AND; the
// activations are rearranged to match ([first 16 of each block] and [last 16 of each block])
// once per step and shared by the rows, as are −8·Σy and the activation scales. Per row and
// four blocks that leaves four loads, three shuffles, two vpdpbusd, one f16 conversion of the
// four weight scales and the scale-and-accumulate: about half the instructions per weight byte
// of one vec_dot per row, which is what lets one core keep up with DRAM on this 4.5-bit format.
// Integer block sums and scale products equal vec_dot_q4_0_avx512's; the float sums are grouped
// by block rather than by block pair, so results differ from it by float rounding only.
// Rows are prefetched into L2 one pass ahead: a pass covers R whole rows, so the next pass's
// rows are the bytes that follow (measured better than into L1 or further ahead).
#include <cstring>

#include "quant/formats/blocks.h"
#include "quant/tiles/gemm_tile_dispatch.h"
#include "quant/tiles/gemm_tiles.h"
#define QUANT_ISA avx512
#include "quant/dot/simd_avx512.h"

namespace fulcrum {
namespace quant {
namespace {
using namespace simd;

// The f16 scales of four consecutive blocks (`stride` bytes apart, d first) as floats.
template <size_t kStride>
inline __m128 scales_4(const uint8_t* b) {
  uint16_t d[4];
  for (int k = 0; k < 4; ++k) std::memcpy(&d[k], b + k * kStride, 2);
  uint64_t h;
  std::memcpy(&h, d, 8);
  return _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(h)));
}

// Bytes [off, off + 16) of four consecutive blocks' quants, in one zmm.
template <size_t kStride>
inline __m512i gather_16x4(const uint8_t* q) {
  __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
  v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + kStride)), 1);
  v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 2 * kStride)), 2);
  return _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 3 * kStride)), 3);
}

template <int R>
void gemv_rows(int64_t n, float* out, const uint8_t* w, size_t wrb, const block_q8_0* y) {
  const int64_t nb = n / QK4_0;
  const __m512i m4 = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
  const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);  // scale k -> block k's 4 lanes
  const uint8_t* ya = reinterpret_cast<const uint8_t*>(y);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 3 < nb; i += 4) {
    const uint8_t* yb = ya + i * sizeof(block_q8_0);
    const __m512i ylo = gather_16x4<sizeof(block_q8_0)>(yb + 2), yhi = gather_16x4<sizeof(block_q8_0)>(yb + 18);
    const __m512i neg8 = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(dot_us8_512(eight, ylo), eight, yhi));
    const __m128 dy = scales_4<sizeof(block_q8_0)>(yb);
    for (int r = 0; r < R; ++r) {
      const uint8_t* xb = w + r * wrb + i * sizeof(block_q4_0);
      _mm_prefetch(reinterpret_cast<const char*>(xb) + R * wrb, _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(xb) + R * wrb + 64, _MM_HINT_T1);
      const __m512i q = gather_16x4<sizeof(block_q4_0)>(xb + 2);
      __m512i s = _mm512_dpbusd_epi32(neg8, _mm512_and_si512(q, m4), ylo);
      s = _mm512_dpbusd_epi32(s, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4), yhi);
      const __m512 sc = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_mul_ps(scales_4<sizeof(block_q4_0)>(xb), dy)));
      acc[r] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(s), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    const block_q4_0* x = reinterpret_cast<const block_q4_0*>(w + r * wrb);
    float sum = _mm512_reduce_add_ps(acc[r]);
    for (int64_t j = i; j < nb; ++j) {  // the last 1..3 blocks at 256 bits
      const __m256i qx = _mm256_sub_epi8(nibbles_32(x[j].qs), _mm256_set1_epi8(8));
      const __m256i p = dot_ss8(qx, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[j].qs)));
      sum += f16(x[j].d) * f16(y[j].d) * static_cast<float>(hsum_i32(p));
    }
    out[r] = sum;
  }
}

struct Q4_0Gemv {
  template <int R>
  static void run(int64_t n, float* out, const uint8_t* w, size_t wrb, const void* act) {
    gemv_rows<R>(n, out, w, wrb, static_cast<const block_q8_0*>(act));
  }
};

}  // namespace

void gemv_q4_0_avx512(int64_t n, float* out, const void* w, size_t w_row_bytes, int rows, const void* act) {
  gemv_any<Q4_0Gemv, kGemvRowsAvx512>(n, out, w, w_row_bytes, rows, act);
}

}  // namespace quant
}  // namespace fulcrum
