// Q8_0 kernels for AVX-512 (BW + VNNI). quantize_row (activations, per token) shares its body
// with AVX2 (q8_0_simd.h, renamed per ISA); vec_dot takes two blocks per zmm: |x| as u8 against
// y with x's sign (a masked negate, as AVX-512 has no vpsignb), then vpdpbusd. Activations come
// from quantize_row and lie in [-127, 127], so negating y never overflows.
#define QUANT_ISA avx512
#define QUANT_Q8_0_NO_VEC_DOT
#include "quant/dot/q8_0_simd.h"
#include "quant/dot/simd_avx512.h"

namespace fulcrum {
namespace quant {
using namespace simd;

void vec_dot_q8_0_avx512(int64_t n, float* out, const void* w, const void* a) {
  const block_q8_0* x = static_cast<const block_q8_0*>(w);
  const block_q8_0* y = static_cast<const block_q8_0*>(a);
  const int64_t nb = n / QK8_0;
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 1 < nb; i += 2) {
    prefetch_ahead<128>(x + i);
    const __m512i xv = load_2x32(x[i].qs, x[i + 1].qs);
    const __m512i yv = load_2x32(y[i].qs, y[i + 1].qs);
    const __m512i sy = _mm512_mask_sub_epi8(yv, _mm512_movepi8_mask(xv), _mm512_setzero_si512(), yv);
    const __m512i s = dot_us8_512(_mm512_abs_epi8(xv), sy);
    acc = _mm512_fmadd_ps(scales_2(f16(x[i].d) * f16(y[i].d), f16(x[i + 1].d) * f16(y[i + 1].d)),
                          _mm512_cvtepi32_ps(s), acc);
  }
  float sum = _mm512_reduce_add_ps(acc);
  if (i < nb) {
    const __m256i p = dot_ss8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs)),
                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs)));
    sum += f16(x[i].d) * f16(y[i].d) * static_cast<float>(hsum_i32(p));
  }
  *out = sum;
}

}  // namespace quant
}  // namespace fulcrum
