// Q6_K x Q8_K vec_dot for AVX-512 (BW + VNNI): per 128-element half, two zmm of 6-bit values
// (quarters 1|2 and 3|4, each matching 64 contiguous activations), maddubs to int16, vpdpwssd
// against the int8 scales spread by vpermw; the -32 offset via bsums once per super-block.
#include "quant/formats/blocks.h"
#include "quant/dot/k_idx_avx512.h"
#include "quant/formats/quant_impl.h"
#define QUANT_ISA avx512
#include "quant/dot/simd_avx2.h"

namespace fulcrum {
namespace quant {
using namespace simd;

void vec_dot_q6_k_avx512(int64_t n, float* out, const void* w, const void* a) {
  const block_q6_K* x = static_cast<const block_q6_K*>(w);
  const block_q8_K* y = static_cast<const block_q8_K*>(a);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i m2 = _mm512_set1_epi8(0x03);
  // per-int16-lane right shifts of qh: quarters 1|2 use bits 0-1|2-3, quarters 3|4 bits 4-5|6-7
  const __m512i sh12 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  const __m512i sh34 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
  __m512i idx[4];
  for (int k = 0; k < 4; ++k) idx[k] = _mm512_load_si512(kQ6kScaleIdx[k]);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / QK_K; ++i) {
    prefetch_ahead<256>(x + i);
    const __m256i sc16_256 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales)));
    const __m512i sc16 = _mm512_castsi256_si512(sc16_256);
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].bsums));
    // start from -32 * Σ sc*bsum (8 partial sums in the low half; the reduction adds all lanes)
    __m512i sumi = _mm512_castsi256_si512(
        _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16_256), 5)));
    sumi = _mm512_inserti64x4(sumi, _mm256_setzero_si256(), 1);
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(x[i].ql + 64 * h);
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qh + 32 * h));
      const __m512i qh2 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), qh, 1);
      const __m512i q12 = _mm512_or_si512(
          _mm512_and_si512(ql, m4), _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh2, sh12), m2), 4));
      const __m512i q34 = _mm512_or_si512(
          _mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
          _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh2, sh34), m2), 4));
      const int8_t* yq = y[i].qs + 128 * h;
      sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(q12, _mm512_loadu_si512(yq)),
                                 _mm512_permutexvar_epi16(idx[2 * h], sc16));
      sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(q34, _mm512_loadu_si512(yq + 64)),
                                 _mm512_permutexvar_epi16(idx[2 * h + 1], sc16));
    }
    acc = _mm512_fmadd_ps(_mm512_set1_ps(y[i].d * f16(x[i].d)), _mm512_cvtepi32_ps(sumi), acc);
  }
  *out = _mm512_reduce_add_ps(acc);
}

}  // namespace quant
}  // namespace fulcrum
