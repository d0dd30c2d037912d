// Q4_0 x Q8_0 vec_dot for AVX-512 (BW + VNNI): two blocks per zmm. The nibbles stay unsigned:
// Σ(q-8)*y = dpbusd(q, y) - dpbusd(8, y), which avoids the sign/abs dance of 256-bit code.
#include "quant/formats/blocks.h"
#include "quant/formats/quant_impl.h"
#define QUANT_ISA avx512
#include "quant/dot/simd_avx512.h"

namespace fulcrum {
namespace quant {
using namespace simd;

void vec_dot_q4_0_avx512(int64_t n, float* out, const void* w, const void* a) {
  const block_q4_0* x = static_cast<const block_q4_0*>(w);
  const block_q8_0* y = static_cast<const block_q8_0*>(a);
  const int64_t nb = n / QK4_0;
  const __m512i eight = _mm512_set1_epi8(8);
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 1 < nb; i += 2) {
    prefetch_ahead<64>(x + i);
    const __m512i q = nibbles_2x32(x[i].qs, x[i + 1].qs);
    const __m512i qy = load_2x32(y[i].qs, y[i + 1].qs);
    const __m512i s = _mm512_sub_epi32(dot_us8_512(q, qy), dot_us8_512(eight, qy));
    acc = _mm512_fmadd_ps(scales_2(f16(x[i].d) * f16(y[i].d), f16(x[i + 1].d) * f16(y[i + 1].d)),
                          _mm512_cvtepi32_ps(s), acc);
  }
  float sum = _mm512_reduce_add_ps(acc);
  if (i < nb) {  // odd block count: the last block at 256 bits
    const __m256i qx = _mm256_sub_epi8(nibbles_32(x[i].qs), _mm256_set1_epi8(8));
    const __m256i p = dot_ss8(qx, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs)));
    sum += f16(x[i].d) * f16(y[i].d) * static_cast<float>(hsum_i32(p));
  }
  *out = sum;
}

}  // namespace quant
}  // namespace fulcrum
