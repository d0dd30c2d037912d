#include "kernels/ops.h"

#include <vector>

#include <cmath>

#include "core/fp16.h"
#include "kernels/float_fns.h"

namespace fulcrum {

void rmsnorm_row(const float* x, const float* w, float* y, int64_t n, float eps) { kernels::float_fns().rmsnorm(x, w, y, n, eps); }

void rope_row(float* x, int64_t n_heads, int64_t head_dim, int64_t pos, const RopeParams& p) {
  // θ advances by a constant factor per pair; computed the same way as llama.cpp (a running
  // product in float) so angles round alike.
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  const int64_t half = p.n_rot / 2;
  float theta = static_cast<float>(pos);
  // cos/sin per pair, shared by all heads; n_rot ≤ 1024 by the model's validation.
  float cs[512], sn[512];
  for (int64_t i = 0; i < half; ++i) {
    const float t = theta * p.freq_scale;
    cs[i] = std::cos(t);
    sn[i] = std::sin(t);
    theta *= theta_scale;
  }
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    if (p.style == RopeStyle::Normal) {
      for (int64_t i = 0; i < half; ++i) {
        const float a = v[2 * i], b = v[2 * i + 1];
        v[2 * i] = a * cs[i] - b * sn[i];
        v[2 * i + 1] = a * sn[i] + b * cs[i];
      }
    } else {
      for (int64_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * cs[i] - b * sn[i];
        v[i + half] = a * sn[i] + b * cs[i];
      }
    }
  }
}

void swiglu_row(const float* gate, const float* up, float* out, int64_t n) { kernels::float_fns().swiglu(gate, up, out, n); }

void layernorm_row(const float* x, const float* w, const float* b, float* y, int64_t n, float eps) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  double var = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float d = x[i] - mean;
    var += static_cast<double>(d) * d;
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(var / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) {
    const float v = (x[i] - mean) * scale * w[i];
    y[i] = b ? v + b[i] : v;
  }
}

namespace {
// gelu(h) rounded to f16 for every f16 value h: llama.cpp's CPU backend computes GELU this way
// (GGML_GELU_FP16), so the same inputs give the same outputs. Built once, on first use.
const uint16_t* gelu_table() {
  static const std::vector<uint16_t> table = [] {
    std::vector<uint16_t> t(1 << 16);
    for (uint32_t i = 0; i < t.size(); ++i) {
      const float x = fp16_to_fp32(static_cast<uint16_t>(i));
      t[i] = fp32_to_fp16(0.5f * x * (1.0f + std::tanh(0.79788456080286535587989211986876f * x * (1.0f + 0.044715f * x * x))));
    }
    return t;
  }();
  return table.data();
}
inline float gelu_one(const uint16_t* table, float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return fp16_to_fp32(table[fp32_to_fp16(x)]);
}
}  // namespace

void gelu_row(const float* x, float* y, int64_t n) {
  const uint16_t* t = gelu_table();
  for (int64_t i = 0; i < n; ++i) y[i] = gelu_one(t, x[i]);
}

void geglu_row(const float* gate, const float* up, float* out, int64_t n) {
  const uint16_t* t = gelu_table();
  for (int64_t i = 0; i < n; ++i) {
    // llama.cpp multiplies x·up for |x| ≥ 10 without the table.
    out[i] = gelu_one(t, gate[i]) * up[i];
  }
}

void add_row(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace fulcrum
