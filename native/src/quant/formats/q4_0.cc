// Q4_0, scalar: 4-bit symmetric, x = d * (q - 8). Dotted with Q8_0 activations.
#include "quant/formats/blocks.h"
#include "quant/formats/fp16.h"
#include "quant/formats/quant_impl.h"

namespace fulcrum {
namespace quant {

void dequantize_row_q4_0_scalar(const void* src, float* dst, int64_t n) {
  const block_q4_0* x = static_cast<const block_q4_0*>(src);
  for (int64_t i = 0; i < n / QK4_0; ++i) {
    const float d = f16_to_f32(x[i].d);
    float* y = dst + i * QK4_0;
    for (int j = 0; j < QK4_0 / 2; ++j) {
      y[j] = static_cast<float>((x[i].qs[j] & 0x0F) - 8) * d;
      y[j + QK4_0 / 2] = static_cast<float>((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

// ggml's reference rule: the element of largest magnitude maps to -8 (d = max / -8).
void quantize_row_q4_0_scalar(const float* src, void* dst, int64_t n) {
  block_q4_0* y = static_cast<block_q4_0*>(dst);
  for (int64_t i = 0; i < n / QK4_0; ++i) {
    const float* x = src + i * QK4_0;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK4_0; ++j) {
      if (std::fabs(x[j]) > amax) { amax = std::fabs(x[j]); max = x[j]; }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
      int q0 = static_cast<int>(x[j] * id + 8.5f);
      int q1 = static_cast<int>(x[j + QK4_0 / 2] * id + 8.5f);
      q0 = q0 < 0 ? 0 : (q0 > 15 ? 15 : q0);
      q1 = q1 < 0 ? 0 : (q1 > 15 ? 15 : q1);
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void vec_dot_q4_0_scalar(int64_t n, float* out, const void* w, const void* a) {
  const block_q4_0* x = static_cast<const block_q4_0*>(w);
  const block_q8_0* y = static_cast<const block_q8_0*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK4_0; ++i) {
    int32_t s = 0;
    for (int j = 0; j < QK4_0 / 2; ++j) {
      s += ((x[i].qs[j] & 0x0F) - 8) * y[i].qs[j];
      s += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + QK4_0 / 2];
    }
    sum += f16_to_f32(x[i].d) * f16_to_f32(y[i].d) * static_cast<float>(s);
  }
  *out = sum;
}

}  // namespace quant
}  // namespace fulcrum
