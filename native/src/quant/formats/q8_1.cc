// Q8_1, scalar: the activation format of Q4_1/Q5_1 dot products: Q8_0 plus s = d * sum(q)
// (as f16, like ggml), which folds the weights' offset m into one multiply per block.
#include "quant/formats/blocks.h"
#include "quant/formats/fp16.h"
#include "quant/formats/quant_impl.h"

namespace fulcrum {
namespace quant {

void dequantize_row_q8_1_scalar(const void* src, float* dst, int64_t n) {
  const block_q8_1* x = static_cast<const block_q8_1*>(src);
  for (int64_t i = 0; i < n / QK8_1; ++i) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < QK8_1; ++j) dst[i * QK8_1 + j] = d * static_cast<float>(x[i].qs[j]);
  }
}

void quantize_row_q8_1_scalar(const float* src, void* dst, int64_t n) {
  block_q8_1* y = static_cast<block_q8_1*>(dst);
  for (int64_t i = 0; i < n / QK8_1; ++i) {
    const float* x = src + i * QK8_1;
    float amax = 0.0f;
    for (int j = 0; j < QK8_1; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int32_t sum = 0;
    for (int j = 0; j < QK8_1; ++j) {
      int q = round_even(x[j] * id);
      q = q > 127 ? 127 : (q < -127 ? -127 : q);
      y[i].qs[j] = static_cast<int8_t>(q);
      sum += q;
    }
    y[i].d = f32_to_f16(d);
    y[i].s = f32_to_f16(d * static_cast<float>(sum));
  }
}

}  // namespace quant
}  // namespace fulcrum
