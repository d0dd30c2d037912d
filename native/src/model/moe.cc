#include "model/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace fulcrum {
namespace {

// y = x · Wᵀ for `rows` activation rows already converted to the weight's vec_dot_type.
void product(ThreadPool& pool, GgmlType type, const quant::PackedFormat* packed, const uint8_t* w, int64_t out_rows, int64_t cols,
             const void* act, int64_t rows, float* y) {
  if (packed) matmul_packed(pool, *packed, w, out_rows, cols, act, rows, y, out_rows);
  else matmul_prepared(pool, type, w, out_rows, cols, act, rows, y, out_rows);
}

// The activation buffer for x in `t` (x itself for F32).
const void* converted(ThreadPool& pool, GgmlType t, const float* x, int64_t rows, int64_t cols, std::vector<uint8_t>& buf) {
  if (t == GgmlType::F32) return x;
  convert_rows(pool, t, x, rows, cols, buf.data());
  return buf.data();
}

}  // namespace

void MoeFfn::reserve(const MoeShape& shape, const MoeWeights& w, int64_t rows) {
  shape_ = shape;
  max_rows_ = rows;
  const int64_t E = shape.n_embd, F = shape.n_ff, X = shape.n_expert, K = shape.n_used;
  logits_.assign(static_cast<size_t>(rows * X), 0.f);
  selected_.assign(static_cast<size_t>(rows * K), 0);
  weights_.assign(static_cast<size_t>(rows * K), 0.f);
  count_.assign(static_cast<size_t>(X), 0);
  members_.assign(static_cast<size_t>(X * rows), 0);
  xg_.assign(static_cast<size_t>(rows * E), 0.f);
  g_.assign(static_cast<size_t>(rows * F), 0.f);
  u_.assign(static_cast<size_t>(rows * F), 0.f);
  y_.assign(static_cast<size_t>(rows * E), 0.f);
  ys_.assign(static_cast<size_t>(rows * K * E), 0.f);
  const GgmlType tin = type_traits(w.gate.type).vec_dot_type, tin2 = type_traits(w.up.type).vec_dot_type;
  act_in_.assign(std::max(converted_bytes(tin, E, rows), converted_bytes(tin2, E, rows)), 0);
  act_ff_.assign(converted_bytes(type_traits(w.down.type).vec_dot_type, F, rows), 0);
  act_router_.assign(converted_bytes(type_traits(w.router_type).vec_dot_type, E, rows), 0);
  expert_tokens_.assign(static_cast<size_t>(X), 0);
}

void MoeFfn::route(float* logits, int64_t rows) {
  const int64_t X = shape_.n_expert, K = shape_.n_used;
  std::fill(count_.begin(), count_.end(), 0);
  for (int64_t t = 0; t < rows; ++t) {
    float* p = logits + t * X;
    float mx = p[0];
    for (int64_t e = 1; e < X; ++e) mx = std::max(mx, p[e]);
    double sum = 0;
    for (int64_t e = 0; e < X; ++e) {
      p[e] = std::exp(p[e] - mx);
      sum += p[e];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t e = 0; e < X; ++e) p[e] *= inv;
    int32_t* sel = selected_.data() + t * K;
    float* wt = weights_.data() + t * K;
    // Top k by probability, highest first (ties: the lower expert index first).
    for (int64_t s = 0; s < K; ++s) {
      int32_t best = -1;
      for (int64_t e = 0; e < X; ++e) {
        bool taken = false;
        for (int64_t q = 0; q < s; ++q) taken = taken || sel[q] == e;
        if (!taken && (best < 0 || p[e] > p[best])) best = static_cast<int32_t>(e);
      }
      sel[s] = best;
      wt[s] = p[best];
    }
    float wsum = 0;
    for (int64_t s = 0; s < K; ++s) wsum += wt[s];
    wsum = std::max(wsum, 6.103515625e-5f);
    for (int64_t s = 0; s < K; ++s) {
      wt[s] /= wsum;
      const int32_t e = sel[s];
      members_[static_cast<size_t>(e * max_rows_ + count_[static_cast<size_t>(e)]++)] = static_cast<int32_t>(t * K + s);
    }
  }
}

void MoeFfn::run(ThreadPool& pool, const MoeWeights& w, const float* h, int64_t rows, float* out) {
  const int64_t E = shape_.n_embd, F = shape_.n_ff, X = shape_.n_expert, K = shape_.n_used;
  // 1. Router: a score per expert per token, then softmax, top k, weights normalised to sum 1
  //    (llama.cpp's softmax gating with norm_w: the weights over at least the smallest f16).
  const void* ra = converted(pool, type_traits(w.router_type).vec_dot_type, h, rows, E, act_router_);
  product(pool, w.router_type, w.router_packed, w.router, X, E, ra, rows, logits_.data());
  route(logits_.data(), rows);
  // 2. Each expert over the tokens routed to it: gather, gate and up, SwiGLU, down; each
  //    (token, slot) output scaled by its weight.
  const GgmlType tg = type_traits(w.gate.type).vec_dot_type, tu = type_traits(w.up.type).vec_dot_type;
  const GgmlType td = type_traits(w.down.type).vec_dot_type;
  for (int64_t e = 0; e < X; ++e) {
    const int64_t n = count_[static_cast<size_t>(e)];
    if (n == 0) continue;
    expert_tokens_[static_cast<size_t>(e)] += static_cast<uint64_t>(n);
    const int32_t* m = members_.data() + e * max_rows_;
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(xg_.data() + i * E, h + (m[i] / K) * E, static_cast<size_t>(E) * sizeof(float));
    const void* ag = converted(pool, tg, xg_.data(), n, E, act_in_);
    product(pool, w.gate.type, w.gate.packed, w.gate.expert(e), F, E, ag, n, g_.data());
    if (tu != tg) {
      const void* au = converted(pool, tu, xg_.data(), n, E, act_in_);
      product(pool, w.up.type, w.up.packed, w.up.expert(e), F, E, au, n, u_.data());
    } else {
      product(pool, w.up.type, w.up.packed, w.up.expert(e), F, E, ag, n, u_.data());
    }
    for (int64_t i = 0; i < n; ++i) swiglu_row(g_.data() + i * F, u_.data() + i * F, g_.data() + i * F, F);
    const void* ad = converted(pool, td, g_.data(), n, F, act_ff_);
    product(pool, w.down.type, w.down.packed, w.down.expert(e), E, F, ad, n, y_.data());
    for (int64_t i = 0; i < n; ++i) {
      const int64_t t = m[i] / K, s = m[i] % K;
      const float wt = weights_[static_cast<size_t>(t * K + s)];
      float* dst = ys_.data() + (t * K + s) * E;
      const float* src = y_.data() + i * E;
      for (int64_t c = 0; c < E; ++c) dst[c] = src[c] * wt;
    }
  }
  // 3. Each token's experts summed in slot order (the order llama.cpp adds them).
  for (int64_t t = 0; t < rows; ++t) {
    float* o = out + t * E;
    const float* first = ys_.data() + t * K * E;
    std::memcpy(o, first, static_cast<size_t>(E) * sizeof(float));
    for (int64_t s = 1; s < K; ++s) add_row(o, first + s * E, E);
  }
}

}  // namespace fulcrum
