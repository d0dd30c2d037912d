// Q4_K x Q8_K vec_dot for AVX-512 (BW + VNNI): a whole 64-element chunk per zmm (low nibbles
// then high nibbles, matching the 64 contiguous activations), maddubs to int16, then vpdpwssd
// against the two sub-block scales spread by vpermw.
#include "quant/formats/blocks.h"
#include "quant/dot/k_idx_avx512.h"
#include "quant/formats/k_scales.h"
#include "quant/formats/quant_impl.h"
#define QUANT_ISA avx512
#include "quant/dot/simd_avx2.h"

namespace fulcrum {
namespace quant {
using namespace simd;

// Per-lane partial sums of the mins term Σ mn[j] * bsums (8 int32).
static inline __m256i q4_k_mins_dot(const uint8_t* mn, const int16_t* bsums) {
  const __m128i mins8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn));
  const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins8, mins8));
  return _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsums)), mins16);
}

void vec_dot_q4_k_avx512(int64_t n, float* out, const void* w, const void* a) {
  const block_q4_K* x = static_cast<const block_q4_K*>(w);
  const block_q8_K* y = static_cast<const block_q8_K*>(a);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512i idx[4];
  for (int c = 0; c < 4; ++c) idx[c] = _mm512_load_si512(kQ4kScaleIdx[c]);
  __m512 acc = _mm512_setzero_ps();
  __m256 acc_m = _mm256_setzero_ps();  // the mins term, kept as a vector (no hsum per block)
  for (int64_t i = 0; i < n / QK_K; ++i) {
    prefetch_ahead<192>(x + i);
    uint8_t sc[8], mn[8];
    unpack_scales_mins_k4(x[i].scales, sc, mn);
    const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc))));
    __m512i sumi = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs + 32 * c));
      const __m512i q512 = _mm512_and_si512(
          _mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1), m4);
      const __m512i yv = _mm512_loadu_si512(y[i].qs + 64 * c);
      sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(q512, yv), _mm512_permutexvar_epi16(idx[c], sc16));
    }
    acc = _mm512_fmadd_ps(_mm512_set1_ps(y[i].d * f16(x[i].d)), _mm512_cvtepi32_ps(sumi), acc);
    acc_m = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * f16(x[i].dmin)), _mm256_cvtepi32_ps(q4_k_mins_dot(mn, y[i].bsums)), acc_m);
  }
  *out = _mm512_reduce_add_ps(acc) - hsum(acc_m);
}

}  // namespace quant
}  // namespace fulcrum
