// Q5_0 x Q8_0 vec_dot for AVX2 (included by q5_0_avx2.cc; q5_0_avx512.cc has its own
// two-blocks-per-zmm version): fifth bit from qh, minus 16, then the signed dot as for Q4_0.
#include "quant/formats/blocks.h"
#include "quant/formats/quant_impl.h"
#include "quant/dot/simd_avx2.h"

namespace fulcrum {
namespace quant {
using namespace simd;

static inline __m256i q5_0_block_dot(const block_q5_0& x, const block_q8_0& y) {
  const __m256i hi = _mm256_and_si256(bits_to_bytes_32(x.qh), _mm256_set1_epi8(0x10));
  const __m256i qx = _mm256_sub_epi8(_mm256_or_si256(nibbles_32(x.qs), hi), _mm256_set1_epi8(16));
  return dot_ss8(qx, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs)));
}

void QUANT_FN(vec_dot_q5_0)(int64_t n, float* out, const void* w, const void* a) {
  const block_q5_0* x = static_cast<const block_q5_0*>(w);
  const block_q8_0* y = static_cast<const block_q8_0*>(a);
  const int64_t nb = n / QK5_0;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 1 < nb; i += 2) {
    prefetch_ahead<64>(x + i);
    const __m256i p0 = q5_0_block_dot(x[i], y[i]);
    const __m256i p1 = q5_0_block_dot(x[i + 1], y[i + 1]);
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * f16(y[i].d)), _mm256_cvtepi32_ps(p0), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i + 1].d) * f16(y[i + 1].d)), _mm256_cvtepi32_ps(p1), acc1);
  }
  for (; i < nb; ++i) {
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * f16(y[i].d)), _mm256_cvtepi32_ps(q5_0_block_dot(x[i], y[i])), acc0);
  }
  *out = hsum(_mm256_add_ps(acc0, acc1));
}

}  // namespace quant
}  // namespace fulcrum
