// Q5_K, scalar: as Q4_K with a fifth bit per element in qh: element l of 64-chunk c takes bit
// 2c of qh[l] (first 32) or bit 2c+1 (second 32). Dotted with Q8_K activations.
#include "quant/formats/blocks.h"
#include "quant/formats/fp16.h"
#include "quant/formats/k_quantize.h"
#include "quant/formats/k_scales.h"
#include "quant/formats/quant_impl.h"

namespace fulcrum {
namespace quant {

void dequantize_row_q5_k_scalar(const void* src, float* dst, int64_t n) {
  const block_q5_K* x = static_cast<const block_q5_K*>(src);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = f16_to_f32(x[i].d), dmin = f16_to_f32(x[i].dmin);
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    float* y = dst + i * QK_K;
    for (int c = 0; c < 4; ++c) {
      uint8_t sc, m;
      get_scale_min_k4(2 * c, x[i].scales, &sc, &m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      get_scale_min_k4(2 * c + 1, x[i].scales, &sc, &m);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      const uint8_t u1 = static_cast<uint8_t>(1u << (2 * c)), u2 = static_cast<uint8_t>(2u << (2 * c));
      for (int l = 0; l < 32; ++l)
        y[l] = d1 * static_cast<float>((ql[l] & 0x0F) + ((qh[l] & u1) ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l)
        y[32 + l] = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
      ql += 32;
      y += 64;
    }
  }
}

void quantize_row_q5_k_scalar(const float* src, void* dst, int64_t n) {
  block_q5_K* y = static_cast<block_q5_K*>(dst);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float* x = src + i * QK_K;
    float scales[8], mins[8], max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; ++j) {
      fit_scale_min(x + 32 * j, 32, 31, &scales[j], &mins[j]);
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
        q[32 * j + l] = static_cast<uint8_t>(v < 0 ? 0 : (v > 31 ? 31 : v));
      }
    }
    std::memset(y[i].qh, 0, sizeof(y[i].qh));
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t lo = q[64 * c + l], hi = q[64 * c + 32 + l];
        y[i].qs[32 * c + l] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
        y[i].qh[l] = static_cast<uint8_t>(y[i].qh[l] | ((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
    }
  }
}

void vec_dot_q5_k_scalar(int64_t n, float* out, const void* w, const void* a) {
  const block_q5_K* x = static_cast<const block_q5_K*>(w);
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
        const int h0 = ((x[i].qh[l] >> (2 * c)) & 1) << 4;
        const int h1 = ((x[i].qh[l] >> (2 * c + 1)) & 1) << 4;
        s0 += ((q[l] & 0x0F) | h0) * qy[l];
        s1 += ((q[l] >> 4) | h1) * qy[32 + l];
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
