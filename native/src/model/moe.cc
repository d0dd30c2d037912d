#include "model/moe.h"

#include <algorithm>
#include <cmath>

#include "device/cpu/cpu_kernels.h"
#include "device/device.h"
#include "kernels/matmul.h"

namespace fulcrum {
namespace {

// x as matmul reads it for weights of `wtype` on these kernels: x itself where that is f32 (a
// device's shaders, F32 weights), else x converted into buf.
const void* activations(Kernels& kn, GgmlType wtype, const float* x, int64_t rows, int64_t cols, uint8_t* buf) {
  const GgmlType t = kn.act_type(wtype);
  if (t == GgmlType::F32) return x;
  kn.convert(t, x, rows, cols, buf);
  return buf;
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
  idx_.assign(static_cast<size_t>(2 * rows * K), 0);
  wt_.assign(static_cast<size_t>(rows * K), 0.f);
  // The expert buffers hold one expert's rows, or a decode token's K experts side by side (the
  // grouped pass, run_decode_grouped).
  const int64_t slots = std::max(rows, K);
  xg_.assign(static_cast<size_t>(rows * E), 0.f);
  g_.assign(static_cast<size_t>(slots * F), 0.f);
  u_.assign(static_cast<size_t>(slots * F), 0.f);
  y_.assign(static_cast<size_t>(slots * E), 0.f);
  ys_.assign(static_cast<size_t>(rows * K * E), 0.f);
  const GgmlType tin = type_traits(w.gate.type).vec_dot_type, tin2 = type_traits(w.up.type).vec_dot_type;
  // (the grouped pass converts the token for gate and up side by side when their formats differ)
  act_in_.assign(std::max({converted_bytes(tin, E, rows), converted_bytes(tin2, E, rows), converted_bytes(tin, E, 1) + converted_bytes(tin2, E, 1)}), 0);
  act_ff_.assign(converted_bytes(type_traits(w.down.type).vec_dot_type, F, slots), 0);
  group_decode_ = gemv_groups_enabled();
  act_router_.assign(converted_bytes(type_traits(w.router_type).vec_dot_type, E, rows), 0);
  expert_tokens_.assign(static_cast<size_t>(X), 0);
}

MoeBuffers MoeFfn::host_buffers() {
  MoeBuffers b;
  b.logits = logits_.data();
  b.xg = xg_.data();
  b.g = g_.data();
  b.u = u_.data();
  b.y = y_.data();
  b.ys = ys_.data();
  b.wt = wt_.data();
  b.idx = idx_.data();
  b.act_in = act_in_.data();
  b.act_ff = act_ff_.data();
  b.act_router = act_router_.data();
  return b;
}

void MoeFfn::route(int64_t rows) {
  const int64_t X = shape_.n_expert, K = shape_.n_used;
  std::fill(count_.begin(), count_.end(), 0);
  for (int64_t t = 0; t < rows; ++t) {
    float* p = logits_.data() + t * X;
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
  // Every expert's index lists, back to back: the rows it gathers (tokens) and where each
  // result goes (slot * rows + token), with its weight; one upload a step for a device.
  int64_t at = 0;
  for (int64_t e = 0; e < X; ++e) {
    const int32_t* m = members_.data() + e * max_rows_;
    const int32_t n = count_[static_cast<size_t>(e)];
    for (int32_t i = 0; i < n; ++i) {
      const int64_t t = m[i] / K, s = m[i] % K;
      idx_[static_cast<size_t>(at + i)] = static_cast<uint32_t>(t);
      idx_[static_cast<size_t>(rows * K + at + i)] = static_cast<uint32_t>(s * rows + t);
      wt_[static_cast<size_t>(at + i)] = weights_[static_cast<size_t>(t * K + s)];
    }
    at += n;
  }
}

void MoeFfn::run(Kernels& kn, Device* own, const MoeBuffers& b, const MoeWeights& w, const float* h, int64_t rows, float* out) {
  const int64_t E = shape_.n_embd, X = shape_.n_expert, K = shape_.n_used;
  // 1. Router: a score per expert per token on the lane; on the host, softmax, top k, weights
  //    normalised to sum 1 (llama.cpp's softmax gating with norm_w: the weights over at least
  //    the smallest f16). A device's scores come back, its index lists go over.
  kn.matmul(w.router_type, w.router, w.router_packed, X, E, activations(kn, w.router_type, h, rows, E, b.act_router), rows, b.logits, X, false);
  if (own) {
    kn.sync();
    own->copy_to_host(logits_.data(), b.logits, static_cast<size_t>(rows * X) * sizeof(float));
  }
  route(rows);
  if (own) {
    own->copy_to_device(b.idx, idx_.data(), static_cast<size_t>(2 * rows * K) * sizeof(uint32_t));
    own->copy_to_device(b.wt, wt_.data(), static_cast<size_t>(rows * K) * sizeof(float));
  }
  // 2. Each expert over the tokens routed to it: gather, gate and up, SwiGLU, down; each
  //    (token, slot) output scaled by its weight into its slot's buffer. One token on the CPU
  //    with packed experts: all its experts at once (run_decode_grouped).
  CpuKernels* cpu = own ? nullptr : kn.as_cpu();
  if (cpu && rows == 1 && group_decode_ && w.gate.packed && w.up.packed && w.down.packed) {
    run_decode_grouped(*cpu, b, w, h);
  } else {
    run_experts(kn, b, w, h, rows);
  }
  // 3. Each token's experts summed in slot order (the order llama.cpp adds them): slot 0, then
  //    each next slot's buffer added row by row.
  kn.copy(out, b.ys, static_cast<size_t>(rows * E) * sizeof(float));
  for (int64_t s = 1; s < K; ++s) kn.add(out, b.ys + s * rows * E, rows, E, E);
}

void MoeFfn::run_experts(Kernels& kn, const MoeBuffers& b, const MoeWeights& w, const float* h, int64_t rows) {
  const int64_t E = shape_.n_embd, F = shape_.n_ff, X = shape_.n_expert, K = shape_.n_used;
  const bool same_act = kn.act_type(w.up.type) == kn.act_type(w.gate.type);
  // The down projection's activations converted by SwiGLU while each row is in L1 (the same
  // per-row conversion as a convert of its own, one pass fewer over the pool).
  RowConverts down_cv;
  if (kn.act_type(w.down.type) != GgmlType::F32) {
    down_cv.n = 1;
    down_cv.type[0] = kn.act_type(w.down.type);
    down_cv.dst[0] = b.act_ff;
  }
  int64_t at = 0;
  for (int64_t e = 0; e < X; ++e) {
    const int64_t n = count_[static_cast<size_t>(e)];
    if (n == 0) continue;
    expert_tokens_[static_cast<size_t>(e)] += static_cast<uint64_t>(n);
    kn.gather_rows(h, b.xg, b.idx + at, n, E);
    const void* ag = activations(kn, w.gate.type, b.xg, n, E, b.act_in);
    kn.matmul(w.gate.type, w.gate.expert(e), w.gate.packed, F, E, ag, n, b.g, F, false);
    // (the up activations reuse the gate's buffer: the gate's product has read it by now)
    const void* au = same_act ? ag : activations(kn, w.up.type, b.xg, n, E, b.act_in);
    kn.matmul(w.up.type, w.up.expert(e), w.up.packed, F, E, au, n, b.u, F, false);
    kn.swiglu(b.g, b.u, n, F, down_cv);
    kn.matmul(w.down.type, w.down.expert(e), w.down.packed, E, F, down_cv.n ? static_cast<const void*>(b.act_ff) : b.g, n, b.y, E, false);
    kn.scatter_rows(b.y, b.ys, b.idx + rows * K + at, b.wt + at, n, E);
    at += n;
  }
}

void MoeFfn::run_decode_grouped(CpuKernels& kn, const MoeBuffers& b, const MoeWeights& w, const float* h) {
  // One token's K experts are K small matrices each of gate, up and down (qwen3moe 30B-A3B: 768
  // × 2048, 0.9 MB in Q4_K): run one at a time, each product is a pool run of its own whose
  // threads restart their weight streams on a few hundred KB, and the layer pays 3·K dispatches
  // and joins. Here the gates and ups of all K run as one grouped GEMV pass (one counter over all
  // their row groups), the SwiGLUs on the calling thread, the downs as a second pass: two pool
  // runs a layer. Each product is the bits its one-expert matmul gives (gemv_packed_group), the
  // SwiGLU and scatter the same row kernels, so the token's output is the same bits.
  const int64_t E = shape_.n_embd, F = shape_.n_ff, K = shape_.n_used;
  const GgmlType tg = kn.act_type(w.gate.type), tu = kn.act_type(w.up.type), td = kn.act_type(w.down.type);
  const void* ag = activations(kn, w.gate.type, h, 1, E, b.act_in);
  const void* au = tu == tg ? ag : activations(kn, w.up.type, h, 1, E, b.act_in + converted_bytes(tg, E, 1));
  const int32_t* sel = selected_.data();
  PackedGemv items[kMaxGemvItems];
  // Passes of at most kMaxGemvItems matrices (gate and up of kMaxGemvItems / 2 experts).
  constexpr int64_t kPairsPerPass = kMaxGemvItems / 2;
  for (int64_t s0 = 0; s0 < K; s0 += kPairsPerPass) {
    const int64_t s1 = std::min(K, s0 + kPairsPerPass);
    int n = 0;
    for (int64_t s = s0; s < s1; ++s) {
      items[n++] = PackedGemv{w.gate.packed, w.gate.expert(sel[s]), F, E, ag, b.g + s * F};
      items[n++] = PackedGemv{w.up.packed, w.up.expert(sel[s]), F, E, au, b.u + s * F};
    }
    kn.gemv_group(items, n);
  }
  // (packed weights read quantized activations: each SwiGLU row is converted for its down as it is made)
  const size_t ff_bytes = converted_bytes(td, F, 1);
  for (int64_t s = 0; s < K; ++s) {
    RowConverts cv;
    cv.n = 1;
    cv.type[0] = td;
    cv.dst[0] = b.act_ff + static_cast<size_t>(s) * ff_bytes;
    kn.swiglu(b.g + s * F, b.u + s * F, 1, F, cv);
  }
  for (int64_t s0 = 0; s0 < K; s0 += kMaxGemvItems) {
    const int64_t s1 = std::min(K, s0 + kMaxGemvItems);
    int n = 0;
    for (int64_t s = s0; s < s1; ++s) {
      items[n++] = PackedGemv{w.down.packed, w.down.expert(sel[s]), E, F, b.act_ff + static_cast<size_t>(s) * ff_bytes, b.y + s * E};
    }
    kn.gemv_group(items, n);
  }
  // Slot s's weighted output to its row of ys (s * rows + t, with rows = 1 and t = 0).
  for (int64_t s = 0; s < K; ++s) {
    const uint32_t dst = static_cast<uint32_t>(s);
    kn.scatter_rows(b.y + s * E, b.ys, &dst, weights_.data() + s, 1, E);
    ++expert_tokens_[static_cast<size_t>(sel[s])];
  }
}

}  // namespace fulcrum
