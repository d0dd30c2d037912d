// Row-wise operations of the decoder: RMSNorm, LayerNorm, RoPE, SwiGLU, GELU, GeGLU, residual add.
// Each works on one row; the model's executor spreads rows (tokens) over the thread pool.
#pragma once
#include <cstdint>

#include "ggml_types.h"

namespace fulcrum {

// y = x / sqrt(mean(x²) + eps) * w (w may be null: no scale). Sum in double, like llama.cpp.
void rmsnorm_row(const float* x, const float* w, float* y, int64_t n, float eps);

enum class RopeStyle { Normal, Neox };
struct RopeParams {
  int64_t n_rot = 0;          // rotated dimensions per head (≤ head_dim, even)
  float freq_base = 10000.f;
  float freq_scale = 1.f;     // 1 / linear scaling factor
  RopeStyle style = RopeStyle::Normal;
};
// Rotates the first n_rot dims of each of n_heads heads (head_dim apart) of one token at `pos`.
// Normal pairs (2i, 2i+1); NeoX pairs (i, i + n_rot/2). θ_i = pos · freq_scale · base^(-2i/n_rot).
void rope_row(float* x, int64_t n_heads, int64_t head_dim, int64_t pos, const RopeParams& p);

// out = silu(gate) * up.
void swiglu_row(const float* gate, const float* up, float* out, int64_t n);
// y = (x - mean(x)) / sqrt(var(x) + eps) * w + b (LayerNorm; b may be null). Sums in double.
void layernorm_row(const float* x, const float* w, const float* b, float* y, int64_t n, float eps);
// GELU (tanh form) as llama.cpp's CPU backend computes it: the input rounded to f16, the result
// looked up in a table of f16 values (exact for |x| ≥ 10: 0 or x). y may be x.
void gelu_row(const float* x, float* y, int64_t n);
// out = gelu(gate) * up (GeGLU), gelu as gelu_row.
void geglu_row(const float* gate, const float* up, float* out, int64_t n);
// x += y.
void add_row(float* x, const float* y, int64_t n);
// x += b (bias).
inline void add_bias_row(float* x, const float* b, int64_t n) { add_row(x, b, n); }

}  // namespace fulcrum
