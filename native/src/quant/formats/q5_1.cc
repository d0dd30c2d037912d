// Q5_1, scalar: 5-bit with offset, x = d * q + m; high bits as Q5_0. Dotted with Q8_1.
#include "quant/formats/blocks.h"
#include "quant/formats/fp16.h"
#include "quant/formats/quant_impl.h"

namespace fulcrum {
namespace quant {

void dequantize_row_q5_1_scalar(const void* src, float* dst, int64_t n) {
  const block_q5_1* x = static_cast<const block_q5_1*>(src);
  for (int64_t i = 0; i < n / QK5_1; ++i) {
    const float d = f16_to_f32(x[i].d), m = f16_to_f32(x[i].m);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    float* y = dst + i * QK5_1;
    for (int j = 0; j < QK5_1 / 2; ++j) {
      const int h0 = ((qh >> j) & 1u) << 4;
      const int h1 = ((qh >> (j + 16)) & 1u) << 4;
      y[j] = static_cast<float>((x[i].qs[j] & 0x0F) | h0) * d + m;
      y[j + QK5_1 / 2] = static_cast<float>((x[i].qs[j] >> 4) | h1) * d + m;
    }
  }
}

void quantize_row_q5_1_scalar(const float* src, void* dst, int64_t n) {
  block_q5_1* y = static_cast<block_q5_1*>(dst);
  for (int64_t i = 0; i < n / QK5_1; ++i) {
    const float* x = src + i * QK5_1;
    float mn = x[0], mx = x[0];
    for (int j = 1; j < QK5_1; ++j) { mn = std::fmin(mn, x[j]); mx = std::fmax(mx, x[j]); }
    const float d = (mx - mn) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    y[i].m = f32_to_f16(mn);
    uint32_t qh = 0;
    for (int j = 0; j < QK5_1 / 2; ++j) {
      int q0 = static_cast<int>((x[j] - mn) * id + 0.5f);
      int q1 = static_cast<int>((x[j + QK5_1 / 2] - mn) * id + 0.5f);
      q0 = q0 < 0 ? 0 : (q0 > 31 ? 31 : q0);
      q1 = q1 < 0 ? 0 : (q1 > 31 ? 31 : q1);
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= static_cast<uint32_t>(q0 >> 4) << j;
      qh |= static_cast<uint32_t>(q1 >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

void vec_dot_q5_1_scalar(int64_t n, float* out, const void* w, const void* a) {
  const block_q5_1* x = static_cast<const block_q5_1*>(w);
  const block_q8_1* y = static_cast<const block_q8_1*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK5_1; ++i) {
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    int32_t s = 0;
    for (int j = 0; j < QK5_1 / 2; ++j) {
      const int h0 = ((qh >> j) & 1u) << 4;
      const int h1 = ((qh >> (j + 16)) & 1u) << 4;
      s += ((x[i].qs[j] & 0x0F) | h0) * y[i].qs[j];
      s += ((x[i].qs[j] >> 4) | h1) * y[i].qs[j + QK5_1 / 2];
    }
    sum += f16_to_f32(x[i].d) * f16_to_f32(y[i].d) * static_cast<float>(s) +
           f16_to_f32(x[i].m) * f16_to_f32(y[i].s);
  }
  *out = sum;
}

}  // namespace quant
}  // namespace fulcrum
