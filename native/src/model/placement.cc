// Placement: the device resources a placement takes (resident weights, streaming slots,
// activations, KV pages, Vulkan pools), each allocation checked against the device budget,
// then the op list compiled under it (compile.cc); giving them back.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <set>
#include <stdexcept>
#include <tuple>

#include "kernels/float_fns.h"
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
  dev_moe_ = MoeBuffers{};
}

void Model::set_placement(const Placement& p, std::unique_ptr<Device> device) { set_placements(p, nullptr, 0, std::move(device)); }

void Model::set_placements(const Placement& p, const Placement* prefill, int64_t prefill_rows, std::unique_ptr<Device> device) {
  const int64_t nl = cfg_.n_layers;
  if (prefill) {
    if (static_cast<int64_t>(prefill->layers.size()) != nl || p.layers.empty())
      throw std::runtime_error("placement: the prefill placement has " + std::to_string(prefill->layers.size()) + " layers, the model " + std::to_string(nl) +
                               (p.layers.empty() ? ", and there is no decode placement beside it" : ""));
    if (prefill_rows < 1) throw std::runtime_error("placement: prefill rows must be at least 1, got " + std::to_string(prefill_rows));
  }
  if (prefill_active_) swap_program();
  has_prefill_ = false;
  other_ = Program{};
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
  const bool uses_device = p.uses_device() || (prefill && prefill->uses_device());
  if (uses_device && !device) throw std::runtime_error("placement: ops are placed on the device but no device was given");
  if (uses_device && cfg_.kv_format != KvFormat::F16) {
    // Prefill takes the decode placement's attention (below): the decode layers decide.
    const std::vector<std::string>& formats = device->info().kv_formats;
    const char* fmt = kv_format_name(cfg_.kv_format);
    std::string names;
    for (const std::string& f : formats) names += (names.empty() ? "" : ", ") + f;
    if (std::find(formats.begin(), formats.end(), fmt) == formats.end())
      for (size_t l = 0; l < p.layers.size(); ++l)
        if (p.layers[l].op[kAttention].loc == Loc::Dev)
          throw std::runtime_error("placement: layer " + std::to_string(l) + " runs attention on the device (" + device->info().name +
                                   "), whose attention reads " + names + " KV only, and this model's KV cache is " + fmt +
                                   " (kvFormat): keep attention on the CPU, or load the model with kvFormat F16");
  }

  release_device();
  placement_ = Placement{};
  device_.reset();
  for (auto& q : seqs_) q->kv_loc = Loc::Host;
  auto host_only = [&] {
    if (prefill_active_) swap_program();
    has_prefill_ = false;
    other_ = Program{};
    release_device();
    placement_notes_.clear();
    placement_ = Placement{};
    device_.reset();
    for (auto& q : seqs_) q->kv_loc = Loc::Host;
    build_sequences();
    compile();
    build_deps();
  };
  if (!uses_device) {
    host_only();
    return;
  }
  placement_ = p;
  device_ = std::move(device);
  placement_notes_.clear();
  if (prefill) {
    // Prefill shares the decode placement's KV (where it lives, by sequence, KVPR's prefix) and
    // so its attention: KV does not move between steps.
    prefill_placement_ = *prefill;
    prefill_placement_.head.dev_fraction = std::max(0.0, std::min(1.0, prefill_placement_.head.dev_fraction));
    for (int64_t l = 0; l < nl; ++l) {
      LayerPlacement& q = prefill_placement_.layers[static_cast<size_t>(l)];
      const LayerPlacement& dl = placement_.layers[static_cast<size_t>(l)];
      for (int o = 0; o < kPlanOps; ++o) q.op[o].dev_fraction = std::max(0.0, std::min(1.0, q.op[o].dev_fraction));
      q.kv = dl.kv;
      q.kv_by_sequence = dl.kv_by_sequence;
      q.recompute_prefix = dl.recompute_prefix;
      q.op[kAttention] = dl.op[kAttention];
    }
    has_prefill_ = true;
    prefill_rows_ = prefill_rows;
  }
  std::vector<Placement*> targets{&placement_};
  if (has_prefill_) targets.push_back(&prefill_placement_);
  try {
    Device& d = *device_;
    dk_ = d.kernels();
    for (Placement* P : targets) {
    const char* const stage = P == &placement_ ? "" : "prefill: ";
    // MoE layers: the MoE FFN (router and every expert) runs on the device with its weights
    // resident there. Streaming expert weights is not executed: such a layer's experts run on
    // the CPU, noted.
    if (variant_->ffn == FfnKind::Moe)
      for (int64_t l = 0; l < nl; ++l) {
        OpPlacement& o = P->layers[static_cast<size_t>(l)].op[kUp];
        if (o.loc != Loc::Dev) continue;
        if (o.weights != WeightHome::Resident) {
          placement_notes_.push_back(stage + std::string("layer ") + std::to_string(l) + " experts: the plan streams expert weights, which the executor does not; they run on the CPU");
          o = OpPlacement{};
        } else if (o.dev_fraction < 1.0) {
          // Decision: a layer's experts run on one side; a plan that keeps some of them in VRAM
          // and the rest in host memory runs the layer's experts on the CPU (within the budget
          // the plan made) until the executor splits an MoE layer by expert.
          placement_notes_.push_back(stage + std::string("layer ") + std::to_string(l) + " experts: the plan splits them between the GPU and the CPU, which the executor does not; they run on the CPU");
          o = OpPlacement{};
        }
      }
    if (dk_) {
      // Matmuls on weight formats the device has no kernel for run on the CPU instead.
      auto demote = [&](OpPlacement& o, const Weight& w, const std::string& where) {
        if (o.loc != Loc::Dev || !w.data || dk_->runs(w.type)) return;
        o = OpPlacement{};
        placement_notes_.push_back(stage + where + " (" + w.name + ", " + type_traits(w.type).name + "): the " + d.info().name +
                                   " device has no kernel for this format; it runs on the CPU");
      };
      for (int64_t l = 0; l < nl; ++l) {
        Layer& L = layers_[static_cast<size_t>(l)];
        LayerPlacement& lp = P->layers[static_cast<size_t>(l)];
        const std::pair<int, const Weight*> ws[] = {{kQ, &L.wq}, {kK, &L.wk}, {kV, &L.wv}, {kOutput, &L.wo}, {kGate, &L.gate}, {kUp, &L.up}, {kDown, &L.down}};
        for (auto& [op, w] : ws) demote(lp.op[op], *w, "layer " + std::to_string(l) + " " + plan_op_name(op));
      }
      demote(P->head, output_, "LM head");
      if (variant_->ffn == FfnKind::Moe)
        for (int64_t l = 0; l < nl; ++l) {
          Layer& L = layers_[static_cast<size_t>(l)];
          OpPlacement& o = P->layers[static_cast<size_t>(l)].op[kUp];
          for (const Weight* w : {&L.router, &L.gate_exps, &L.up_exps, &L.down_exps}) demote(o, *w, "layer " + std::to_string(l) + " experts");
        }
    }
    }
    if (dk_ && (cfg_.head_dim > 256 || cfg_.head_dim % 2))
      throw DeviceError(d.info().name + ": attention kernels need an even head size of at most 256; this model's is " + std::to_string(cfg_.head_dim));
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
    if (placement_.head.loc == Loc::Dev || (has_prefill_ && prefill_placement_.head.loc == Loc::Dev)) dev_logits_ = static_cast<float*>(alloc(static_cast<size_t>(dev_logit_rows_ * cfg_.n_vocab) * sizeof(float), "device logits"));
    // Resident weights (of either placement, with the more rows), and the per-layer bytes of
    // streamed ones (two slots of the largest layer of either placement).
    auto mats_of = [&](const Placement& P) {
      std::vector<std::pair<const Weight*, OpPlacement>> mats;
      for (int64_t l = 0; l < nl; ++l) {
        Layer& L = layers_[static_cast<size_t>(l)];
        const LayerPlacement& lp = P.layers[static_cast<size_t>(l)];
        for (auto [w, op] : {std::pair<const Weight*, int>{&L.wq, kQ}, {&L.wk, kK}, {&L.wv, kV}, {&L.wo, kOutput}, {&L.gate, kGate}, {&L.up, kUp}, {&L.down, kDown}})
          mats.push_back({w, lp.op[op]});
      }
      mats.push_back({&output_, P.head});
      return mats;
    };
    std::set<GgmlType> dev_types;
    size_t slot_bytes = 0;
    std::map<const Weight*, int64_t> resident_rows;
    for (Placement* P : targets)
      for (auto& [w, o] : mats_of(*P)) {
        const int64_t r = device_rows(*w, o);
        if (r == 0) continue;
        dev_types.insert(type_traits(w->type).vec_dot_type);
        if (o.weights == WeightHome::Resident) resident_rows[w] = std::max(resident_rows[w], r);
      }
    // A weight resident for one placement is read from its copy by the other too (never streamed
    // beside it): the copy holds the rows either places on the device.
    for (Placement* P : targets)
      for (auto& [w, o] : mats_of(*P))
        if (auto it = resident_rows.find(w); it != resident_rows.end()) it->second = std::max(it->second, device_rows(*w, o));
    for (auto [w, r] : resident_rows) {
      const size_t bytes = w->row_bytes * static_cast<size_t>(r);
      auto* q = static_cast<uint8_t*>(alloc(bytes, "resident weight '" + w->name + "'"));
      d.copy_to_device(q, device_weight_bytes(*w), bytes);
      resident_[w] = q;
    }
    for (Placement* P : targets) {
      std::vector<size_t> layer_stream(static_cast<size_t>(nl) + 1, 0);
      const auto mats = mats_of(*P);
      for (size_t i = 0; i < mats.size(); ++i) {
        const Weight* w = mats[i].first;
        const int64_t r = device_rows(*w, mats[i].second);
        if (r == 0 || mats[i].second.weights == WeightHome::Resident || resident_.count(w)) continue;
        const size_t g = i / 7 < static_cast<size_t>(nl) ? i / 7 : static_cast<size_t>(nl);
        layer_stream[g] += (w->row_bytes * static_cast<size_t>(r) + 63) / 64 * 64;
      }
      for (size_t sb : layer_stream) slot_bytes = std::max(slot_bytes, sb);
    }
    // MoE layers with their experts on the device: router and expert tensors resident, and the
    // MoE scratch of a device step (the host's routing decisions and, for a device with its own
    // kernels, device buffers for gathered rows, expert outputs and each (token, slot)'s result).
    bool moe_on_device = false;
    if (variant_->ffn == FfnKind::Moe)
      for (int64_t l = 0; l < nl; ++l) {
        if (placement_.layers[static_cast<size_t>(l)].op[kUp].loc != Loc::Dev &&
            !(has_prefill_ && prefill_placement_.layers[static_cast<size_t>(l)].op[kUp].loc == Loc::Dev))
          continue;
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
      recompute_pos_.resize(static_cast<size_t>(most));
      for (int64_t i = 0; i < most; ++i) recompute_pos_[static_cast<size_t>(i)] = i;
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
    }
    // KVPR recomputes K and V on the device from W_K and W_V. A device with its own kernels reads
    // the resident copies where they hold every row, else copies of their own; the loopback
    // device reads the host's bytes in the CPU's layout in place, as the CPU kernels do.
    for (int64_t l = 0; l < nl && recompute_rows_ > 0; ++l) {
      const LayerPlacement& lp = placement_.layers[static_cast<size_t>(l)];
      if (kv_cache_of_[static_cast<size_t>(l)] != 0 || lp.op[kAttention].loc != Loc::Dev || lp.recompute_prefix == 0) continue;
      Layer& L = layers_[static_cast<size_t>(l)];
      for (const Weight* w : {&L.wk, &L.wv}) {
        if (!dk_) {
          recompute_w_[w] = {w->cpu_data, w->cpu_layout != WeightLayout::Gguf ? quant::packed_format(w->type) : nullptr};
          continue;
        }
        if (!dk_->runs(w->type)) throw DeviceError(d.info().name + ": KV recomputation needs a kernel for " + w->name + "'s format");
        auto it = resident_.find(w);
        const bool whole = it != resident_.end() && lp.op[w == &L.wk ? kK : kV].dev_fraction >= 1.0;
        if (whole) {
          recompute_w_[w] = {it->second, nullptr};
          continue;
        }
        const size_t bytes = w->row_bytes * static_cast<size_t>(w->rows);
        auto* q = static_cast<uint8_t*>(alloc(bytes, "KVPR's copy of '" + w->name + "'"));
        d.copy_to_device(q, w->data, bytes);
        recompute_w_[w] = {q, nullptr};
      }
    }
    dev_attn_scratch_.reserve(attention_shape(), cfg_.context_length, B, d.pool().size());
    if (has_prefill_) {
      // The prefill placement's op list first (kept aside), then the decode one's (running).
      std::swap(placement_, prefill_placement_);
      compile();
      bind_device_weights();
      build_deps();
      std::swap(placement_, prefill_placement_);
      swap_program();        // the prefill program aside...
      prefill_active_ = false;  // ...and the decode one, compiled next, running
    }
    compile();
    bind_device_weights();
    build_deps();
    d.reset_peak();
  } catch (...) {
    host_only();
    throw;
  }
}

void Model::bind_device_weights() {
  // Streamed weights' places in their slot (the same offsets in both slots); resident ones read
  // their copy.
  std::map<int, size_t> fill;
  for (Op& op : ops_) {
    if (op.kind != OpKind::MatMul || op.loc != Loc::Dev) continue;
    auto it = resident_.find(op.w);
    if (it != resident_.end()) {
      op.wdata = it->second;
      continue;
    }
    const int g = op.layer < 0 ? static_cast<int>(cfg_.n_layers) : op.layer;
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
}

void Model::set_tracing(bool on, size_t max_events) {
  tracing_ = on;
  max_trace_ = max_events;
  if (!on) trace_.clear();
}

}  // namespace fulcrum
