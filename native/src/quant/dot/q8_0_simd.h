// Q8_0 quantize (per token: the activations of Q4_0/Q5_0/Q8_0 matrices) and vec_dot, one body
// for the AVX2 and AVX-512 files (QUANT_ISA names the copy; dot_us8 is vpdpbusd under VNNI).
// Included only by q8_0_avx2.cc / q8_0_avx512.cc (which defines QUANT_Q8_0_NO_VEC_DOT).
#include "quant/formats/blocks.h"
#include "quant/formats/quant_impl.h"
#include "quant/dot/simd_avx2.h"

namespace fulcrum {
namespace quant {
using namespace simd;

// Bit-identical to quantize_row_q8_0_scalar: same amax, same d and 1/d, same rounding.
void QUANT_FN(quantize_row_q8_0)(const float* src, void* dst, int64_t n) {
  block_q8_0* y = static_cast<block_q8_0*>(dst);
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    const float* x = src + i * QK8_0;
    const float d = amax_32(x) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = to_f16(d);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs), quantize_32(x, _mm256_set1_ps(id)));
  }
}

#ifndef QUANT_Q8_0_NO_VEC_DOT  // the AVX-512 file has its own two-blocks-per-zmm vec_dot
void QUANT_FN(vec_dot_q8_0)(int64_t n, float* out, const void* w, const void* a) {
  const block_q8_0* x = static_cast<const block_q8_0*>(w);
  const block_q8_0* y = static_cast<const block_q8_0*>(a);
  const int64_t nb = n / QK8_0;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 1 < nb; i += 2) {
    prefetch_ahead<128>(x + i);
    const __m256i p0 = dot_ss8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs)),
                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs)));
    const __m256i p1 = dot_ss8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i + 1].qs)),
                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i + 1].qs)));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * f16(y[i].d)), _mm256_cvtepi32_ps(p0), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i + 1].d) * f16(y[i + 1].d)), _mm256_cvtepi32_ps(p1), acc1);
  }
  for (; i < nb; ++i) {
    const __m256i p = dot_ss8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs)),
                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs)));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * f16(y[i].d)), _mm256_cvtepi32_ps(p), acc0);
  }
  *out = hsum(_mm256_add_ps(acc0, acc1));
}
#endif

}  // namespace quant
}  // namespace fulcrum
