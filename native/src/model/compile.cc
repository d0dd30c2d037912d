// Compiling the forward pass under a placement: which op runs where (host or device), on which
// lane, the copies between the two memories, streamed weights prefetched a layer ahead into two
// device slots, KV kept on the device, on the host, or streamed to the device (with KVPR's
// recomputation of a prefix), and the events (cross-lane dependencies) that order it all.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <stdexcept>

#include "kernels/matmul.h"
#include "model/model.h"

namespace fulcrum {

namespace {
constexpr int kBufs = 9;
constexpr int kActBase = 2 * kBufs;
// Resources indexed by rows (activation buffers and converted activations, per location) come
// twice: [0, kRowRes) for sub-batch 1's rows (and the whole program's), [kRowRes, 2 kRowRes) for
// sub-batch 2's. An op over all rows touches both; a sub-batch's op only its own (op_resources).
constexpr int kRowRes = kActBase + 2 * static_cast<int>(GgmlType::COUNT);
constexpr int kSlotBase = 2 * kRowRes;
constexpr int kKvBase = kSlotBase + 2;
int bit(Loc l) { return l == Loc::Host ? 1 : 2; }
Lane compute_lane(Loc l) { return l == Loc::Host ? Lane::Cpu : Lane::Device; }
Lane copy_lane(Loc dst) { return dst == Loc::Host ? Lane::ToHost : Lane::ToDevice; }
}  // namespace

void Model::compile(bool pipelined, bool layer_steps) {
  ops_.clear();
  // The pipelined and layer-by-layer programs are compiled from the decode placement when first
  // asked for (build_pipelined, build_layer_steps); any new placement forgets them.
  if (!pipelined && !layer_steps) {
    pipe_ = Program{};
    pipe_state_ = 0;
    layer_prog_ = Program{};
    layer_prog_state_ = 0;
    layer_defers_.clear();
  }
  if (layer_steps) layer_defers_.assign(static_cast<size_t>(cfg_.n_layers), 0);  // window_point sets them
  const bool dev = device_ != nullptr && placement_.uses_device();
  const int64_t E = cfg_.n_embd, QW = cfg_.n_heads * cfg_.head_dim, F = cfg_.n_ff;
  auto place = [&](int layer, int op) -> OpPlacement {
    if (!dev) return OpPlacement{};
    if (layer < 0) return placement_.head;
    return placement_.layers[static_cast<size_t>(layer)].op[op];
  };
  // Where each buffer's rows are valid (bit per location), its version, and which buffer (and
  // version of it) each converted-activation buffer holds per location. One state per row range:
  // [0] all rows, [1] / [2] the device-KV / host-KV sub-batch of the pipelined program, whose
  // rows are disjoint and so move and convert on their own.
  struct RowState {
    int valid[kBufs];
    int version[kBufs] = {};
    std::map<std::pair<GgmlType, Loc>, std::pair<Buf, int>> act_state;
  };
  RowState states[3];
  for (int& v : states[0].valid) v = 1;
  int cur_part = 0;
  auto S = [&]() -> RowState& { return states[cur_part]; };
  bool after_last = false;
  int cur_plan_op = -1, cur_layer = -1;
  auto push = [&](Op op) {
    op.after_last = after_last;
    op.layer = cur_layer;
    if (op.plan_op < 0) op.plan_op = static_cast<int8_t>(cur_plan_op);
    if (cur_part != 0) op.part = static_cast<int8_t>(cur_part);
    ops_.push_back(op);
  };
  auto need = [&](Buf b, Loc l) {
    const int bi = static_cast<int>(b);
    if (S().valid[bi] & bit(l)) return;
    Op c{OpKind::CopyRows};
    c.src = c.dst = b;
    c.loc = l;
    c.lane = copy_lane(l);
    c.width = width(b);
    push(c);
    S().valid[bi] |= bit(l);
  };
  auto wrote = [&](Buf b, Loc l) {
    S().valid[static_cast<int>(b)] = bit(l);
    ++S().version[static_cast<int>(b)];
  };
  // Where a helper op on buffer b runs: on the device when b is there only, else on the host.
  auto home = [&](Buf b) { return S().valid[static_cast<int>(b)] == 2 ? Loc::Dev : Loc::Host; };
  auto compute = [&](OpKind k, Loc l, Buf src, Buf dst, const float* vec = nullptr) {
    Op op{k};
    op.src = src;
    op.dst = dst;
    op.vec = vec;
    op.loc = l;
    op.lane = compute_lane(l);
    push(op);
  };
  // The architecture's normalisation (RMSNorm, or LayerNorm with its bias) of src into dst.
  auto norm = [&](Loc l, Buf src, Buf dst, const std::vector<float>& gains, const std::vector<float>& bias) {
    Op op{variant_->norm == NormKind::Layer ? OpKind::LayerNorm : OpKind::RmsNorm};
    op.src = src;
    op.dst = dst;
    op.vec = gains.data();
    op.vec2 = bias.empty() ? nullptr : bias.data();
    op.loc = l;
    op.lane = compute_lane(l);
    push(op);
  };
  // y += bias where y is (after a biased matmul: attn_output, ffn_up, ffn_down).
  auto add_bias = [&](Buf b, const std::vector<float>& bias) {
    if (bias.empty()) return;
    compute(OpKind::AddBias, home(b), b, b, bias.data());
    wrote(b, home(b));
  };
  auto ensure_act = [&](Buf src, int64_t w, GgmlType t, Loc l) {
    if (t == GgmlType::F32) {
      need(src, l);
      return;
    }
    auto key = std::make_pair(t, l);
    auto& act_state = S().act_state;
    const int ver = S().version[static_cast<int>(src)];
    auto it = act_state.find(key);
    if (it != act_state.end() && it->second == std::make_pair(src, ver)) return;
    need(src, l);
    Op c{OpKind::Convert};
    c.src = c.dst = src;
    c.act_type = t;
    c.width = w;
    c.loc = l;
    c.lane = compute_lane(l);
    push(c);
    act_state[key] = {src, ver};
    if (l == Loc::Host) {
      auto& slot = act_[t];
      const size_t need_bytes = converted_bytes(t, std::max({E, QW, F}), cfg_.batch_size);
      if (slot.size() < need_bytes) slot.assign(need_bytes, 0);
    }
  };
  // One matmul, split by rows between the device (rows [0, r)) and the host (rows [r, rows)).
  auto matmul = [&](Buf src, int64_t w, const Weight* wt, Buf dst, int layer, int plan_op) {
    const OpPlacement pp = place(layer, plan_op);
    const int64_t rows = wt->rows;
    const int64_t r = device_rows(*wt, pp);
    const GgmlType t = type_traits(wt->type).vec_dot_type;
    cur_plan_op = plan_op;
    // Rows [r0, r1) of the product on one side (the host reads the weight in place from row r0;
    // the device's weight pointer is filled in once its copy or slot is known).
    auto part = [&](Loc l, int64_t r0, int64_t r1) {
      // A device with its own kernels reads f32 activations (its shaders dequantize the weights).
      const GgmlType ta = l == Loc::Dev && dk_ ? GgmlType::F32 : t;
      ensure_act(src, w, ta, l);
      Op m{OpKind::MatMul};
      m.src = src;
      m.dst = dst;
      m.w = wt;
      m.act_type = ta;
      m.width = w;
      m.loc = l;
      m.lane = compute_lane(l);
      m.r0 = r0;
      m.r1 = r1;
      if (l == Loc::Host) m.wdata = wt->cpu_data + static_cast<size_t>(r0) * wt->row_bytes;
      // The CPU's kernels read the repacked layout; so does the loopback device, which runs them
      // on its copy of the CPU's bytes (a device with kernels of its own gets the GGUF bytes).
      if (wt->cpu_layout != WeightLayout::Gguf && (l == Loc::Host || !dk_)) m.packed = quant::packed_format(wt->type);
      push(m);
    };
    if (r > 0) part(Loc::Dev, 0, r);
    if (r < rows) part(Loc::Host, r, rows);
    if (r > 0 && r < rows) {
      Op c{OpKind::CopyCols};
      c.src = c.dst = dst;
      c.loc = Loc::Host;
      c.lane = Lane::ToHost;
      c.r0 = 0;
      c.r1 = r;
      push(c);
      wrote(dst, Loc::Host);
    } else {
      wrote(dst, r > 0 ? Loc::Dev : Loc::Host);
    }
  };

  cur_layer = -1;
  compute(OpKind::Embed, Loc::Host, Buf::X, Buf::X);
  wrote(Buf::X, Loc::Host);
  // A layer's ops in three phases (pre: norm, QKV, RoPE; attn: KV store and attention; post:
  // output projection, residuals, FFN), so the pipelined program can interleave two sub-batches.
  enum : int { kPre = 1, kAttn = 2, kPost = 4 };
  auto emit_layer = [&](int l, int phases) {
    Layer& L = layers_[static_cast<size_t>(l)];
    const LayerPlacement* lp = dev ? &placement_.layers[static_cast<size_t>(l)] : nullptr;
    cur_layer = l;
    const Loc attn_loc = place(l, kAttention).loc;
    const bool kv_streamed = lp && !lp->kv_by_sequence && attn_loc == Loc::Dev && lp->kv == Loc::Host;
    const bool recompute = kv_streamed && lp->recompute_prefix > 0;

    if (phases & kPre) {
      cur_plan_op = kAttnNorm;
      const Loc n0 = place(l, kAttnNorm).loc;
      need(Buf::X, n0);
      norm(n0, Buf::X, Buf::H, L.attn_norm_f, L.attn_norm_b);
      wrote(Buf::H, n0);
      if (recompute) {
        need(Buf::H, Loc::Host);
        Op s{OpKind::SaveActs};
        s.src = Buf::H;
        s.loc = Loc::Host;
        s.lane = Lane::Cpu;
        push(s);
      }
      matmul(Buf::H, E, &L.wq, Buf::Q, l, kQ);
      matmul(Buf::H, E, &L.wk, Buf::K, l, kK);
      matmul(Buf::H, E, &L.wv, Buf::V, l, kV);
      if (!L.bq.empty()) {
        cur_plan_op = kQ;
        compute(OpKind::AddBias, home(Buf::Q), Buf::Q, Buf::Q, L.bq.data());
        wrote(Buf::Q, home(Buf::Q));
        cur_plan_op = kK;
        compute(OpKind::AddBias, home(Buf::K), Buf::K, Buf::K, L.bk.data());
        wrote(Buf::K, home(Buf::K));
        cur_plan_op = kV;
        compute(OpKind::AddBias, home(Buf::V), Buf::V, Buf::V, L.bv.data());
        wrote(Buf::V, home(Buf::V));
      }
      // qk_norm: each Q and K head normalised before RoPE, where the projection left it.
      if (!L.q_norm_f.empty()) {
        for (auto [b, gains, po] : {std::make_tuple(Buf::Q, &L.q_norm_f, kQ), std::make_tuple(Buf::K, &L.k_norm_f, kK)}) {
          cur_plan_op = po;
          const Loc hl = home(b);
          Op n{OpKind::RmsNorm};
          n.src = n.dst = b;
          n.vec = gains->data();
          n.width = cfg_.head_dim;
          n.loc = hl;
          n.lane = compute_lane(hl);
          push(n);
          wrote(b, hl);
        }
      }
      cur_plan_op = kRope;
      const Loc rl = place(l, kRope).loc;
      need(Buf::Q, rl);
      compute(OpKind::Rope, rl, Buf::Q, Buf::Q);
      wrote(Buf::Q, rl);
      need(Buf::K, rl);
      compute(OpKind::Rope, rl, Buf::K, Buf::K);
      wrote(Buf::K, rl);
    }
    if (phases & kAttn) {
      // K and V of the new positions into the layer's KV (and, when it is streamed, into the
      // staging slot the device's attention reads).
      cur_plan_op = kAttention;
      const bool by_seq = lp && lp->kv_by_sequence;
      // The new positions' K and V into the KV at `at`, and attention over it there, for the rows
      // of `part` (0: all; push gives a pipelined sub-batch's ops its own part).
      auto store_kv_at = [&](Loc at, int part) {
        need(Buf::K, at);
        need(Buf::V, at);
        Op s{OpKind::StoreKv};
        s.src = Buf::K;
        s.dst = Buf::V;
        s.loc = at;
        s.lane = compute_lane(at);
        s.part = static_cast<int8_t>(part);
        push(s);
      };
      // The layer-by-layer program's window point (APEX, SeqInput::layer): after the host's
      // attention of the rows of `part`, the rows that continue from an attention deferred at
      // this layer take its output and their X back, and the rows that stop at this layer keep X
      // and start their attention on the window's thread (their rows skip the step's attention).
      // by_seq: for host-KV sequences' rows (layer_defers_ 2), else for every row (1). A row
      // that joins may belong to a sequence whose KV moved to the device since it deferred
      // (re-planning): its output then goes to the device's Att row too, so the op covers all rows
      // (part 0) and the device's Att, and the device's output projection waits for it.
      auto window_point = [&](bool host_kv_rows) {
        need(Buf::Q, Loc::Host);
        need(Buf::X, Loc::Host);
        Op d{OpKind::DeferredAttention};
        d.src = Buf::Q;
        d.dst = Buf::Att;
        d.loc = Loc::Host;
        d.lane = Lane::Cpu;
        push(d);
        wrote(Buf::X, Loc::Host);
        layer_defers_[static_cast<size_t>(l)] = host_kv_rows ? 2 : 1;
      };
      auto attend_at = [&](Loc at, int part) {
        need(Buf::Q, at);
        Op a{OpKind::Attention};
        a.src = Buf::Q;
        a.dst = Buf::Att;
        a.loc = at;
        a.lane = compute_lane(at);
        a.part = static_cast<int8_t>(part);
        push(a);
      };
      if (by_seq && cur_part != 0) {
        // Pipelined: this sub-batch's rows all keep their KV on one side (1: the device, 2: the
        // host), so its K, V and Q go there, and its attention output is where it was computed.
        const Loc al = cur_part == 1 ? Loc::Dev : Loc::Host;
        store_kv_at(al, 0);
        attend_at(al, 0);
        wrote(Buf::Att, al);
      } else if (by_seq) {
        // NEO: device-KV sequences' rows store and attend on the device, host-KV ones on the CPU,
        // at the same time; the CPU's attention rows then join the device's (or the reverse).
        for (Loc at : {Loc::Dev, Loc::Host}) store_kv_at(at, at == Loc::Dev ? 1 : 2);
        for (Loc at : {Loc::Dev, Loc::Host}) attend_at(at, at == Loc::Dev ? 1 : 2);
        if (layer_steps) window_point(true);
        const Loc out = place(l, kOutput).loc == Loc::Dev && place(l, kOutput).dev_fraction >= 1.0 ? Loc::Dev : Loc::Host;
        Op c{OpKind::CopyRows};
        c.src = c.dst = Buf::Att;
        c.loc = out;
        c.lane = copy_lane(out);
        c.width = width(Buf::Att);
        c.part = out == Loc::Dev ? 2 : 1;  // the other side's rows
        push(c);
        wrote(Buf::Att, out);
      }
      const Loc kv_loc = lp ? lp->kv : Loc::Host;
      if (!by_seq) {
        need(Buf::K, kv_loc);
        need(Buf::V, kv_loc);
        compute(OpKind::StoreKv, kv_loc, Buf::K, Buf::V);
      }
      if (kv_streamed) {
        if (recompute) {
          Op c{OpKind::CopyActs};
          c.loc = Loc::Dev;
          c.lane = Lane::ToDevice;
          push(c);
          Op rk{OpKind::RecomputeKv};
          rk.loc = Loc::Dev;
          rk.lane = Lane::Device;
          rk.kv_slot = l % 2;
          push(rk);
        }
        need(Buf::K, Loc::Dev);
        need(Buf::V, Loc::Dev);
        Op s{OpKind::StoreKv};
        s.src = Buf::K;
        s.dst = Buf::V;
        s.loc = Loc::Dev;
        s.lane = Lane::Device;
        s.kv_slot = l % 2;
        push(s);
      }
      if (!by_seq) {
        need(Buf::Q, attn_loc);
        Op a{OpKind::Attention};
        a.src = Buf::Q;
        a.dst = Buf::Att;
        a.loc = attn_loc;
        a.lane = compute_lane(attn_loc);
        a.kv_slot = kv_streamed ? l % 2 : -1;
        push(a);
        wrote(Buf::Att, attn_loc);
        if (layer_steps && attn_loc == Loc::Host && kv_loc == Loc::Host && !kv_streamed) window_point(false);
      }
    }
    if (phases & kPost) {
      matmul(Buf::Att, QW, &L.wo, Buf::H, l, kOutput);
      cur_plan_op = kOutput;
      add_bias(Buf::H, L.bo);
      // post_norms: each sublayer's output normalised before the residual add (where it is).
      auto post_norm = [&](const std::vector<float>& gains) {
        if (gains.empty()) return;
        const Loc pl = home(Buf::H);
        compute(OpKind::RmsNorm, pl, Buf::H, Buf::H, gains.data());
        wrote(Buf::H, pl);
      };
      post_norm(L.attn_post_norm_f);
      {
        const Loc al = home(Buf::H);
        need(Buf::X, al);
        compute(OpKind::AddResidual, al, Buf::H, Buf::X);
        wrote(Buf::X, al);
      }
      cur_plan_op = kFfnNorm;
      const Loc n1 = place(l, kFfnNorm).loc;
      need(Buf::X, n1);
      norm(n1, Buf::X, Buf::H, L.ffn_norm_f, L.ffn_norm_b);
      wrote(Buf::H, n1);
      if (variant_->ffn == FfnKind::Moe) {
        // Routed experts: H -> H, where the plan puts the experts (its Up op).
        cur_plan_op = kUp;
        const Loc ml = place(l, kUp).loc;
        need(Buf::H, ml);
        compute(OpKind::MoeFfn, ml, Buf::H, Buf::H);
        wrote(Buf::H, ml);
      } else if (variant_->ffn == FfnKind::Gelu) {
        // Ungated: up (+ bias) -> GELU in place -> down.
        matmul(Buf::H, E, &L.up, Buf::Up, l, kUp);
        cur_plan_op = kUp;
        add_bias(Buf::Up, L.bup);
        cur_plan_op = kDown;
        const Loc gl = home(Buf::Up);
        compute(OpKind::Gelu, gl, Buf::Up, Buf::Up);
        wrote(Buf::Up, gl);
        matmul(Buf::Up, F, &L.down, Buf::H, l, kDown);
      } else {
        matmul(Buf::H, E, &L.gate, Buf::Gate, l, kGate);
        matmul(Buf::H, E, &L.up, Buf::Up, l, kUp);
        cur_plan_op = kDown;
        const Loc sl = (home(Buf::Gate) == Loc::Dev && home(Buf::Up) == Loc::Dev) ? Loc::Dev : Loc::Host;
        need(Buf::Gate, sl);
        need(Buf::Up, sl);
        compute(variant_->ffn == FfnKind::GeGlu ? OpKind::GeGlu : OpKind::SwiGlu, sl, Buf::Gate, Buf::Gate);
        wrote(Buf::Gate, sl);
        matmul(Buf::Gate, F, &L.down, Buf::H, l, kDown);
      }
      cur_plan_op = kDown;
      add_bias(Buf::H, L.bdown);
      post_norm(L.ffn_post_norm_f);
      {
        const Loc al = home(Buf::H);
        need(Buf::X, al);
        compute(OpKind::AddResidual, al, Buf::H, Buf::X);
        wrote(Buf::X, al);
      }
    }
  };
  const int n_layers = static_cast<int>(cfg_.n_layers);
  // The layer-by-layer program's edges of layer l (SeqInput::layer): the rows that run only this
  // layer take X from their sequence's residual (host memory) before it and keep X after it.
  // Where X is on the device only (a layer on the device ends; the next starts there), the edge
  // copies just those rows on a copy lane, and X stays where it is. (Before, every edge brought the
  // whole X to the host and back: two copies of every row per layer, each draining the device's
  // queue, in every step of APEX's asynchronous overlap.) Elsewhere the edge runs on the host.
  auto layer_edge = [&](OpKind k, int l) {
    cur_layer = l;
    cur_plan_op = k == OpKind::LayerEnter ? kAttnNorm : kDown;
    const bool x_on_dev_only = S().valid[static_cast<int>(Buf::X)] == bit(Loc::Dev);
    const bool on_dev = x_on_dev_only && (k == OpKind::LayerExit || place(l, kAttnNorm).loc == Loc::Dev);
    Op e{k};
    e.src = e.dst = Buf::X;
    if (on_dev) {
      e.loc = Loc::Dev;
      e.lane = k == OpKind::LayerEnter ? Lane::ToDevice : Lane::ToHost;
      push(e);
      if (k == OpKind::LayerEnter) wrote(Buf::X, Loc::Dev);
      return;
    }
    need(Buf::X, Loc::Host);
    e.loc = Loc::Host;
    e.lane = Lane::Cpu;
    push(e);
    if (k == OpKind::LayerEnter) wrote(Buf::X, Loc::Host);
  };
  if (!pipelined) {
    for (int l = 0; l < n_layers; ++l) {
      if (layer_steps) layer_edge(OpKind::LayerEnter, l);
      emit_layer(l, kPre | kAttn | kPost);
      if (layer_steps) layer_edge(OpKind::LayerExit, l);
    }
  } else {
    // NEO's asymmetric pipeline (paper 003 Sec. 4, Fig. 5) as one op list: sub-batch 1 (device-KV
    // rows) and sub-batch 2 (host-KV rows) each run every op over their own rows, skewed so that
    // the device's list is
    //   post1(l-1) pre1(l) attn1(l) | post2(l-1) pre2(l) | post1(l) pre1(l+1) attn1(l+1) | ...
    // and the CPU attention of sub-batch 2's layer l (its only dependency: pre2(l)'s Q, K and V
    // copied back) runs while the device works on sub-batch 1's post(l), pre(l+1) and attention.
    // The per-part buffer resources (op_resources) let the hazard tracker see the two sub-batches
    // as independent until the LM head joins them.
    states[1] = states[0];
    states[2] = states[0];
    for (int p : {1, 2}) {
      cur_part = p;
      emit_layer(0, kPre | kAttn);
    }
    for (int l = 0; l < n_layers; ++l)
      for (int p : {1, 2}) {
        cur_part = p;
        emit_layer(l, kPost);
        if (l + 1 < n_layers) emit_layer(l + 1, kPre | kAttn);
      }
    // The join: both sub-batches' X where sub-batch 1's is; the head then works on all rows.
    // Converted activations of a sub-batch sit at its own offset (row_offset_bytes), so none
    // counts for all rows.
    cur_part = 1;
    const Loc xl = home(Buf::X);
    cur_part = 2;
    need(Buf::X, xl);
    for (int b = 0; b < kBufs; ++b) {
      states[0].valid[b] = states[1].valid[b] & states[2].valid[b];
      states[0].version[b] = std::max(states[1].version[b], states[2].version[b]) + 1;
    }
    states[0].act_state.clear();
    cur_part = 0;
  }
  cur_layer = -1;
  cur_plan_op = -1;
  {
    const Loc xl = home(Buf::X);
    compute(OpKind::LastRows, xl, Buf::X, Buf::X);
    // The rows moved where X is valid on both sides (the layer-by-layer program's last edge
    // leaves it so): the other side's copy no longer holds the head's rows.
    wrote(Buf::X, xl);
    after_last = true;
    const Loc hl = place(-1, 0).loc;
    need(Buf::X, hl);
    norm(hl, Buf::X, Buf::H, output_norm_f_, output_norm_b_);
    wrote(Buf::H, hl);
    matmul(Buf::H, E, &output_, Buf::Logits, -1, -1);
    need(Buf::Logits, Loc::Host);
    if (cfg_.final_softcap > 0) compute(OpKind::LogitSoftcap, Loc::Host, Buf::Logits, Buf::Logits);
  }
  fuse_converts();

  // Streamed weights (and streamed KV) of layer l are copied while layer l - 1 computes: their
  // copies go right after the last host->device op of layer l - 1 (at its start when it has
  // none), so the copy lane does the layer's own input copies first, then the prefetch. The LM
  // head counts as layer n_layers. The slot's previous user (layer l - 2) is waited for through
  // the slot's write-after-read dependency.
  if (dev) {
    std::vector<std::vector<Op>> prefetch(static_cast<size_t>(cfg_.n_layers) + 1);
    auto add_weight = [&](int layer, int plan_op, const Weight* w) {
      const OpPlacement pp = place(layer, plan_op);
      // (A weight the other placement keeps resident is read from its copy, not streamed.)
      if (pp.loc != Loc::Dev || pp.weights != WeightHome::Streamed || !w->data || resident_.count(w)) return;
      Op c{OpKind::CopyWeight};
      c.w = w;
      c.loc = Loc::Dev;
      c.lane = Lane::ToDevice;
      c.layer = layer;
      c.plan_op = static_cast<int8_t>(plan_op);
      prefetch[static_cast<size_t>(layer < 0 ? cfg_.n_layers : layer)].push_back(c);
    };
    for (int l = 0; l < static_cast<int>(cfg_.n_layers); ++l) {
      Layer& L = layers_[static_cast<size_t>(l)];
      const std::pair<int, const Weight*> ws[] = {{kQ, &L.wq}, {kK, &L.wk}, {kV, &L.wv}, {kOutput, &L.wo}, {kGate, &L.gate}, {kUp, &L.up}, {kDown, &L.down}};
      for (auto& [op, w] : ws) add_weight(l, op, w);
      const LayerPlacement& lp = placement_.layers[static_cast<size_t>(l)];
      if (!lp.kv_by_sequence && lp.op[kAttention].loc == Loc::Dev && lp.kv == Loc::Host) {
        Op c{OpKind::CopyKv};
        c.loc = Loc::Dev;
        c.lane = Lane::ToDevice;
        c.layer = l;
        c.plan_op = kAttention;
        c.kv_slot = l % 2;
        prefetch[static_cast<size_t>(l)].push_back(c);
      }
    }
    add_weight(-1, -1, &output_);
    std::vector<Op> out;
    out.reserve(ops_.size() + 64);
    // Group g goes after the last ToDevice op of layer g - 1 (group 0: after the embedding).
    std::vector<size_t> insert_after(prefetch.size(), 0);
    for (size_t g = 1; g < prefetch.size(); ++g) {
      const int prev = static_cast<int>(g) - 1;
      size_t at = 0;
      bool found = false;
      size_t first_of_g = ops_.size();
      for (size_t i = 0; i < ops_.size(); ++i) {
        if (static_cast<int>(g) < cfg_.n_layers && ops_[i].layer == static_cast<int>(g) && first_of_g == ops_.size()) first_of_g = i;
        if (ops_[i].layer != prev) continue;
        if (!found) at = i;  // the layer's first op: insert before its first op when it has no copy in
        if (ops_[i].lane == Lane::ToDevice) { at = i + 1; found = true; }
      }
      // The pipelined program interleaves layers g - 1 and g: the copy must precede layer g's
      // first reader (a hazard is only seen against earlier ops).
      insert_after[g] = std::min(at, first_of_g);
    }
    std::vector<std::vector<size_t>> at_index(ops_.size() + 1);
    for (size_t g = 1; g < prefetch.size(); ++g) at_index[insert_after[g]].push_back(g);
    for (size_t i = 0; i < ops_.size(); ++i) {
      for (size_t g : at_index[i]) for (Op& c : prefetch[g]) out.push_back(c);
      out.push_back(ops_[i]);
      if (i == 0) for (Op& c : prefetch[0]) out.push_back(c);
    }
    ops_ = std::move(out);
  }
}

// Folds the Convert ops that directly follow an RmsNorm or SwiGlu of the same buffer, location and
// lane into it (at most two formats, e.g. Q8_K and Q8_0 for a K-quant file with fallback
// matrices). The converted rows are the same bytes either way: the same quantize_row on the same
// float row.
void Model::fuse_converts() {
  std::vector<Op> fused;
  fused.reserve(ops_.size());
  for (const Op& op : ops_) {
    if (op.kind == OpKind::Convert && !fused.empty()) {
      Op& prev = fused.back();
      const bool producer = (prev.kind == OpKind::RmsNorm || prev.kind == OpKind::LayerNorm || prev.kind == OpKind::SwiGlu ||
                             prev.kind == OpKind::GeGlu || prev.kind == OpKind::Gelu) && prev.dst == op.src && prev.loc == op.loc;
      if (producer && prev.width == 0 && prev.n_fused_convert < 2 && op.width == width(op.src)) {
        prev.fused_convert[prev.n_fused_convert++] = op.act_type;
        continue;
      }
    }
    fused.push_back(op);
  }
  ops_ = std::move(fused);
}

void Model::op_resources(const Op& op, std::vector<int>* r, std::vector<int>* w) const {
  const size_t r_from = r->size(), w_from = w->size();
  op_resources_rows(op, r, w);
  // Row-indexed resources of the op's rows: sub-batch 1's, 2's, or (all rows) both.
  for (auto [v, from] : {std::make_pair(r, r_from), std::make_pair(w, w_from)}) {
    const size_t n = v->size();
    for (size_t i = from; i < n; ++i) {
      const int id = (*v)[i];
      if (id >= kRowRes) continue;
      if (op.part == 2) (*v)[i] = id + kRowRes;
      else if (op.part == 0) v->push_back(id + kRowRes);
    }
  }
}

void Model::op_resources_rows(const Op& op, std::vector<int>* r, std::vector<int>* w) const {
  const int loc = op.loc == Loc::Host ? 0 : 1;
  auto b = [](Buf x, int l) { return 2 * static_cast<int>(x) + l; };
  auto act = [](GgmlType t, int l) { return kActBase + 2 * static_cast<int>(t) + l; };
  const int kv_host = kKvBase + 3 * op.layer, kv_dev = kv_host + 1, saved = kv_host + 2;
  const int staging = kKvBase + 3 * static_cast<int>(cfg_.n_layers) + (op.kv_slot < 0 ? 0 : op.kv_slot);
  const int slot = kSlotBase + ((op.layer < 0 ? static_cast<int>(cfg_.n_layers) : op.layer) % 2);
  const bool streamed_w = op.w && op.loc == Loc::Dev && resident_.count(op.w) == 0;
  switch (op.kind) {
    case OpKind::Embed: w->push_back(b(Buf::X, 0)); break;
    case OpKind::RmsNorm:
    case OpKind::LayerNorm:
    case OpKind::Gelu:
    case OpKind::SwiGlu:
    case OpKind::GeGlu:
      r->push_back(b(op.src, loc));
      if (op.kind == OpKind::SwiGlu || op.kind == OpKind::GeGlu) r->push_back(b(Buf::Up, loc));
      w->push_back(b(op.dst, loc));
      for (int k = 0; k < op.n_fused_convert; ++k) w->push_back(act(op.fused_convert[k], loc));
      break;
    case OpKind::Convert: r->push_back(b(op.src, loc)); w->push_back(act(op.act_type, loc)); break;
    case OpKind::MoeFfn: case OpKind::LogitSoftcap: r->push_back(b(op.src, loc)); w->push_back(b(op.dst, loc)); break;
    case OpKind::MatMul:
      r->push_back(op.act_type == GgmlType::F32 ? b(op.src, loc) : act(op.act_type, loc));
      if (streamed_w) r->push_back(slot);
      w->push_back(b(op.dst, loc));
      break;
    case OpKind::AddBias: case OpKind::Rope: r->push_back(b(op.dst, loc)); w->push_back(b(op.dst, loc)); break;
    case OpKind::AddResidual: r->push_back(b(op.src, loc)); r->push_back(b(op.dst, loc)); w->push_back(b(op.dst, loc)); break;
    case OpKind::LastRows: r->push_back(b(Buf::X, loc)); w->push_back(b(Buf::X, loc)); break;
    case OpKind::LayerEnter: r->push_back(b(Buf::X, loc)); w->push_back(b(Buf::X, loc)); break;
    case OpKind::LayerExit: r->push_back(b(Buf::X, loc)); break;
    // Its attention reads the layer's host KV, which the step's StoreKv wrote before it.
    case OpKind::DeferredAttention:
      r->push_back(b(Buf::Q, 0));
      r->push_back(b(Buf::X, 0));
      r->push_back(kv_host);
      w->push_back(b(Buf::X, 0));
      w->push_back(b(Buf::Att, 0));
      w->push_back(b(Buf::Att, 1));
      break;
    case OpKind::StoreKv:
      r->push_back(b(Buf::K, loc));
      r->push_back(b(Buf::V, loc));
      w->push_back(op.kv_slot >= 0 ? staging : (loc ? kv_dev : kv_host));
      break;
    case OpKind::Attention:
      r->push_back(b(Buf::Q, loc));
      r->push_back(op.kv_slot >= 0 ? staging : (loc ? kv_dev : kv_host));
      w->push_back(b(Buf::Att, loc));
      break;
    case OpKind::CopyRows: r->push_back(b(op.src, 1 - loc)); w->push_back(b(op.dst, loc)); break;
    case OpKind::CopyCols: r->push_back(b(op.src, 1)); w->push_back(b(op.dst, 0)); break;
    case OpKind::CopyWeight: w->push_back(slot); break;
    case OpKind::CopyKv: r->push_back(kv_host); w->push_back(staging); break;
    case OpKind::SaveActs: r->push_back(b(Buf::H, 0)); w->push_back(saved); break;
    // The device's recompute rows are one buffer shared by every layer: act(F32, device), which no
    // Convert ever writes, stands for it.
    case OpKind::CopyActs: r->push_back(saved); w->push_back(act(GgmlType::F32, 1)); break;
    case OpKind::RecomputeKv:
      r->push_back(act(GgmlType::F32, 1));
      for (int t = 1; t < static_cast<int>(GgmlType::COUNT); ++t) w->push_back(act(static_cast<GgmlType>(t), 1));
      w->push_back(staging);
      break;
  }
}

void Model::build_deps() {
  const int n_res = kKvBase + 3 * static_cast<int>(cfg_.n_layers) + 2;
  HazardTracker h(n_res);
  lanes_.clear();
  deps_.clear();
  lanes_.reserve(ops_.size());
  deps_.reserve(ops_.size());
  std::vector<int> r, w;
  for (size_t i = 0; i < ops_.size(); ++i) {
    r.clear();
    w.clear();
    op_resources(ops_[i], &r, &w);
    deps_.push_back(h.add(static_cast<int32_t>(i), ops_[i].lane, r, w, &lanes_));
  }
  group_gemvs();
  // Device kernels are recorded and submitted in batches: a submission ends after an op another
  // lane waits for (its result must be complete when the lane's event fires) and after the
  // step's last device op (with or without the LM head, which a step may skip).
  sync_after_.assign(ops_.size(), 0);
  if (dk_) {
    for (const LaneDeps& d : deps_) {
      const int32_t j = d.dep[static_cast<int>(Lane::Device)];
      if (j >= 0) sync_after_[static_cast<size_t>(j)] = 1;
    }
    int32_t last = -1, last_before_head = -1;
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (ops_[i].lane != Lane::Device) continue;
      last = static_cast<int32_t>(i);
      if (!ops_[i].after_last) last_before_head = static_cast<int32_t>(i);
    }
    if (last >= 0) sync_after_[static_cast<size_t>(last)] = 1;
    if (last_before_head >= 0) sync_after_[static_cast<size_t>(last_before_head)] = 1;
  }
  start_ns_.assign(ops_.size(), 0);
  end_ns_.assign(ops_.size(), 0);
  op_ns_.assign(ops_.size(), 0);
  op_calls_.assign(ops_.size(), 0);
}

