// Q4_K, scalar: super-blocks of 256 = 8 sub-blocks of 32, x = d*sc[j]*q - dmin*m[j], q 4-bit,
// sc/m 6-bit (k_scales.h). Dotted with Q8_K activations.
#include "quant/formats/blocks.h"
#include "quant/formats/fp16.h"
#include "quant/formats/k_quantize.h"
#include "quant/formats/k_scales.h"
#include "quant/formats/quant_impl.h"

namespace fulcrum {
namespace quant {

void dequantize_row_q4_k_scalar(const void* src, float* dst, int64_t n) {
  const block_q4_K* x = static_cast<const block_q4_K*>(src);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = f16_to_f32(x[i].d), dmin = f16_to_f32(x[i].dmin);
    const uint8_t* q = x[i].qs;
    float* y = dst + i * QK_K;
    for (int c = 0; c < 4; ++c) {  // 64 elements: sub-block 2c (low nibbles), 2c+1 (high)
      uint8_t sc, m;
      get_scale_min_k4(2 * c, x[i].scales, &sc, &m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      get_scale_min_k4(2 * c + 1, x[i].scales, &sc, &m);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) y[l] = d1 * static_cast<float>(q[l] & 0x0F) - m1;
      for (int l = 0; l < 32; ++l) y[32 + l] = d2 * static_cast<float>(q[l] >> 4) - m2;
      q += 32;
      y += 64;
    }
  }
}

void quantize_row_q4_k_scalar(const float* src, void* dst, int64_t n) {
  block_q4_K* y = static_cast<block_q4_K*>(dst);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float* x = src + i * QK_K;
    float scales[8], mins[8], max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; ++j) {
      fit_scale_min(x + 32 * j, 32, 15, &scales[j], &mins[j]);
      max_scale = std::fmax(max_scale, scales[j]);
      max_min = std::fmax(max_min, mins[j]);
    }
    const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; ++j) {
      const int a = round_even(inv_scale * scales[j]), b = round_even(inv_min * mins[j]);
      ls[j] = static_cast<uint8_t>(a > 63 ? 63 : a);
      lm[j] = static_cast<uint8_t>(b > 63 ? 63 : b);
    }
    pack_scales_mins_k4(ls, lm, y[i].scales);
    y[i].d = f32_to_f16(max_scale / 63.0f);
    y[i].dmin = f32_to_f16(max_min / 63.0f);
    const float d = f16_to_f32(y[i].d), dmin = f16_to_f32(y[i].dmin);
    uint8_t q[QK_K];
    for (int j = 0; j < 8; ++j) {
      const float dd = d * static_cast<float>(ls[j]), dm = dmin * static_cast<float>(lm[j]);
      const float idd = dd > 0.0f ? 1.0f / dd : 0.0f;
      for (int l = 0; l < 32; ++l) {
        int v = round_even((x[32 * j + l] + dm) * idd);
        q[32 * j + l] = static_cast<uint8_t>(v < 0 ? 0 : (v > 15 ? 15 : v));
      }
    }
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l)
        y[i].qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
  }
}

void vec_dot_q4_k_scalar(int64_t n, float* out, const void* w, const void* a) {
  const block_q4_K* x = static_cast<const block_q4_K*>(w);
  const block_q8_K* y = static_cast<const block_q8_K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    uint8_t sc[8], m[8];
    unpack_scales_mins_k4(x[i].scales, sc, m);
    int32_t sumi = 0, summ = 0;
    for (int c = 0; c < 4; ++c) {
      const uint8_t* q = x[i].qs + 32 * c;
      const int8_t* qy = y[i].qs + 64 * c;
      int32_t s0 = 0, s1 = 0;
      for (int l = 0; l < 32; ++l) {
        s0 += (q[l] & 0x0F) * qy[l];
        s1 += (q[l] >> 4) * qy[32 + l];
      }
      sumi += sc[2 * c] * s0 + sc[2 * c + 1] * s1;
    }
    for (int j = 0; j < 8; ++j) summ += m[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
    sum += y[i].d * f16_to_f32(x[i].d) * static_cast<float>(sumi) -
           y[i].d * f16_to_f32(x[i].dmin) * static_cast<float>(summ);
  }
  *out = sum;
}

}  // namespace quant
}  // namespace fulcrum
