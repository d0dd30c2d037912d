// Q5_1 x Q8_1 vec_dot for AVX2 (q5_1_avx512.cc has its own two-blocks-per-zmm version): as
// Q4_1 with the fifth bit from qh.
#include "quant/formats/blocks.h"
#include "quant/formats/quant_impl.h"
#include "quant/dot/simd_avx2.h"

namespace fulcrum {
namespace quant {
using namespace simd;

void QUANT_FN(vec_dot_q5_1)(int64_t n, float* out, const void* w, const void* a) {
  const block_q5_1* x = static_cast<const block_q5_1*>(w);
  const block_q8_1* y = static_cast<const block_q8_1*>(a);
  const int64_t nb = n / QK5_1;
  __m256 acc = _mm256_setzero_ps();
  float summs = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    prefetch_ahead<64>(x + i);
    const __m256i hi = _mm256_and_si256(bits_to_bytes_32(x[i].qh), _mm256_set1_epi8(0x10));
    const __m256i qx = _mm256_or_si256(nibbles_32(x[i].qs), hi);
    const __m256i p = dot_us8(qx, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs)));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * f16(y[i].d)), _mm256_cvtepi32_ps(p), acc);
    summs += f16(x[i].m) * f16(y[i].s);
  }
  *out = hsum(acc) + summs;
}

}  // namespace quant
}  // namespace fulcrum