void Model::group_gemvs() {
  // A follower may run as early as its leader: only where it waits for nothing on another lane
  // that its leader does not wait for too (its inputs are the leader's; what it overwrites is not
  // still being read elsewhere).
  auto joins = [&](size_t lead, size_t j) {
    const Op& a = ops_[lead];
    const Op& b = ops_[j];
    if (b.kind != OpKind::MatMul || !b.packed || b.loc != Loc::Host || b.lane != Lane::Cpu || b.part != 0) return false;
    if (b.src != a.src || b.act_type != a.act_type || b.after_last != a.after_last || b.w->cols != a.w->cols) return false;
    for (int l = 0; l < kLanes; ++l)
      if (l != static_cast<int>(Lane::Cpu) && deps_[j].dep[l] > deps_[lead].dep[l]) return false;
    return true;
  };
  for (Op& op : ops_) op.gemv_group = 0;
  if (!gemv_groups_enabled()) return;
  for (size_t i = 0; i < ops_.size(); ++i) {
    const Op& op = ops_[i];
    if (op.kind != OpKind::MatMul || !op.packed || op.loc != Loc::Host || op.lane != Lane::Cpu || op.part != 0 || op.act_type == GgmlType::F32) continue;
    size_t j = i + 1;
    while (j < ops_.size() && j - i < static_cast<size_t>(kMaxGemvGroup) && joins(i, j)) ++j;
    ops_[i].gemv_group = static_cast<int8_t>(j - i - 1);
    i = j - 1;
  }
}

