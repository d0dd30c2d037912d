// Q4_0 and Q8_0 (× Q8_0) decode GEMV for AVX2: kGemvRowsAvx2 weight rows per pass over one
// activation row, sharing each block's activation load (and, for Q4_0, maddubs(8, y) and the
// activation scale) across the rows, with the rows prefetched into L2 (Q4_0 one pass ahead, see
// gemv_q4_0_avx512.cc; Q8_0 kGemvQ8PrefetchAhead bytes ahead, see gemm_tiles.h). Each row keeps its vec_dot's integer block sums, its two
// accumulators (even / odd blocks), scale products and final reduction: outputs match
// vec_dot_q4_0_avx2 / vec_dot_q8_0_avx2 bit for bit.
#define QUANT_ISA QUANT_AVX2_LEVEL
#include "quant/formats/blocks.h"
#include "quant/tiles/gemm_tile_dispatch.h"
#include "quant/tiles/gemm_tiles.h"
#include "quant/dot/simd_avx2.h"

namespace fulcrum {
namespace quant {
namespace {
using namespace simd;

inline __m256i load32(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Σ(q − 8)·y for one Q4_0 block: q unsigned 0..15 (maddubs pairs ≤ 2·15·127, no saturation).
inline __m256i q4_0_dot(const block_q4_0& x, __m256i y, __m256i y8) {
  return _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(nibbles_32(x.qs), y), y8), _mm256_set1_epi16(1));
}

template <int R>
void gemv_q4_0_rows(int64_t n, float* out, const uint8_t* w, size_t wrb, const block_q8_0* y) {
  const int64_t nb = n / QK4_0;
  const __m256i eight = _mm256_set1_epi8(8);
  __m256 acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 1 < nb; i += 2) {
    const __m256i y0 = load32(y[i].qs), y1 = load32(y[i + 1].qs);
    const __m256i y80 = _mm256_maddubs_epi16(eight, y0), y81 = _mm256_maddubs_epi16(eight, y1);
    const float dy0 = f16(y[i].d), dy1 = f16(y[i + 1].d);
    for (int r = 0; r < R; ++r) {
      const block_q4_0* x = reinterpret_cast<const block_q4_0*>(w + r * wrb) + i;
      _mm_prefetch(reinterpret_cast<const char*>(x) + R * wrb, _MM_HINT_T1);
      acc0[r] = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[0].d) * dy0), _mm256_cvtepi32_ps(q4_0_dot(x[0], y0, y80)), acc0[r]);
      acc1[r] = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[1].d) * dy1), _mm256_cvtepi32_ps(q4_0_dot(x[1], y1, y81)), acc1[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    const block_q4_0* x = reinterpret_cast<const block_q4_0*>(w + r * wrb);
    if (i < nb) {
      const __m256i yi = load32(y[i].qs);
      acc0[r] = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * f16(y[i].d)),
                                _mm256_cvtepi32_ps(q4_0_dot(x[i], yi, _mm256_maddubs_epi16(eight, yi))), acc0[r]);
    }
    out[r] = hsum(_mm256_add_ps(acc0[r], acc1[r]));
  }
}

template <int R>
void gemv_q8_0_rows(int64_t n, float* out, const uint8_t* w, size_t wrb, const block_q8_0* y) {
  const int64_t nb = n / QK8_0;
  __m256 acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 1 < nb; i += 2) {
    const __m256i y0 = load32(y[i].qs), y1 = load32(y[i + 1].qs);
    const float dy0 = f16(y[i].d), dy1 = f16(y[i + 1].d);
    for (int r = 0; r < R; ++r) {
      const block_q8_0* x = reinterpret_cast<const block_q8_0*>(w + r * wrb) + i;
      _mm_prefetch(reinterpret_cast<const char*>(x) + kGemvQ8PrefetchAhead, _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(x) + kGemvQ8PrefetchAhead + 64, _MM_HINT_T1);
      acc0[r] = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[0].d) * dy0), _mm256_cvtepi32_ps(dot_ss8(load32(x[0].qs), y0)), acc0[r]);
      acc1[r] = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[1].d) * dy1), _mm256_cvtepi32_ps(dot_ss8(load32(x[1].qs), y1)), acc1[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    const block_q8_0* x = reinterpret_cast<const block_q8_0*>(w + r * wrb);
    if (i < nb) {
      acc0[r] = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * f16(y[i].d)), _mm256_cvtepi32_ps(dot_ss8(load32(x[i].qs), load32(y[i].qs))), acc0[r]);
    }
    out[r] = hsum(_mm256_add_ps(acc0[r], acc1[r]));
  }
}

struct Q4_0Gemv {
  template <int R>
  static void run(int64_t n, float* out, const uint8_t* w, size_t wrb, const void* act) {
    gemv_q4_0_rows<R>(n, out, w, wrb, static_cast<const block_q8_0*>(act));
  }
};

struct Q8_0Gemv {
  template <int R>
  static void run(int64_t n, float* out, const uint8_t* w, size_t wrb, const void* act) {
    gemv_q8_0_rows<R>(n, out, w, wrb, static_cast<const block_q8_0*>(act));
  }
};

}  // namespace

void QUANT_FN(gemv_q4_0)(int64_t n, float* out, const void* w, size_t w_row_bytes, int rows, const void* act) {
  gemv_any<Q4_0Gemv, kGemvRowsAvx2>(n, out, w, w_row_bytes, rows, act);
}

void QUANT_FN(gemv_q8_0)(int64_t n, float* out, const void* w, size_t w_row_bytes, int rows, const void* act) {
  gemv_any<Q8_0Gemv, kGemvRowsAvx2>(n, out, w, w_row_bytes, rows, act);
}

}  // namespace quant
}  // namespace fulcrum
