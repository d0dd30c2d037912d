// Q8_1 and Q8_K quantize (per token: activations of Q4_1/Q5_1 and of the K-quants), one body
// for AVX2 and AVX-512. Bit-identical to the scalar versions (same amax, scale, rounding).
#include "quant/formats/blocks.h"
#include "quant/formats/quant_impl.h"
#include "quant/dot/simd_avx2.h"

namespace fulcrum {
namespace quant {
using namespace simd;

static inline int32_t sum_i8_32(__m256i q) {
  const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q);  // pairs, |.| <= 254
  return hsum_i32(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)));
}

void QUANT_FN(quantize_row_q8_1)(const float* src, void* dst, int64_t n) {
  block_q8_1* y = static_cast<block_q8_1*>(dst);
  for (int64_t i = 0; i < n / QK8_1; ++i) {
    const float* x = src + i * QK8_1;
    const float d = amax_32(x) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m256i q = quantize_32(x, _mm256_set1_ps(id));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs), q);
    y[i].d = to_f16(d);
    y[i].s = to_f16(d * static_cast<float>(sum_i8_32(q)));
  }
}

void QUANT_FN(quantize_row_q8_k)(const float* src, void* dst, int64_t n) {
  block_q8_K* y = static_cast<block_q8_K*>(dst);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float* x = src + i * QK_K;
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < QK_K; j += 8) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + j)));
    const float amax = hmax(m);
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(block_q8_K));
      continue;
    }
    const float iscale = 127.0f / amax;
    const __m256 vs = _mm256_set1_ps(iscale);
    for (int j = 0; j < QK_K; j += 32) {
      const __m256i q = quantize_32(x + j, vs);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs + j), q);
      // two bsums (16 bytes each): pair sums, then 4-lane sums per 128-bit half
      const __m256i s32 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
      __m128i lo = _mm256_castsi256_si128(s32), hi = _mm256_extracti128_si256(s32, 1);
      lo = _mm_hadd_epi32(lo, hi);  // [l0+l1, l2+l3, h0+h1, h2+h3]
      lo = _mm_hadd_epi32(lo, lo);  // [L, H, L, H]
      y[i].bsums[j / 16] = static_cast<int16_t>(_mm_cvtsi128_si32(lo));
      y[i].bsums[j / 16 + 1] = static_cast<int16_t>(_mm_extract_epi32(lo, 1));
    }
    y[i].d = 1.0f / iscale;
  }
}

}  // namespace quant
}  // namespace fulcrum
