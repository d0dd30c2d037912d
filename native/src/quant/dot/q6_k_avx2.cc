// Q6_K x Q8_K vec_dot for AVX2: the 6-bit values are used unsigned (0..63) with maddubs, then
// madd with the two int8 sub-block scales of each 32 elements; the -32 offset is subtracted
// once per super-block as 32 * Σ scales[g] * bsums[g].
#include "quant/formats/blocks.h"
#include "quant/formats/quant_impl.h"
#define QUANT_ISA QUANT_AVX2_LEVEL
#include "quant/dot/simd_avx2.h"

namespace fulcrum {
namespace quant {
using namespace simd;


void QUANT_FN(vec_dot_q6_k)(int64_t n, float* out, const void* w, const void* a) {
  const block_q6_K* x = static_cast<const block_q6_K*>(w);
  const block_q8_K* y = static_cast<const block_q8_K*>(a);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m2 = _mm256_set1_epi8(0x03);
  const __m256i pair[4] = {_mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1), _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3),
                           _mm256_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5), _mm256_setr_epi32(6, 6, 6, 6, 7, 7, 7, 7)};
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / QK_K; ++i) {
    prefetch_ahead<256>(x + i);
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales));
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
    // Each scale doubled into an int32 (dup[h] holds scales 8h..8h+7), so one permute spreads a
    // pair (g, g+1) over the two 128-bit halves that maddubs fills from sub-blocks g and g+1.
    const __m256i dup[2] = {_mm256_cvtepi8_epi16(_mm_unpacklo_epi8(sc8, sc8)),
                            _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(sc8, sc8))};
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].bsums));
    __m256i sumi = _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16), 5);  // 32 * Σ sc*bsum
    sumi = _mm256_sub_epi32(_mm256_setzero_si256(), sumi);
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].ql + 64 * h));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].ql + 64 * h + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qh + 32 * h));
      const __m256i q1 = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
      const __m256i q2 = _mm256_or_si256(_mm256_and_si256(ql1, m4),
                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
      const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
      const __m256i q4 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
      const int8_t* yq = y[i].qs + 128 * h;
      const __m256i p1 = _mm256_maddubs_epi16(q1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yq + 0)));
      const __m256i p2 = _mm256_maddubs_epi16(q2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yq + 32)));
      const __m256i p3 = _mm256_maddubs_epi16(q3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yq + 64)));
      const __m256i p4 = _mm256_maddubs_epi16(q4, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yq + 96)));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p1, _mm256_permutevar8x32_epi32(dup[h], pair[0])));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p2, _mm256_permutevar8x32_epi32(dup[h], pair[1])));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p3, _mm256_permutevar8x32_epi32(dup[h], pair[2])));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p4, _mm256_permutevar8x32_epi32(dup[h], pair[3])));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * f16(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
  }
  *out = hsum(acc);
}

}  // namespace quant
}  // namespace fulcrum
