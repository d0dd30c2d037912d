// Q4_1 x Q8_1 vec_dot for AVX-512 (BW + VNNI): two blocks per zmm, unsigned nibbles straight
// into vpdpbusd; the offset term m*s per block (s from Q8_1).
#include "quant/formats/blocks.h"
#include "quant/formats/quant_impl.h"
#define QUANT_ISA avx512
#include "quant/dot/simd_avx512.h"

namespace fulcrum {
namespace quant {
using namespace simd;

void vec_dot_q4_1_avx512(int64_t n, float* out, const void* w, const void* a) {
  const block_q4_1* x = static_cast<const block_q4_1*>(w);
  const block_q8_1* y = static_cast<const block_q8_1*>(a);
  const int64_t nb = n / QK4_1;
  __m512 acc = _mm512_setzero_ps();
  float summs = 0.0f;
  int64_t i = 0;
  for (; i + 1 < nb; i += 2) {
    prefetch_ahead<64>(x + i);
    const __m512i q = nibbles_2x32(x[i].qs, x[i + 1].qs);
    const __m512i s = dot_us8_512(q, load_2x32(y[i].qs, y[i + 1].qs));
    acc = _mm512_fmadd_ps(scales_2(f16(x[i].d) * f16(y[i].d), f16(x[i + 1].d) * f16(y[i + 1].d)),
                          _mm512_cvtepi32_ps(s), acc);
    summs += f16(x[i].m) * f16(y[i].s) + f16(x[i + 1].m) * f16(y[i + 1].s);
  }
  float sum = _mm512_reduce_add_ps(acc);
  if (i < nb) {
    const __m256i p = dot_us8(nibbles_32(x[i].qs), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs)));
    sum += f16(x[i].d) * f16(y[i].d) * static_cast<float>(hsum_i32(p));
    summs += f16(x[i].m) * f16(y[i].s);
  }
  *out = sum + summs;
}

}  // namespace quant
}  // namespace fulcrum
