// SwiGLU row for AVX-512: out = silu(gate) · up, 16 lanes at a time. silu(g) = g / (1 + e^−g)
// is evaluated through e = exp(−|g|) ≤ 1 so the exponential never overflows: g / (1 + e) for
// g ≥ 0 and g·e / (1 + e) for g < 0. exp uses a Cody–Waite reduction and a degree-6 polynomial
// (relative error ~2e-7, below float's rounding of the division that follows).
#include <cmath>

#include "kernels/ops_isa.h"
#include <immintrin.h>

// GCC 12 flags the _mm512_undefined_ps() pass-through operand inside _mm512_roundscale_ps /
// _mm512_scalef_ps as maybe-uninitialized; the operand is never read (all-ones mask).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace fulcrum {
namespace {

inline __m512 exp_nonpos(__m512 x) {
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512 e = _mm512_scalef_ps(p, n);
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_GE_OQ), e);
}

}  // namespace

void swiglu_row_avx512(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 e = exp_nonpos(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(g)));  // exp(−|g|)
    const __mmask16 neg = _mm512_cmp_ps_mask(g, _mm512_setzero_ps(), _CMP_LT_OQ);
    const __m512 num = _mm512_mask_mul_ps(g, neg, g, e);
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_div_ps(num, _mm512_add_ps(one, e)), _mm512_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace fulcrum
