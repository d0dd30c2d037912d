// Q4_1 x Q8_1 vec_dot for AVX2 (q4_1_avx512.cc has its own two-blocks-per-zmm version):
// nibbles are unsigned, so u8*s8 directly;
// the offset term is m * s per block (s = d_y * Σq_y carried by Q8_1).
#include "quant/formats/blocks.h"
#include "quant/formats/quant_impl.h"
#include "quant/dot/simd_avx2.h"

namespace fulcrum {
namespace quant {
using namespace simd;

void QUANT_FN(vec_dot_q4_1)(int64_t n, float* out, const void* w, const void* a) {
  const block_q4_1* x = static_cast<const block_q4_1*>(w);
  const block_q8_1* y = static_cast<const block_q8_1*>(a);
  const int64_t nb = n / QK4_1;
  __m256 acc = _mm256_setzero_ps();
  float summs = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    prefetch_ahead<64>(x + i);
    const __m256i p = dot_us8(nibbles_32(x[i].qs), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs)));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * f16(y[i].d)), _mm256_cvtepi32_ps(p), acc);
    summs += f16(x[i].m) * f16(y[i].s);
  }
  *out = hsum(acc) + summs;
}

}  // namespace quant
}  // namespace fulcrum
