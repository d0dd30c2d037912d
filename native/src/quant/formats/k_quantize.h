// Reference-quality search for the K-quants' per-sub-block scale and min (asymmetric, levels
// 0..nmax): start from min/max, then a few rounds of least squares on the current assignment
// (x ~ scale*q - min), keeping whichever gives the lower squared error. Used only to write
// weights (synthetic models, tests), never per token, so clarity beats speed here.
#pragma once
#include <cmath>
#include <cstdint>

#include "quant/formats/fp16.h"

namespace fulcrum {
namespace quant {

// Finds scale >= 0 and min >= 0 such that x[i] ~ scale * q[i] - min with q in 0..nmax.
static inline void fit_scale_min(const float* x, int n, int nmax, float* scale, float* min) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) { lo = std::fmin(lo, x[i]); hi = std::fmax(hi, x[i]); }
  if (lo > 0.0f) lo = 0.0f;  // the format's min is subtracted and stored >= 0
  if (hi <= lo) { *scale = 0.0f; *min = -lo; return; }
  float best_s = (hi - lo) / static_cast<float>(nmax), best_m = -lo;
  auto error_of = [&](float s, float m) {
    double e = 0.0;
    const float is = s > 0.0f ? 1.0f / s : 0.0f;
    for (int i = 0; i < n; ++i) {
      int q = static_cast<int>(std::nearbyint((x[i] + m) * is));
      q = q < 0 ? 0 : (q > nmax ? nmax : q);
      const double d = static_cast<double>(s) * q - m - x[i];
      e += d * d;
    }
    return e;
  };
  double best_e = error_of(best_s, best_m);
  float s = best_s, m = best_m;
  for (int iter = 0; iter < 4; ++iter) {
    // least squares of x = s*q - m over the current q: solve [Σq² -Σq; Σq -n] [s m]' = [Σqx Σx]
    const float is = s > 0.0f ? 1.0f / s : 0.0f;
    double sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (int i = 0; i < n; ++i) {
      int q = static_cast<int>(std::nearbyint((x[i] + m) * is));
      q = q < 0 ? 0 : (q > nmax ? nmax : q);
      sq += q; sqq += static_cast<double>(q) * q; sx += x[i]; sqx += static_cast<double>(q) * x[i];
    }
    const double det = n * sqq - sq * sq;
    if (det <= 0) break;
    double ns = (n * sqx - sq * sx) / det;
    double nm = (sq * ns - sx) / n;  // from Σx = s Σq - n m
    if (nm < 0) {  // min must be >= 0: refit the scale alone with min = 0
      nm = 0;
      ns = sqq > 0 ? sqx / sqq : 0;
    }
    if (ns <= 0) break;
    s = static_cast<float>(ns);
    m = static_cast<float>(nm);
    const double e = error_of(s, m);
    if (e < best_e) { best_e = e; best_s = s; best_m = m; }
  }
  *scale = best_s;
  *min = best_m;
}

}  // namespace quant
}  // namespace fulcrum
