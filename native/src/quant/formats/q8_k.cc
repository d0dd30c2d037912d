// Q8_K, scalar: the activation format of the K-quants: f32 d, 256 int8, and the sums of each
// 16 consecutive q (bsums) so the K-quants' min/offset terms cost one multiply per sub-block.
#include "quant/formats/blocks.h"
#include "quant/formats/fp16.h"
#include "quant/formats/quant_impl.h"

namespace fulcrum {
namespace quant {

void dequantize_row_q8_k_scalar(const void* src, float* dst, int64_t n) {
  const block_q8_K* x = static_cast<const block_q8_K*>(src);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    for (int j = 0; j < QK_K; ++j) dst[i * QK_K + j] = x[i].d * static_cast<float>(x[i].qs[j]);
  }
}

// Symmetric: iscale = 127/amax, q = round-half-even(x*iscale), d = 1/iscale (as ggml stores it).
void quantize_row_q8_k_scalar(const float* src, void* dst, int64_t n) {
  block_q8_K* y = static_cast<block_q8_K*>(dst);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float* x = src + i * QK_K;
    float amax = 0.0f;
    for (int j = 0; j < QK_K; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    if (amax == 0.0f) {
      y[i].d = 0.0f;
      std::memset(y[i].qs, 0, sizeof(y[i].qs));
      std::memset(y[i].bsums, 0, sizeof(y[i].bsums));
      continue;
    }
    const float iscale = 127.0f / amax;
    for (int j = 0; j < QK_K; ++j) {
      int q = round_even(iscale * x[j]);
      q = q > 127 ? 127 : (q < -127 ? -127 : q);
      y[i].qs[j] = static_cast<int8_t>(q);
    }
    for (int g = 0; g < QK_K / 16; ++g) {
      int s = 0;
      for (int j = 0; j < 16; ++j) s += y[i].qs[g * 16 + j];
      y[i].bsums[g] = static_cast<int16_t>(s);
    }
    y[i].d = 1.0f / iscale;
  }
}

}  // namespace quant
}  // namespace fulcrum
