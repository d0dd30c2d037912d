// Q5_0, scalar: 5-bit symmetric, x = d * (q - 16); bit 4 of element j is bit j of qh (LE u32).
// Dotted with Q8_0 activations.
#include "quant/formats/blocks.h"
#include "quant/formats/fp16.h"
#include "quant/formats/quant_impl.h"

namespace fulcrum {
namespace quant {

void dequantize_row_q5_0_scalar(const void* src, float* dst, int64_t n) {
  const block_q5_0* x = static_cast<const block_q5_0*>(src);
  for (int64_t i = 0; i < n / QK5_0; ++i) {
    const float d = f16_to_f32(x[i].d);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    float* y = dst + i * QK5_0;
    for (int j = 0; j < QK5_0 / 2; ++j) {
      const int h0 = ((qh >> j) & 1u) << 4;
      const int h1 = ((qh >> (j + 16)) & 1u) << 4;
      y[j] = static_cast<float>(((x[i].qs[j] & 0x0F) | h0) - 16) * d;
      y[j + QK5_0 / 2] = static_cast<float>(((x[i].qs[j] >> 4) | h1) - 16) * d;
    }
  }
}

// ggml's reference rule: the element of largest magnitude maps to -16 (d = max / -16).
void quantize_row_q5_0_scalar(const float* src, void* dst, int64_t n) {
  block_q5_0* y = static_cast<block_q5_0*>(dst);
  for (int64_t i = 0; i < n / QK5_0; ++i) {
    const float* x = src + i * QK5_0;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK5_0; ++j) {
      if (std::fabs(x[j]) > amax) { amax = std::fabs(x[j]); max = x[j]; }
    }
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    uint32_t qh = 0;
    for (int j = 0; j < QK5_0 / 2; ++j) {
      int q0 = static_cast<int>(x[j] * id + 16.5f);
      int q1 = static_cast<int>(x[j + QK5_0 / 2] * id + 16.5f);
      q0 = q0 < 0 ? 0 : (q0 > 31 ? 31 : q0);
      q1 = q1 < 0 ? 0 : (q1 > 31 ? 31 : q1);
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= static_cast<uint32_t>(q0 >> 4) << j;
      qh |= static_cast<uint32_t>(q1 >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

void vec_dot_q5_0_scalar(int64_t n, float* out, const void* w, const void* a) {
  const block_q5_0* x = static_cast<const block_q5_0*>(w);
  const block_q8_0* y = static_cast<const block_q8_0*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK5_0; ++i) {
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    int32_t s = 0;
    for (int j = 0; j < QK5_0 / 2; ++j) {
      const int h0 = ((qh >> j) & 1u) << 4;
      const int h1 = ((qh >> (j + 16)) & 1u) << 4;
      s += (((x[i].qs[j] & 0x0F) | h0) - 16) * y[i].qs[j];
      s += (((x[i].qs[j] >> 4) | h1) - 16) * y[i].qs[j + QK5_0 / 2];
    }
    sum += f16_to_f32(x[i].d) * f16_to_f32(y[i].d) * static_cast<float>(s);
  }
  *out = sum;
}

}  // namespace quant
}  // namespace fulcrum
