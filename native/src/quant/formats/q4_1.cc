// Q4_1, scalar: 4-bit with offset, x = d * q + m. Dotted with Q8_1 activations, whose s = d*sum(q)
// carries the offset term: sum(x*y) = dx*dy*sum(q*qy) + m*s.
#include "quant/formats/blocks.h"
#include "quant/formats/fp16.h"
#include "quant/formats/quant_impl.h"

namespace fulcrum {
namespace quant {

void dequantize_row_q4_1_scalar(const void* src, float* dst, int64_t n) {
  const block_q4_1* x = static_cast<const block_q4_1*>(src);
  for (int64_t i = 0; i < n / QK4_1; ++i) {
    const float d = f16_to_f32(x[i].d), m = f16_to_f32(x[i].m);
    float* y = dst + i * QK4_1;
    for (int j = 0; j < QK4_1 / 2; ++j) {
      y[j] = static_cast<float>(x[i].qs[j] & 0x0F) * d + m;
      y[j + QK4_1 / 2] = static_cast<float>(x[i].qs[j] >> 4) * d + m;
    }
  }
}

void quantize_row_q4_1_scalar(const float* src, void* dst, int64_t n) {
  block_q4_1* y = static_cast<block_q4_1*>(dst);
  for (int64_t i = 0; i < n / QK4_1; ++i) {
    const float* x = src + i * QK4_1;
    float mn = x[0], mx = x[0];
    for (int j = 1; j < QK4_1; ++j) { mn = std::fmin(mn, x[j]); mx = std::fmax(mx, x[j]); }
    const float d = (mx - mn) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    y[i].m = f32_to_f16(mn);
    for (int j = 0; j < QK4_1 / 2; ++j) {
      int q0 = static_cast<int>((x[j] - mn) * id + 0.5f);
      int q1 = static_cast<int>((x[j + QK4_1 / 2] - mn) * id + 0.5f);
      q0 = q0 < 0 ? 0 : (q0 > 15 ? 15 : q0);
      q1 = q1 < 0 ? 0 : (q1 > 15 ? 15 : q1);
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void vec_dot_q4_1_scalar(int64_t n, float* out, const void* w, const void* a) {
  const block_q4_1* x = static_cast<const block_q4_1*>(w);
  const block_q8_1* y = static_cast<const block_q8_1*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK4_1; ++i) {
    int32_t s = 0;
    for (int j = 0; j < QK4_1 / 2; ++j) {
      s += (x[i].qs[j] & 0x0F) * y[i].qs[j];
      s += (x[i].qs[j] >> 4) * y[i].qs[j + QK4_1 / 2];
    }
    sum += f16_to_f32(x[i].d) * f16_to_f32(y[i].d) * static_cast<float>(s) +
           f16_to_f32(x[i].m) * f16_to_f32(y[i].s);
  }
  *out = sum;
}

}  // namespace quant
}  // namespace fulcrum
