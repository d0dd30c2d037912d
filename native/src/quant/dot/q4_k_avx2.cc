// Q4_K x Q8_K vec_dot for AVX2: per 64-element chunk, unsigned nibbles x int8 via maddubs, then
// madd with the sub-block's 6-bit scale; the mins term uses Q8_K's bsums once per super-block.
#include "quant/formats/blocks.h"
#include "quant/formats/k_scales.h"
#include "quant/formats/quant_impl.h"
#define QUANT_ISA QUANT_AVX2_LEVEL
#include "quant/dot/simd_avx2.h"

namespace fulcrum {
namespace quant {
using namespace simd;

void QUANT_FN(vec_dot_q4_k)(int64_t n, float* out, const void* w, const void* a) {
  const block_q4_K* x = static_cast<const block_q4_K*>(w);
  const block_q8_K* y = static_cast<const block_q8_K*>(a);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc = _mm256_setzero_ps();
  __m256 acc_m = _mm256_setzero_ps();  // the mins term, kept as a vector (no hsum per block)
  for (int64_t i = 0; i < n / QK_K; ++i) {
    prefetch_ahead<192>(x + i);
    uint8_t sc[8], mn[8];
    unpack_scales_mins_k4(x[i].scales, sc, mn);
    // Σ_j mn[j] * (bsums[2j] + bsums[2j+1]) with one madd: mins widened and paired per bsum.
    const __m128i mins8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn));
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins8, mins8));
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].bsums));
    const __m256i summ = _mm256_madd_epi16(bsums, mins16);

    __m256i sumi = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs + 32 * c));
      const __m256i lo = _mm256_and_si256(q, m4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      const __m256i ylo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs + 64 * c));
      const __m256i yhi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs + 64 * c + 32));
      const __m256i plo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, ylo), _mm256_set1_epi16(sc[2 * c]));
      const __m256i phi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, yhi), _mm256_set1_epi16(sc[2 * c + 1]));
      sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(plo, phi));
    }
    const float d = y[i].d * f16(x[i].d);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    acc_m = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * f16(x[i].dmin)), _mm256_cvtepi32_ps(summ), acc_m);
  }
  *out = hsum(_mm256_sub_ps(acc, acc_m));
}

}  // namespace quant
}  // namespace fulcrum