void Model::exchange(Program& p) {
  std::swap(ops_, p.ops);
  std::swap(lanes_, p.lanes);
  std::swap(deps_, p.deps);
  std::swap(sync_after_, p.sync_after);
  std::swap(start_ns_, p.start_ns);
  std::swap(end_ns_, p.end_ns);
  std::swap(op_ns_, p.op_ns);
  std::swap(op_calls_, p.op_calls);
}

void Model::adopt_device_weights(const std::vector<Op>& decode) {
  // Device matmuls read the weight copies the decode program's do (resident copies, or the
  // same places in the streaming slots); its prefetches fill the same places.
  for (Op& op : ops_) {
    if (!((op.kind == OpKind::MatMul && op.loc == Loc::Dev) || op.kind == OpKind::CopyWeight)) continue;
    for (const Op& d : decode)
      if (d.kind == op.kind && d.w == op.w && d.loc == op.loc && (op.kind == OpKind::CopyWeight || d.r0 == op.r0)) {
        op.wdata = d.wdata;
        op.r1 = d.r1;
        break;
      }
  }
}

bool Model::layer_steps_supported() const {
  // A device with kernels of its own (Vulkan) keeps X in its memory: the layer edges copy their
  // rows on its copy lanes, and the window point is a host op, so compile copies X to the host
  // before it and back after. Streamed KV (and KVPR's recomputation over it) works on every row
  // of the layer's step.
  if (device_ && placement_.uses_device())
    for (const LayerPlacement& lp : placement_.layers)
      if (!lp.kv_by_sequence && lp.kv == Loc::Host && lp.op[kAttention].loc == Loc::Dev) return false;
  return true;
}

