#include "kernels/ops.h"

#include <cmath>

#include "kernels/float_fns.h"

namespace fulcrum {

void rmsnorm_row(const float* x, const float* w, float* y, int64_t n, float eps) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  }
}

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

void add_row(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace fulcrum
