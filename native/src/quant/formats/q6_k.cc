// Q6_K, scalar: super-blocks of 256 = 16 sub-blocks of 16, x = d * scales[j] * (q - 32), q 6-bit.
// Per 128-element half h: element l (l<32) of quarter k takes its low nibble from
// ql[64h + l + 32*(k&1)] (low nibble for k<2, high for k>=2) and its top 2 bits from bits 2k..2k+1
// of qh[32h + l]. Dotted with Q8_K activations.
#include "quant/formats/blocks.h"
#include "quant/formats/fp16.h"
#include "quant/formats/quant_impl.h"

namespace fulcrum {
namespace quant {

namespace {
// The 256 six-bit values of a block, minus 32, in element order.
void unpack_q6_k(const block_q6_K& b, int8_t* q) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b.ql + 64 * h;
    const uint8_t* qh = b.qh + 32 * h;
    int8_t* o = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      o[l] = static_cast<int8_t>(((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32);
      o[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32);
      o[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      o[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
}
}  // namespace

void dequantize_row_q6_k_scalar(const void* src, float* dst, int64_t n) {
  const block_q6_K* x = static_cast<const block_q6_K*>(src);
  int8_t q[QK_K];
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = f16_to_f32(x[i].d);
    unpack_q6_k(x[i], q);
    float* y = dst + i * QK_K;
    for (int j = 0; j < QK_K; ++j)
      y[j] = d * static_cast<float>(x[i].scales[j / 16]) * static_cast<float>(q[j]);
  }
}

// Per sub-block the element of largest magnitude maps to -32 (ggml's convention, which uses
// the extra negative level); the 16 sub-block scales are then quantized to int8 against the
// largest (which maps to -128).
void quantize_row_q6_k_scalar(const float* src, void* dst, int64_t n) {
  block_q6_K* y = static_cast<block_q6_K*>(dst);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float* x = src + i * QK_K;
    float scales[16], max_scale = 0.0f, max_abs_scale = 0.0f;
    for (int j = 0; j < 16; ++j) {
      float amax = 0.0f, max = 0.0f;
      for (int l = 0; l < 16; ++l) {
        const float v = x[16 * j + l];
        if (std::fabs(v) > amax) { amax = std::fabs(v); max = v; }
      }
      scales[j] = max / -32.0f;
      if (std::fabs(scales[j]) > max_abs_scale) { max_abs_scale = std::fabs(scales[j]); max_scale = scales[j]; }
    }
    uint8_t L[QK_K];
    if (max_abs_scale == 0.0f) {
      y[i].d = 0;
      for (int j = 0; j < 16; ++j) y[i].scales[j] = 0;
      for (int j = 0; j < QK_K; ++j) L[j] = 32;
    } else {
      const float iscale = -128.0f / max_scale;
      y[i].d = f32_to_f16(1.0f / iscale);
      const float d = f16_to_f32(y[i].d);
      for (int j = 0; j < 16; ++j) {
        int ls = round_even(iscale * scales[j]);
        ls = ls < -128 ? -128 : (ls > 127 ? 127 : ls);
        y[i].scales[j] = static_cast<int8_t>(ls);
        const float dd = d * static_cast<float>(ls);
        const float idd = dd != 0.0f ? 1.0f / dd : 0.0f;
        for (int l = 0; l < 16; ++l) {
          int v = round_even(x[16 * j + l] * idd);
          v = v < -32 ? -32 : (v > 31 ? 31 : v);
          L[16 * j + l] = static_cast<uint8_t>(v + 32);
        }
      }
    }
    for (int h = 0; h < 2; ++h) {
      uint8_t* ql = y[i].ql + 64 * h;
      uint8_t* qh = y[i].qh + 32 * h;
      const uint8_t* Lh = L + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const uint8_t q1 = Lh[l], q2 = Lh[l + 32], q3 = Lh[l + 64], q4 = Lh[l + 96];
        ql[l] = static_cast<uint8_t>((q1 & 0x0F) | ((q3 & 0x0F) << 4));
        ql[l + 32] = static_cast<uint8_t>((q2 & 0x0F) | ((q4 & 0x0F) << 4));
        qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
    }
  }
}

void vec_dot_q6_k_scalar(int64_t n, float* out, const void* w, const void* a) {
  const block_q6_K* x = static_cast<const block_q6_K*>(w);
  const block_q8_K* y = static_cast<const block_q8_K*>(a);
  int8_t q[QK_K];
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    unpack_q6_k(x[i], q);
    int32_t sumi = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t s = 0;
      for (int l = 0; l < 16; ++l) s += q[16 * j + l] * y[i].qs[16 * j + l];
      sumi += x[i].scales[j] * s;
    }
    sum += f16_to_f32(x[i].d) * y[i].d * static_cast<float>(sumi);
  }
  *out = sum;
}

}  // namespace quant
}  // namespace fulcrum