void Model::build_variant(Program& into, bool pipelined, bool layer_steps) {
  if (prefill_active_) swap_program();
  // The decode program aside in `into` while the variant compiles into ops_ …
  exchange(into);
  try {
    compile(pipelined, layer_steps);
    adopt_device_weights(into.ops);
    build_deps();
  } catch (...) {
    exchange(into);
    into = Program{};
    throw;
  }
  // … and back: the decode program runs, the variant waits in `into`.
  exchange(into);
}

bool Model::build_layer_steps() {
  if (layer_prog_state_ != 0) return layer_prog_state_ > 0;
  layer_prog_state_ = -1;
  if (!layer_steps_supported()) return false;
  build_variant(layer_prog_, false, true);
  layer_prog_state_ = 1;
  return true;
}

bool Model::build_pipelined() {
  if (pipe_state_ != 0) return pipe_state_ > 0;
  pipe_state_ = -1;
  if (!device_ || !placement_.uses_device() || placement_.layers.empty()) return false;
  for (const LayerPlacement& lp : placement_.layers)
    if (!lp.kv_by_sequence) return false;
  build_variant(pipe_, true, false);
  pipe_state_ = 1;
  size_t bytes = 0;
  for (const Layer& L : layers_)
    for (const Weight* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down, &L.gate_exps, &L.up_exps, &L.down_exps})
      bytes += w->row_bytes * static_cast<size_t>(w->rows);
  pipe_layer_bytes_ = bytes / std::max<size_t>(1, layers_.size());
  return true;
}

