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

bool Placement::uses_device() const {
  if (head.loc == Loc::Dev) return true;
  for (const LayerPlacement& l : layers) {
    if (l.kv == Loc::Dev) return true;
    for (const OpPlacement& o : l.op)
      if (o.loc == Loc::Dev) return true;
  }
  return false;
}

namespace {
constexpr int kBufs = 9;
constexpr int kActBase = 2 * kBufs;
constexpr int kSlotBase = kActBase + 2 * static_cast<int>(GgmlType::COUNT);
constexpr int kKvBase = kSlotBase + 2;
int bit(Loc l) { return l == Loc::Host ? 1 : 2; }
Lane compute_lane(Loc l) { return l == Loc::Host ? Lane::Cpu : Lane::Device; }
Lane copy_lane(Loc dst) { return dst == Loc::Host ? Lane::ToHost : Lane::ToDevice; }
}  // namespace

float* Model::buf_at(Buf b, Loc l) {
  if (l == Loc::Host) return b == Buf::Logits ? step_state_.logits_out : buf(b);
  if (b == Buf::Logits) return dev_logits_;
  auto it = dev_bufs_.find(b);
  return it == dev_bufs_.end() ? nullptr : it->second;
}

uint8_t* Model::act_at(GgmlType t, Loc l) {
  if (l == Loc::Host) return act_[t].data();
  auto it = dev_act_.find(t);
  return it == dev_act_.end() ? nullptr : it->second;
}

KvCache& Model::kv_for(const Sequence& seq, int layer, int slot) {
  if (slot >= 0) return *seq.staging;
  switch (kv_cache_of_[static_cast<size_t>(layer)]) {
    case 1: return *seq.dev;
    case 2: return *seq.by_seq;
    default: return *seq.host;
  }
}

// Every sequence's KV caches for the current placement (all empty: positions are forgotten).
void Model::build_sequences() {
  const int64_t nl = cfg_.n_layers;
  kv_cache_of_.assign(static_cast<size_t>(nl), 0);
  kv_index_.assign(static_cast<size_t>(nl), 0);
  int counts[3] = {0, 0, 0};
  bool streamed = false, recompute = false;
  for (int64_t l = 0; l < nl; ++l) {
    int8_t c = 0;
    if (!placement_.layers.empty()) {
      const LayerPlacement& lp = placement_.layers[static_cast<size_t>(l)];
      c = lp.kv_by_sequence ? 2 : lp.kv == Loc::Dev ? 1 : 0;
      if (c == 0 && lp.op[kAttention].loc == Loc::Dev) {
        streamed = true;
        recompute = recompute || lp.recompute_prefix > 0;
      }
    }
    kv_cache_of_[static_cast<size_t>(l)] = c;
    kv_index_[static_cast<size_t>(l)] = counts[c]++;
  }
  const int64_t ctx = cfg_.context_length, kvh = cfg_.n_kv_heads, hd = cfg_.head_dim, pt = cfg_.kv_page_tokens;
  for (auto& sp : seqs_) {
    Sequence& q = *sp;
    q.host.reset();
    q.dev.reset();
    q.by_seq.reset();
    q.staging.reset();
    q.saved.clear();
    q.n_past = 0;
    // A cache for each kind of layer present (host always: the CPU path and fallbacks need it).
    q.host = std::make_unique<KvCache>(std::max(1, counts[0]), ctx, kvh, hd, pt);
    if (counts[1] > 0) q.dev = std::make_unique<KvCache>(counts[1], ctx, kvh, hd, pt, device_.get());
    if (counts[2] > 0) {
      if (q.kv_loc == Loc::Dev && device_) q.by_seq = std::make_unique<KvCache>(counts[2], ctx, kvh, hd, pt, device_.get());
      else q.by_seq = std::make_unique<KvCache>(counts[2], ctx, kvh, hd, pt);
    }
    if (streamed) q.staging = std::make_unique<KvCache>(2, ctx, kvh, hd, pt, device_.get());
    if (recompute) {
      q.saved.resize(static_cast<size_t>(nl));
      for (int64_t l = 0; l < nl; ++l) {
        const LayerPlacement& lp = placement_.layers[static_cast<size_t>(l)];
        if (kv_cache_of_[static_cast<size_t>(l)] == 0 && lp.op[kAttention].loc == Loc::Dev && lp.recompute_prefix > 0)
          q.saved[static_cast<size_t>(l)].assign(static_cast<size_t>(std::min(lp.recompute_prefix, ctx) * cfg_.n_embd), 0.f);
      }
    }
  }
}

