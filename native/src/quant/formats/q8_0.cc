// Q8_0, scalar: 32 int8 with one f16 scale per block. Also the activation format that Q4_0,
// Q5_0 and Q8_0 weights are dotted with, so quantize_row runs once per token per matrix input.
#include "quant/formats/blocks.h"
#include "quant/formats/fp16.h"
#include "quant/formats/quant_impl.h"

namespace fulcrum {
namespace quant {

void dequantize_row_q8_0_scalar(const void* src, float* dst, int64_t n) {
  const block_q8_0* x = static_cast<const block_q8_0*>(src);
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < QK8_0; ++j) dst[i * QK8_0 + j] = d * static_cast<float>(x[i].qs[j]);
  }
}

// d = amax/127, q = round-half-even(x / d) (the SIMD paths round the same way, so all ISAs
// produce identical bytes).
void quantize_row_q8_0_scalar(const float* src, void* dst, int64_t n) {
  block_q8_0* y = static_cast<block_q8_0*>(dst);
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    const float* x = src + i * QK8_0;
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    for (int j = 0; j < QK8_0; ++j) {
      int q = round_even(x[j] * id);
      q = q > 127 ? 127 : (q < -127 ? -127 : q);
      y[i].qs[j] = static_cast<int8_t>(q);
    }
  }
}

void vec_dot_q8_0_scalar(int64_t n, float* out, const void* w, const void* a) {
  const block_q8_0* x = static_cast<const block_q8_0*>(w);
  const block_q8_0* y = static_cast<const block_q8_0*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    int32_t s = 0;
    for (int j = 0; j < QK8_0; ++j) s += static_cast<int32_t>(x[i].qs[j]) * y[i].qs[j];
    sum += f16_to_f32(x[i].d) * f16_to_f32(y[i].d) * static_cast<float>(s);
  }
  *out = sum;
}

}  // namespace quant
}  // namespace fulcrum