Model::OpInfo Model::op_info(int32_t i) const {
  const std::vector<Op>& decode = decode_program_ops();
  const std::vector<Op>& prefill_ops = prefill_program_ops();
  const size_t k = static_cast<size_t>(i);
  const size_t pipe_base = decode.size() + prefill_ops.size(), layer_base = pipe_base + pipe_.ops.size();
  const bool prefill = k >= decode.size() && k < pipe_base;
  const bool layered = k >= layer_base;
  const bool pipe = k >= pipe_base && !layered;
  const size_t local = layered ? k - layer_base : pipe ? k - pipe_base : prefill ? k - decode.size() : k;
  const Op& op = layered ? layer_prog_.ops[local] : pipe ? pipe_.ops[local] : prefill ? prefill_ops[local] : decode[local];
  // The running program's deps are deps_, the other's other_.deps (see Program).
  const std::vector<LaneDeps>& deps = layered ? layer_prog_.deps : pipe ? pipe_.deps : (prefill == prefill_active_) ? deps_ : other_.deps;
  OpInfo o;
  if (local < deps.size()) o.deps = deps[local];
  o.stage = layered ? "layer-by-layer" : pipe ? "pipelined" : prefill ? "prefill" : "decode";
  o.part = op.part;
  o.kind = op_kind_name(static_cast<int>(op.kind));
  o.lane = lane_name(op.lane);
  o.layer = op.layer;
  o.plan_op = op.layer < 0 && op.kind == OpKind::Embed ? "embed" : plan_op_name(op.plan_op);
  o.weight = op.w ? op.w->name.c_str() : nullptr;
  o.loc = op.loc == Loc::Host ? "host" : "device";
  o.gemv_group = op.gemv_group;
  return o;
}

}  // namespace fulcrum