void Model::set_sequence_kv(int32_t seq, Loc loc) {
  check_seq(seq, "setSequenceKv");
  if (loc == Loc::Dev && !device_) throw std::runtime_error("setSequenceKv: the model has no device");
  Sequence& q = *seqs_[static_cast<size_t>(seq)];
  q.kv_loc = loc;
  q.n_past = 0;
  q.by_seq.reset();
  int n = 0;
  for (int8_t c : kv_cache_of_) n += c == 2;
  if (n == 0) return;
  const int64_t ctx = cfg_.context_length, kvh = cfg_.n_kv_heads, hd = cfg_.head_dim, pt = cfg_.kv_page_tokens;
  if (loc == Loc::Dev) q.by_seq = std::make_unique<KvCache>(n, ctx, kvh, hd, pt, device_.get());
  else q.by_seq = std::make_unique<KvCache>(n, ctx, kvh, hd, pt);
  if (q.host) q.host->release_from(0);
  if (q.dev) q.dev->release_from(0);
  if (q.staging) q.staging->release_from(0);
}

void Model::swap_sequence_kv(int32_t seq, Loc loc) {
  check_seq(seq, "swapSequenceKv");
  if (loc == Loc::Dev && !device_) throw std::runtime_error("swapSequenceKv: the model has no device");
  Sequence& q = *seqs_[static_cast<size_t>(seq)];
  if (q.kv_loc == loc || !q.by_seq) {
    q.kv_loc = loc;
    return;
  }
  const int64_t ctx = cfg_.context_length, kvh = cfg_.n_kv_heads, hd = cfg_.head_dim, pt = cfg_.kv_page_tokens;
  auto moved = loc == Loc::Dev ? std::make_unique<KvCache>(q.by_seq->n_layers(), ctx, kvh, hd, pt, device_.get())
                               : std::make_unique<KvCache>(q.by_seq->n_layers(), ctx, kvh, hd, pt);
  const int64_t n = q.n_past.load();
  moved->hold(n);  // throws DeviceError when the device is full; nothing has changed then
  const size_t bytes = moved->page_bytes();
  for (int64_t l = 0; l < moved->n_layers(); ++l) {
    const KvPages from = q.by_seq->pages(l), to = moved->pages(l);
    for (int64_t p = 0; p < moved->held_pages(); ++p) {
      // K and V of a page are one block (V follows K): one copy per page.
      if (loc == Loc::Dev) device_->copy_to_device(const_cast<uint16_t*>(to.k[p]), from.k[p], bytes);
      else device_->copy_to_host(const_cast<uint16_t*>(to.k[p]), from.k[p], bytes);
    }
  }
  q.by_seq = std::move(moved);
  q.kv_loc = loc;
}

void Model::check_seq(int32_t seq, const char* what) const {
  if (seq < 0 || seq >= static_cast<int32_t>(seqs_.size()))
    throw std::runtime_error(std::string(what) + ": sequence " + std::to_string(seq) + " is outside [0, " + std::to_string(seqs_.size()) +
                             ") (the model was loaded for " + std::to_string(seqs_.size()) + " sequences)");
}

int64_t Model::device_rows(const Weight& w, const OpPlacement& o) const {
  if (o.loc != Loc::Dev) return 0;
  int64_t r = o.dev_fraction >= 1.0 ? w.rows : std::llround(static_cast<double>(w.rows) * o.dev_fraction);
  r = std::max<int64_t>(0, std::min(w.rows, r));
  // The CPU reads a repacked weight by whole row groups (quant/repack.h): the split lands on a
  // group edge (the nearest; rows is a whole number of groups).
  if (w.cpu_layout != WeightLayout::Gguf) {
    const int64_t g = quant::packed_format(w.type)->group_rows;
    r = (r + g / 2) / g * g;
  }
  return r;
}

const uint8_t* Model::device_weight_bytes(const Weight& w) const { return dk_ ? w.data : w.cpu_data; }

void Model::compile() {
  ops_.clear();
  const bool dev = device_ != nullptr && placement_.uses_device();
  const int64_t E = cfg_.n_embd, QW = cfg_.n_heads * cfg_.head_dim, F = cfg_.n_ff;
  auto place = [&](int layer, int op) -> OpPlacement {
    if (!dev) return OpPlacement{};
    if (layer < 0) return placement_.head;
    return placement_.layers[static_cast<size_t>(layer)].op[op];
  };
  int valid[kBufs];
  int version[kBufs] = {};
  for (int& v : valid) v = 1;
  // Which buffer (and version of it) each converted-activation buffer holds, per location.
  std::map<std::pair<GgmlType, Loc>, std::pair<Buf, int>> act_state;
  bool after_last = false;
  int cur_plan_op = -1, cur_layer = -1;
  auto push = [&](Op op) {
    op.after_last = after_last;
    op.layer = cur_layer;
    if (op.plan_op < 0) op.plan_op = static_cast<int8_t>(cur_plan_op);
    ops_.push_back(op);
  };
  auto need = [&](Buf b, Loc l) {
    const int bi = static_cast<int>(b);
    if (valid[bi] & bit(l)) return;
    Op c{OpKind::CopyRows};
    c.src = c.dst = b;
    c.loc = l;
    c.lane = copy_lane(l);
    c.width = width(b);
    push(c);
    valid[bi] |= bit(l);
  };
  auto wrote = [&](Buf b, Loc l) {
    valid[static_cast<int>(b)] = bit(l);
    ++version[static_cast<int>(b)];
  };
  // Where a helper op on buffer b runs: on the device when b is there only, else on the host.
  auto home = [&](Buf b) { return valid[static_cast<int>(b)] == 2 ? Loc::Dev : Loc::Host; };
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
    auto it = act_state.find(key);
    if (it != act_state.end() && it->second == std::make_pair(src, version[static_cast<int>(src)])) return;
    need(src, l);
    Op c{OpKind::Convert};
    c.src = c.dst = src;
    c.act_type = t;
    c.width = w;
    c.loc = l;
    c.lane = compute_lane(l);
    push(c);
    act_state[key] = {src, version[static_cast<int>(src)]};
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
  std::vector<size_t> layer_start(static_cast<size_t>(cfg_.n_layers) + 1, 0);
  for (int l = 0; l < static_cast<int>(cfg_.n_layers); ++l) {
    Layer& L = layers_[static_cast<size_t>(l)];
    const LayerPlacement* lp = dev ? &placement_.layers[static_cast<size_t>(l)] : nullptr;
    cur_layer = l;
    layer_start[static_cast<size_t>(l)] = ops_.size();
    const Loc attn_loc = place(l, kAttention).loc;
    const bool kv_streamed = lp && !lp->kv_by_sequence && attn_loc == Loc::Dev && lp->kv == Loc::Host;
    const bool recompute = kv_streamed && lp->recompute_prefix > 0;

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
    // K and V of the new positions into the layer's KV (and, when it is streamed, into the
    // staging slot the device's attention reads).
    cur_plan_op = kAttention;
    const bool by_seq = lp && lp->kv_by_sequence;
    if (by_seq) {
      // NEO: device-KV sequences' rows store and attend on the device, host-KV ones on the CPU,
      // at the same time; the CPU's attention rows then join the device's (or the reverse).
      for (Loc l : {Loc::Dev, Loc::Host}) {
        need(Buf::K, l);
        need(Buf::V, l);
        Op s{OpKind::StoreKv};
        s.src = Buf::K;
        s.dst = Buf::V;
        s.loc = l;
        s.lane = compute_lane(l);
        s.part = l == Loc::Dev ? 1 : 2;
        push(s);
      }
      for (Loc l : {Loc::Dev, Loc::Host}) {
        need(Buf::Q, l);
        Op a{OpKind::Attention};
        a.src = Buf::Q;
        a.dst = Buf::Att;
        a.loc = l;
        a.lane = compute_lane(l);
        a.part = l == Loc::Dev ? 1 : 2;
        push(a);
      }
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
    }
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
  cur_layer = -1;
  cur_plan_op = -1;
  layer_start[static_cast<size_t>(cfg_.n_layers)] = ops_.size();
  {
    const Loc xl = home(Buf::X);
    compute(OpKind::LastRows, xl, Buf::X, Buf::X);
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
      if (pp.loc != Loc::Dev || pp.weights != WeightHome::Streamed || !w->data) return;
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
      for (size_t i = 0; i < ops_.size(); ++i) {
        if (ops_[i].layer != prev) continue;
        if (!found) at = i;  // the layer's first op: insert before its first op when it has no copy in
        if (ops_[i].lane == Lane::ToDevice) { at = i + 1; found = true; }
      }
      insert_after[g] = at;
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

Model::~Model() {
  release_device();
  seqs_.clear();
  device_.reset();
}

void Model::release_device() {
  if (device_) {
    for (void* p : dev_allocs_) device_->free(p);
  }
  dev_allocs_.clear();
  dev_bufs_.clear();
  dev_act_.clear();
  resident_.clear();
  dev_logits_ = nullptr;
  slots_[0] = slots_[1] = nullptr;
  // Device KV pages go back before the device does (the caches free them to it).
  for (auto& q : seqs_) {
    q->dev.reset();
    q->staging.reset();
    if (q->by_seq && q->kv_loc == Loc::Dev) q->by_seq.reset();
  }
  dev_recompute_ = dev_rk_ = dev_rv_ = nullptr;
  recompute_rows_ = 0;
  dk_ = nullptr;
  dev_vecs_.clear();
  dev_gather_k_ = dev_gather_v_ = nullptr;
  dev_page_table_ = nullptr;
  recompute_w_.clear();
  dev_moe_ = DeviceMoe{};
}

void Model::set_placement(const Placement& p, std::unique_ptr<Device> device) {
  const int64_t nl = cfg_.n_layers;
  if (!p.layers.empty() && static_cast<int64_t>(p.layers.size()) != nl)
    throw std::runtime_error("placement: " + std::to_string(p.layers.size()) + " layers given, the model has " + std::to_string(nl));
  for (size_t l = 0; l < p.layers.size(); ++l) {
    const LayerPlacement& lp = p.layers[l];
    for (int o = 0; o < kPlanOps; ++o)
      if (!(lp.op[o].dev_fraction >= 0 && lp.op[o].dev_fraction <= 1))
        throw std::runtime_error("placement: layer " + std::to_string(l) + " op " + plan_op_name(o) + ": device fraction " +
                                 std::to_string(lp.op[o].dev_fraction) + " is outside [0, 1]");
    if (lp.kv == Loc::Dev && lp.op[kAttention].loc == Loc::Host)
      throw std::runtime_error("placement: layer " + std::to_string(l) + " keeps its KV on the device but runs attention on the CPU; put the KV on the host");
    if (lp.recompute_prefix < 0) throw std::runtime_error("placement: layer " + std::to_string(l) + ": negative recompute prefix");
    if (lp.kv_by_sequence && (lp.op[kAttention].loc != Loc::Dev || lp.recompute_prefix > 0))
      throw std::runtime_error("placement: layer " + std::to_string(l) +
                               " places its KV by sequence, which needs attention on the device for device-KV sequences and no KV recompute");
  }
  if (p.uses_device() && !device) throw std::runtime_error("placement: ops are placed on the device but no device was given");

  release_device();
  placement_ = Placement{};
  device_.reset();
  for (auto& q : seqs_) q->kv_loc = Loc::Host;
  auto host_only = [&] {
    release_device();
    placement_notes_.clear();
    placement_ = Placement{};
    device_.reset();
    for (auto& q : seqs_) q->kv_loc = Loc::Host;
    build_sequences();
    compile();
    build_deps();
  };
  if (!p.uses_device()) {
    host_only();
    return;
  }
  placement_ = p;
  device_ = std::move(device);
  placement_notes_.clear();
  try {
    Device& d = *device_;
    dk_ = d.kernels();
    // MoE layers: the MoE FFN (router and every expert) runs on the device with its weights
    // resident there. Streaming expert weights is not executed: such a layer's experts run on
    // the CPU, noted.
    if (variant_->ffn == FfnKind::Moe)
      for (int64_t l = 0; l < nl; ++l) {
        OpPlacement& o = placement_.layers[static_cast<size_t>(l)].op[kUp];
        if (o.loc != Loc::Dev) continue;
        if (o.weights != WeightHome::Resident) {
          placement_notes_.push_back("layer " + std::to_string(l) + " experts: the plan streams expert weights, which the executor does not; they run on the CPU");
          o = OpPlacement{};
        } else if (o.dev_fraction < 1.0) {
          // Decision: a layer's experts run on one side; a plan that keeps some of them in VRAM
          // and the rest in host memory runs the layer's experts on the CPU (within the budget
          // the plan made) until the executor splits an MoE layer by expert.
          placement_notes_.push_back("layer " + std::to_string(l) + " experts: the plan splits them between the GPU and the CPU, which the executor does not; they run on the CPU");
          o = OpPlacement{};
        }
      }
    if (dk_) {
      // Matmuls on weight formats the device has no kernel for run on the CPU instead.
      auto demote = [&](OpPlacement& o, const Weight& w, const std::string& where) {
        if (o.loc != Loc::Dev || !w.data || dk_->runs(w.type)) return;
        o = OpPlacement{};
        placement_notes_.push_back(where + " (" + w.name + ", " + type_traits(w.type).name + "): the " + d.info().name +
                                   " device has no kernel for this format; it runs on the CPU");
      };
      for (int64_t l = 0; l < nl; ++l) {
        Layer& L = layers_[static_cast<size_t>(l)];
        LayerPlacement& lp = placement_.layers[static_cast<size_t>(l)];
        const std::pair<int, const Weight*> ws[] = {{kQ, &L.wq}, {kK, &L.wk}, {kV, &L.wv}, {kOutput, &L.wo}, {kGate, &L.gate}, {kUp, &L.up}, {kDown, &L.down}};
        for (auto& [op, w] : ws) demote(lp.op[op], *w, "layer " + std::to_string(l) + " " + plan_op_name(op));
      }
      demote(placement_.head, output_, "LM head");
      if (variant_->ffn == FfnKind::Moe)
        for (int64_t l = 0; l < nl; ++l) {
          Layer& L = layers_[static_cast<size_t>(l)];
          OpPlacement& o = placement_.layers[static_cast<size_t>(l)].op[kUp];
          for (const Weight* w : {&L.router, &L.gate_exps, &L.up_exps, &L.down_exps}) demote(o, *w, "layer " + std::to_string(l) + " experts");
        }
      if (cfg_.head_dim > 256 || cfg_.head_dim % 2)
        throw DeviceError(d.info().name + ": attention kernels need an even head size of at most 256; this model's is " + std::to_string(cfg_.head_dim));
    }
    auto alloc = [&](size_t bytes, const std::string& what) {
      void* q = d.alloc(bytes, what);
      dev_allocs_.push_back(q);
      return q;
    };
    const int64_t B = std::min(cfg_.batch_size, kDeviceRows), E = cfg_.n_embd;
    // Device activations, for every buffer (a few MB; a real GPU needs them too).
    for (Buf b : {Buf::X, Buf::H, Buf::Q, Buf::K, Buf::V, Buf::Att, Buf::Gate, Buf::Up})
      dev_bufs_[b] = static_cast<float*>(alloc(static_cast<size_t>(B * width(b)) * sizeof(float), "device activations"));
    // Logits rows: one per sequence, or every row of a step that wants all logits (speculative
    // verification), capped so the vocabulary-wide buffer stays small (64 rows of 152k = 39 MiB).
    dev_logit_rows_ = std::min(B, std::max<int64_t>(cfg_.max_sequences, 16));
    if (placement_.head.loc == Loc::Dev) dev_logits_ = static_cast<float*>(alloc(static_cast<size_t>(dev_logit_rows_ * cfg_.n_vocab) * sizeof(float), "device logits"));
    // Resident weights, and the per-layer bytes of streamed ones (two slots of the largest layer).
    std::vector<std::pair<const Weight*, OpPlacement>> mats;
    for (int64_t l = 0; l < nl; ++l) {
      Layer& L = layers_[static_cast<size_t>(l)];
      const LayerPlacement& lp = placement_.layers[static_cast<size_t>(l)];
      mats.push_back({&L.wq, lp.op[kQ]});
      mats.push_back({&L.wk, lp.op[kK]});
      mats.push_back({&L.wv, lp.op[kV]});
      mats.push_back({&L.wo, lp.op[kOutput]});
      mats.push_back({&L.gate, lp.op[kGate]});
      mats.push_back({&L.up, lp.op[kUp]});
      mats.push_back({&L.down, lp.op[kDown]});
    }
    mats.push_back({&output_, placement_.head});
    std::set<GgmlType> dev_types;
    size_t slot_bytes = 0;
    std::vector<size_t> layer_stream(static_cast<size_t>(nl) + 1, 0);
    for (size_t i = 0; i < mats.size(); ++i) {
      const Weight* w = mats[i].first;
      const OpPlacement& o = mats[i].second;
      const int64_t r = device_rows(*w, o);
      if (r == 0) continue;
      dev_types.insert(type_traits(w->type).vec_dot_type);
      const size_t bytes = w->row_bytes * static_cast<size_t>(r);
      if (o.weights == WeightHome::Resident) {
        auto* q = static_cast<uint8_t*>(alloc(bytes, "resident weight '" + w->name + "'"));
        d.copy_to_device(q, device_weight_bytes(*w), bytes);
        resident_[w] = q;
      } else {
        const size_t g = i / 7 < static_cast<size_t>(nl) ? i / 7 : static_cast<size_t>(nl);
        layer_stream[g] += (bytes + 63) / 64 * 64;
      }
    }
    // MoE layers with their experts on the device: router and expert tensors resident, and the
    // MoE scratch of a device step (the host's routing decisions and, for a device with its own
    // kernels, device buffers for gathered rows, expert outputs and each (token, slot)'s result).
    bool moe_on_device = false;
    if (variant_->ffn == FfnKind::Moe)
      for (int64_t l = 0; l < nl; ++l) {
        if (placement_.layers[static_cast<size_t>(l)].op[kUp].loc != Loc::Dev) continue;
        Layer& L = layers_[static_cast<size_t>(l)];
        for (const Weight* w : {&L.router, &L.gate_exps, &L.up_exps, &L.down_exps}) {
          const size_t bytes = w->row_bytes * static_cast<size_t>(w->rows);
          auto* q = static_cast<uint8_t*>(alloc(bytes, "resident weight '" + w->name + "'"));
          d.copy_to_device(q, device_weight_bytes(*w), bytes);
          resident_[w] = q;
        }
        moe_on_device = true;
      }
    if (moe_on_device) {
      const MoeShape ms{E, cfg_.n_ff, cfg_.n_expert, cfg_.n_expert_used};
      moe_dev_.reserve(ms, moe_weights(layers_[0], Loc::Host), B);
      if (dk_) {
        auto f32 = [&](int64_t n, const char* what) { return static_cast<float*>(alloc(static_cast<size_t>(n) * sizeof(float), what)); };
        dev_moe_.logits = f32(B * ms.n_expert, "MoE router scores");
        dev_moe_.xg = f32(B * E, "MoE gathered rows");
        dev_moe_.g = f32(B * ms.n_ff, "MoE gate");
        dev_moe_.u = f32(B * ms.n_ff, "MoE up");
        dev_moe_.y = f32(B * E, "MoE expert outputs");
        dev_moe_.ys = f32(B * ms.n_used * E, "MoE weighted outputs");
        dev_moe_.wt = f32(B * ms.n_used, "MoE weights");
        dev_moe_.idx = static_cast<uint32_t*>(alloc(static_cast<size_t>(2 * B * ms.n_used) * sizeof(uint32_t), "MoE row indices"));
      }
    }
    for (size_t s : layer_stream) slot_bytes = std::max(slot_bytes, s);
    if (slot_bytes > 0)
      for (int s = 0; s < 2; ++s) slots_[s] = static_cast<uint8_t*>(alloc(slot_bytes, "a streamed-weight slot"));
    for (GgmlType t : dev_types)
      if (t != GgmlType::F32 && !dk_)
        dev_act_[t] = static_cast<uint8_t*>(alloc(converted_bytes(t, std::max({E, cfg_.n_heads * cfg_.head_dim, cfg_.n_ff}), B), "device converted activations"));
    // KV: every sequence's caches (device pages are taken from the budget as positions are written).
    build_sequences();
    int64_t most = 0;
    for (int64_t l = 0; l < nl; ++l) {
      const LayerPlacement& lp = placement_.layers[static_cast<size_t>(l)];
      if (kv_cache_of_[static_cast<size_t>(l)] == 0 && lp.op[kAttention].loc == Loc::Dev)
        most = std::max(most, std::min(lp.recompute_prefix, cfg_.context_length));
    }
    if (most > 0) {
      recompute_rows_ = most;
      dev_recompute_ = static_cast<float*>(alloc(static_cast<size_t>(most * E * cfg_.max_sequences) * sizeof(float), "KVPR activations being recomputed"));
      const int64_t KVW = cfg_.n_kv_heads * cfg_.head_dim;
      dev_rk_ = static_cast<float*>(alloc(static_cast<size_t>(B * KVW) * sizeof(float), "KVPR recomputed K"));
      dev_rv_ = static_cast<float*>(alloc(static_cast<size_t>(B * KVW) * sizeof(float), "KVPR recomputed V"));
      for (GgmlType t : {type_traits(layers_[0].wk.type).vec_dot_type, type_traits(layers_[0].wv.type).vec_dot_type})
        if (t != GgmlType::F32 && !dev_act_.count(t) && !dk_)
          dev_act_[t] = static_cast<uint8_t*>(alloc(converted_bytes(t, E, B), "device converted activations"));
    }
    if (dk_) {
      // Norm weights and biases the device's ops read.
      auto up_vec = [&](const std::vector<float>& v) {
        if (v.empty() || dev_vecs_.count(v.data())) return;
        auto* q = static_cast<float*>(alloc(v.size() * sizeof(float), "device norm weights and biases"));
        d.copy_to_device(q, v.data(), v.size() * sizeof(float));
        dev_vecs_[v.data()] = q;
      };
      for (Layer& L : layers_)
        for (const std::vector<float>* v : {&L.attn_norm_f, &L.ffn_norm_f, &L.bq, &L.bk, &L.bv, &L.q_norm_f, &L.k_norm_f, &L.attn_norm_b, &L.ffn_norm_b,
                                            &L.bo, &L.bup, &L.bdown, &L.attn_post_norm_f, &L.ffn_post_norm_f})
          up_vec(*v);
      up_vec(output_norm_f_);
      up_vec(output_norm_b_);
      bool dev_attention = false;
      for (const LayerPlacement& lp : placement_.layers) dev_attention = dev_attention || lp.op[kAttention].loc == Loc::Dev;
      if (dev_attention) {
        const int64_t pt = cfg_.kv_page_tokens, pages = (cfg_.context_length + pt - 1) / pt;
        const size_t half = static_cast<size_t>(pt * cfg_.n_kv_heads * cfg_.head_dim) * sizeof(uint16_t);
        dev_gather_k_ = static_cast<uint16_t*>(alloc(half * static_cast<size_t>(pages), "attention's K pool"));
        dev_gather_v_ = static_cast<uint16_t*>(alloc(half * static_cast<size_t>(pages), "attention's V pool"));
        std::vector<uint32_t> table(static_cast<size_t>(pages));
        for (int64_t i = 0; i < pages; ++i) table[static_cast<size_t>(i)] = static_cast<uint32_t>(static_cast<size_t>(i) * half / 4);
        dev_page_table_ = static_cast<uint32_t*>(alloc(table.size() * sizeof(uint32_t), "attention's page table"));
        d.copy_to_device(dev_page_table_, table.data(), table.size() * sizeof(uint32_t));
      }
      // KVPR recomputes K and V on the device from W_K and W_V: the resident copies where they
      // hold every row, else copies of their own.
      for (int64_t l = 0; l < nl && recompute_rows_ > 0; ++l) {
        const LayerPlacement& lp = placement_.layers[static_cast<size_t>(l)];
        if (kv_cache_of_[static_cast<size_t>(l)] != 0 || lp.op[kAttention].loc != Loc::Dev || lp.recompute_prefix == 0) continue;
        Layer& L = layers_[static_cast<size_t>(l)];
        for (const Weight* w : {&L.wk, &L.wv}) {
          if (!dk_->runs(w->type)) throw DeviceError(d.info().name + ": KV recomputation needs a kernel for " + w->name + "'s format");
          auto it = resident_.find(w);
          const bool whole = it != resident_.end() && lp.op[w == &L.wk ? kK : kV].dev_fraction >= 1.0;
          if (whole) {
            recompute_w_[w] = it->second;
            continue;
          }
          const size_t bytes = w->row_bytes * static_cast<size_t>(w->rows);
          auto* q = static_cast<uint8_t*>(alloc(bytes, "KVPR's copy of '" + w->name + "'"));
          d.copy_to_device(q, w->data, bytes);
          recompute_w_[w] = q;
        }
      }
    }
    dev_attn_scratch_.reserve(attention_shape(), cfg_.context_length, B, d.pool().size());
    compile();
    // Streamed weights' places in their slot (the same offsets in both slots).
    std::map<int, size_t> fill;
    for (Op& op : ops_) {
      if (op.kind != OpKind::MatMul || op.loc != Loc::Dev) continue;
      auto it = resident_.find(op.w);
      if (it != resident_.end()) {
        op.wdata = it->second;
        continue;
      }
      const int g = op.layer < 0 ? static_cast<int>(nl) : op.layer;
      size_t& off = fill[g];
      op.wdata = slots_[g % 2] + off;
      off += (op.w->row_bytes * static_cast<size_t>(op.r1) + 63) / 64 * 64;
    }
    for (Op& c : ops_)
      if (c.kind == OpKind::CopyWeight)
        for (const Op& m : ops_)
          if (m.kind == OpKind::MatMul && m.loc == Loc::Dev && m.w == c.w) {
            c.r1 = m.r1;
            c.wdata = m.wdata;
          }
    build_deps();
    d.reset_peak();
  } catch (...) {
    host_only();
    throw;
  }
}

void Model::set_tracing(bool on, size_t max_events) {
  tracing_ = on;
  max_trace_ = max_events;
  if (!on) trace_.clear();
}

Model::OpInfo Model::op_info(int32_t i) const {
  const Op& op = ops_[static_cast<size_t>(i)];
  OpInfo o;
  o.kind = op_kind_name(static_cast<int>(op.kind));
  o.lane = lane_name(op.lane);
  o.layer = op.layer;
  o.plan_op = op.layer < 0 && op.kind == OpKind::Embed ? "embed" : plan_op_name(op.plan_op);
  o.weight = op.w ? op.w->name.c_str() : nullptr;
  o.loc = op.loc == Loc::Host ? "host" : "device";
  return o;
}

}  // namespace fulcrum
