// The step: evaluating sequences (eval_batch splits them into steps), running the compiled op
// list on the executor's lanes, and each op through its lane's kernels (device/kernels.h): the
// CPU's (the host, or the loopback device's pool) or a device's own.
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

#include "device/cpu/cpu_kernels.h"
#include "kernels/matmul.h"
#include "model/model.h"

namespace fulcrum {

float* Model::buf(Buf b) {
  switch (b) {
    case Buf::X: return x_.data();
    case Buf::H: return h_.data();
    case Buf::Q: return q_.data();
    case Buf::K: return k_.data();
    case Buf::V: return v_.data();
    case Buf::Att: return att_.data();
    case Buf::Gate: return gate_.data();
    case Buf::Up: return up_.data();
    case Buf::Logits: return nullptr;  // the caller's output
  }
  return nullptr;
}

int64_t Model::width(Buf b) const {
  switch (b) {
    case Buf::X: case Buf::H: return cfg_.n_embd;
    case Buf::Q: case Buf::Att: return cfg_.n_heads * cfg_.head_dim;
    case Buf::K: case Buf::V: return cfg_.n_kv_heads * cfg_.head_dim;
    case Buf::Gate: case Buf::Up: return cfg_.n_ff;
    case Buf::Logits: return cfg_.n_vocab;
  }
  return 0;
}

std::vector<float> Model::eval(const int32_t* tokens, int64_t n, int64_t start_pos, bool want_all) {
  return std::move(eval_batch({SeqInput{0, tokens, n, start_pos}}, want_all)[0]);
}

int64_t Model::logits_floats(const SeqInput& s, bool want_all) const {
  if (s.layer >= 0 && s.layer + static_cast<int64_t>(s.layers) < cfg_.n_layers) return 0;
  return (want_all ? std::max<int64_t>(s.n, 0) : 1) * cfg_.n_vocab;
}

std::vector<std::vector<float>> Model::eval_batch(const std::vector<SeqInput>& in, bool want_all) {
  check_inputs(in, want_all);
  std::vector<std::vector<float>> out(in.size());
  std::vector<float*> dests(in.size(), nullptr);
  for (size_t k = 0; k < in.size(); ++k) {
    out[k].resize(static_cast<size_t>(logits_floats(in[k], want_all)));
    if (!out[k].empty()) dests[k] = out[k].data();
  }
  eval_steps(in, want_all, dests);
  return out;
}

void Model::eval_into(const std::vector<SeqInput>& in, bool want_all, const std::vector<float*>& dests) {
  check_inputs(in, want_all);
  if (dests.size() != in.size())
    throw std::runtime_error("eval: " + std::to_string(dests.size()) + " logits destinations for " + std::to_string(in.size()) + " inputs");
  for (size_t k = 0; k < in.size(); ++k)
    if (!dests[k] && logits_floats(in[k], want_all) > 0) throw std::runtime_error("eval: input " + std::to_string(k) + " has logits but no destination");
  eval_steps(in, want_all, dests);
}

void Model::check_inputs(const std::vector<SeqInput>& in, bool want_all) {
  if (in.empty()) throw std::runtime_error("eval: no sequences");
  if (static_cast<int64_t>(in.size()) > cfg_.max_sequences)
    throw std::runtime_error("eval: " + std::to_string(in.size()) + " sequences in one batch, the model was loaded for " + std::to_string(cfg_.max_sequences));
  std::vector<bool> seen(seqs_.size(), false);
  for (const SeqInput& s : in) {
    check_seq(s.seq, "eval");
    if (seen[static_cast<size_t>(s.seq)]) throw std::runtime_error("eval: sequence " + std::to_string(s.seq) + " appears twice in one batch");
    seen[static_cast<size_t>(s.seq)] = true;
    const int64_t have = seqs_[static_cast<size_t>(s.seq)]->n_past.load();
    if (s.keep_after && s.start_pos + s.n > have)
      throw std::runtime_error("eval: sequence " + std::to_string(s.seq) + ": keepAfter with positions " + std::to_string(s.start_pos) + ".." +
                               std::to_string(s.start_pos + s.n) + " past the " + std::to_string(have) + " held");
    if (s.n <= 0) throw std::runtime_error("eval: sequence " + std::to_string(s.seq) + ": no tokens");
    if (s.start_pos < 0 || s.start_pos > have)
      throw std::runtime_error("eval: sequence " + std::to_string(s.seq) + ": start position " + std::to_string(s.start_pos) +
                               " leaves a gap: the KV cache holds " + std::to_string(have) + " positions");
    if (s.start_pos + s.n > cfg_.context_length)
      throw std::runtime_error("eval: sequence " + std::to_string(s.seq) + ": positions " + std::to_string(s.start_pos) + ".." +
                               std::to_string(s.start_pos + s.n) + " exceed the context length " + std::to_string(cfg_.context_length));
    if (s.layer >= 0) {
      const std::string who = "eval: sequence " + std::to_string(s.seq) + ", layer-by-layer step at layer " + std::to_string(s.layer);
      if (s.layers < 1 || s.layer + static_cast<int64_t>(s.layers) > cfg_.n_layers)
        throw std::runtime_error(who + ", " + std::to_string(s.layers) + " layer(s): the model has " + std::to_string(cfg_.n_layers) + " layers");
      if (s.n != 1) throw std::runtime_error(who + ": one token, got " + std::to_string(s.n));
      if (want_all) throw std::runtime_error(who + ": every row's logits cannot be asked with a layer-by-layer step");
      if (s.keep_after || s.start_pos != have)
        throw std::runtime_error(who + ": the token must be the sequence's next (position " + std::to_string(have) + "), got position " + std::to_string(s.start_pos));
      if (!build_layer_steps())
        throw std::runtime_error(who + ": layer-by-layer steps need a placement without streamed KV (its staging slots serve every row of a layer)");
      const Sequence& q = *seqs_[static_cast<size_t>(s.seq)];
      if (s.layer > 0 && (q.residual_pos != s.start_pos || q.residual_layer != s.layer - 1))
        throw std::runtime_error(who + " of position " + std::to_string(s.start_pos) + ": it continues from layer " + std::to_string(s.layer - 1) +
                                 " of that position, but the sequence holds " +
                                 (q.residual_pos < 0 ? std::string("no residual") : "the residual after layer " + std::to_string(q.residual_layer) + " of position " + std::to_string(q.residual_pos)));
    }
    for (int64_t i = 0; i < s.n; ++i)
      if (s.tokens[i] < 0 || s.tokens[i] >= cfg_.n_vocab)
        throw std::runtime_error("eval: sequence " + std::to_string(s.seq) + ": token " + std::to_string(s.tokens[i]) + " at index " +
                                 std::to_string(i) + " is outside the vocabulary [0, " + std::to_string(cfg_.n_vocab) + ")");
  }
}

void Model::eval_steps(const std::vector<SeqInput>& in, bool want_all, const std::vector<float*>& dests) {
  // APEX's window: an input that continues a token from the attention its sequence deferred
  // joins it within the step; any other input of that sequence waits for it here and forgets the
  // partly done token (its position is being written anew).
  std::vector<uint8_t> joins(in.size(), 0), defers(in.size(), 0);
  for (size_t k = 0; k < in.size(); ++k) {
    const SeqInput& s = in[k];
    Sequence& q = *seqs_[static_cast<size_t>(s.seq)];
    const bool continues = s.layer > 0 && q.deferred_layer == s.layer - 1 && q.residual_pos == s.start_pos;
    if (q.deferred_layer >= 0 && !continues) join_deferred(q, false);
    joins[k] = continues;
    if (s.layer >= 0 && s.layer + s.layers < cfg_.n_layers) {
      const int8_t d = layer_defers_[static_cast<size_t>(s.layer + s.layers - 1)];
      defers[k] = d == 1 || (d == 2 && q.kv_loc == Loc::Host);
    }
  }
  // Each hold throws, leaving its cache as it was, if a page cannot be allocated (a device cache
  // throws DeviceError: the engine then falls back to the CPU).
  for (const SeqInput& s : in) {
    Sequence& q = *seqs_[static_cast<size_t>(s.seq)];
    for (KvCache* c : {q.host.get(), q.dev.get(), q.by_seq.get(), q.staging.get()})
      if (c) c->hold(s.start_pos + s.n);
  }
  std::vector<int64_t> kept_end(in.size(), 0);
  for (size_t k = 0; k < in.size(); ++k) {
    const SeqInput& s = in[k];
    Sequence& q = *seqs_[static_cast<size_t>(s.seq)];
    if (s.keep_after) { kept_end[k] = q.n_past.load(); continue; }  // the positions after stay held and valid
    for (KvCache* c : {q.host.get(), q.dev.get(), q.by_seq.get(), q.staging.get()})
      if (c) c->release_from(s.start_pos + s.n);  // pages of a longer, rewound sequence hold stale positions only
    q.n_past = s.start_pos;
  }
  // Device-KV sequences first, so their rows are one range [0, n_dev_rows) (by-sequence layers).
  std::vector<size_t> order(in.size());
  for (size_t i = 0; i < in.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return (seqs_[static_cast<size_t>(in[a].seq)]->kv_loc == Loc::Dev) > (seqs_[static_cast<size_t>(in[b].seq)]->kv_loc == Loc::Dev);
  });
  std::vector<int64_t> done(in.size(), 0);
  int64_t budget = device_ ? std::min(cfg_.batch_size, kDeviceRows) : cfg_.batch_size;
  if (want_all && dev_logits_) budget = std::min(budget, dev_logit_rows_);
  // One input done in one step (a decode token, a short prompt): its logits rows are the step's,
  // in the same order, so the LM head writes them straight into the caller's memory.
  float* direct = in.size() == 1 && in[0].n <= budget ? dests[0] : nullptr;
  std::vector<size_t> members;  // inputs in the step being built (reused: no allocation per step)
  members.reserve(in.size());
  for (;;) {
    // One step: from each unfinished sequence in order, as many tokens as the rows left allow.
    StepState& st = step_state_;
    st.spans.clear();
    st.n = 0;
    st.n_dev_rows = 0;
    st.layer_steps = false;
    members.clear();
    for (size_t k : order) {
      const SeqInput& s = in[k];
      const int64_t left = s.n - done[k];
      if (left <= 0 || st.n >= budget) continue;
      const int64_t take = std::min(left, budget - st.n);
      st.spans.push_back(Span{s.seq, s.tokens + done[k], st.n, take, s.start_pos + done[k], s.layer, s.layer + s.layers, joins[k] != 0, defers[k] != 0});
      st.layer_steps = st.layer_steps || s.layer >= 0;
      for (int64_t r = 0; r < take; ++r) row_pos_[static_cast<size_t>(st.n + r)] = s.start_pos + done[k] + r;
      if (seqs_[static_cast<size_t>(s.seq)]->kv_loc == Loc::Dev) st.n_dev_rows += take;
      st.n += take;
      members.push_back(k);
    }
    if (st.spans.empty()) break;
    const int64_t out_rows = want_all ? st.n : static_cast<int64_t>(st.spans.size());
    st.need_logits = want_all;
    // A layer-by-layer row has logits at the last layer only.
    for (size_t m = 0; m < members.size(); ++m)
      st.need_logits = st.need_logits || (done[members[m]] + st.spans[m].n == in[members[m]].n && (st.spans[m].layer < 0 || st.spans[m].layer_end == cfg_.n_layers));
    if (!direct && step_logits_.size() < static_cast<size_t>(out_rows * cfg_.n_vocab)) step_logits_.resize(static_cast<size_t>(out_rows * cfg_.n_vocab));
    forward(want_all, direct ? direct : step_logits_.data());
    for (size_t m = 0; m < members.size(); ++m) {
      const size_t k = members[m];
      const Span& sp = st.spans[m];
      done[k] += sp.n;
      // The joined attention's output is used: the token now stands at this step's layers.
      if (sp.joins && !sp.defers) seqs_[static_cast<size_t>(sp.seq)]->deferred_layer = -1;
      if (sp.layer >= 0 && sp.layer_end < cfg_.n_layers) continue;  // the token is not done: no logits, no new position
      seqs_[static_cast<size_t>(in[k].seq)]->n_past = std::max(kept_end[k], in[k].start_pos + done[k]);
      if (direct || !dests[k]) continue;
      const float* src = step_logits_.data() + (want_all ? sp.row0 : static_cast<int64_t>(m)) * cfg_.n_vocab;
      const size_t V = static_cast<size_t>(cfg_.n_vocab);
      if (want_all) std::memcpy(dests[k] + static_cast<size_t>(done[k] - sp.n) * V, src, static_cast<size_t>(sp.n) * V * sizeof(float));
      else if (done[k] == in[k].n) std::memcpy(dests[k], src, V * sizeof(float));
    }
  }
}

void Model::forward(bool want_all, float* logits_out) {
  if (device_) device_->check();
  // The placement for this step's rows: prompt steps of prefill_rows or more run the prefill one.
  // A step with layer-by-layer rows runs the decode placement's layer-by-layer program.
  const bool layered = step_state_.layer_steps;
  const bool want_prefill = has_prefill_ && step_state_.n >= prefill_rows_ && !layered;
  if (want_prefill != prefill_active_) swap_program();
  if (layered && !build_layer_steps())
    throw std::runtime_error("eval: layer-by-layer steps need a placement without streamed KV (its staging slots serve every row of a layer)");
  // NEO's two sub-batches pipelined, when asked for and the step has both (set_pipelined).
  const bool pipe = !layered && pipelined_ && !want_prefill && step_state_.n_dev_rows > 0 && step_state_.n_dev_rows < step_state_.n && build_pipelined();
  // Ops of the pipelined program are numbered after both placements', the layer-by-layer
  // program's after those (op_info).
  const size_t both = decode_program_ops().size() + prefill_program_ops().size();
  const size_t id_base = layered ? both + pipe_.ops.size() : pipe ? both : prefill_active_ ? other_.ops.size() : 0;
  if (pipe) {
    exchange(pipe_);
    pipe_active_ = true;
  }
  if (layered) {
    exchange(layer_prog_);
    layer_prog_active_ = true;
  }
  struct Restore {
    Model* m;
    ~Restore() {
      if (m->pipe_active_) {
        m->exchange(m->pipe_);
        m->pipe_active_ = false;
      }
      if (m->layer_prog_active_) {
        m->exchange(m->layer_prog_);
        m->layer_prog_active_ = false;
      }
    }
  } restore{this};
  step_state_.want_all = want_all;
  step_state_.logits_out = logits_out;
  const bool timing = profiling_ || tracing_;
  gemv_group_end_ = -1;
  auto exec = [](void* ctx, int32_t i) { static_cast<Model*>(ctx)->exec_op(i); };
  // The LM head is not needed for a step in which no sequence finishes (a long prompt's chunks).
  auto skip = [](void* ctx, int32_t i) {
    Model* m = static_cast<Model*>(ctx);
    return m->ops_[static_cast<size_t>(i)].after_last && !m->step_state_.need_logits;
  };
  try {
    // Lanes share the cores (Executor::run) in a pipelined step of a model whose layers are big
    // enough that a sleeping lane's wake-up (tens of µs on a busy two-vCPU machine) costs less
    // than the overlap it allows: a layer's matmuls read at least its weights, 256 KiB or more
    // (~25 µs at 10 GB/s). A tiny model's µs ops keep spinning: sleeping there cost NEO's serving
    // 3x on stories260K. (A static rule: the measured step time, which sleeping inflates on a
    // loaded machine, fed back on itself.)
    const bool share = pipe && pipe_layer_bytes_ >= kShareCoresLayerBytes;
    executor_.run(static_cast<int32_t>(ops_.size()), lanes_.data(), deps_.data(), exec, skip, this, timing, start_ns_.data(), end_ns_.data(), share);
  } catch (...) {
    // A step that failed part-way leaves no recorded device work to run with the next one.
    if (dk_) dk_->discard();
    throw;
  }
  if (timing) {
    split_gemv_group_times();
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (start_ns_[i] == 0 && end_ns_[i] == 0) continue;
      if (profiling_) {
        op_ns_[i] += static_cast<uint64_t>(end_ns_[i] - start_ns_[i]);
        op_calls_[i] += 1;
      }
      const int32_t id = static_cast<int32_t>(i + id_base);
      if (tracing_ && trace_.size() < max_trace_) trace_.push_back(TraceEvent{step_, id, start_ns_[i], end_ns_[i]});
    }
  }
  ++step_;
}

// One op on its lane: the lane's kernels are the device's own (Vulkan) for the device lane of a
// device that has them, else the CPU's on the lane's pool (the loopback device's pool for its
// lane: it runs the CPU kernels over its arena). Copy lanes move bytes through the device's link.
void Model::exec_op(int32_t oi) {
  const Op& op = ops_[static_cast<size_t>(oi)];
  const StepState& st = step_state_;
  const int64_t rows = op.after_last && !st.want_all ? static_cast<int64_t>(st.spans.size()) : st.n;
  if (op.loc == Loc::Dev || op.lane != Lane::Cpu) device_->check();
  CpuKernels cpu(op.lane == Lane::Device ? device_->pool() : *pool_);
  if (op.lane == Lane::Cpu && op.kind == OpKind::MatMul) {
    if (oi <= gemv_group_end_) return;  // its group's leader computed it
    // One decode token's GEMVs of the same input in one pool run (timing splits the pass's span
    // across them: split_gemv_group_times).
    if (gemv_grouped(op)) {
      PackedGemv items[kMaxGemvGroup];
      const int n = 1 + op.gemv_group;
      for (int k = 0; k < n; ++k) {
        const Op& m = ops_[static_cast<size_t>(oi + k)];
        items[k] = PackedGemv{m.packed, m.wdata, m.r1 - m.r0, m.w->cols, act_at(m.act_type, Loc::Host), buf_at(m.dst, Loc::Host) + m.r0};
      }
      cpu.gemv_group(items, n);
      gemv_group_end_ = oi + op.gemv_group;
      return;
    }
  }
  const bool own = dk_ && op.lane == Lane::Device;
  run_op(own ? *dk_ : static_cast<Kernels&>(cpu), op, rows);
  // While timing, every op is its own submission: its measured time is then its execution on
  // the device, not the microseconds it took to record.
  if (own && (sync_after_[static_cast<size_t>(oi)] || profiling_ || tracing_)) dk_->sync();
}

bool Model::gemv_grouped(const Op& op) const {
  if (op.gemv_group == 0 || op.lane != Lane::Cpu) return false;
  const StepState& st = step_state_;
  return (op.after_last && !st.want_all ? static_cast<int64_t>(st.spans.size()) : st.n) == 1;
}

// A grouped pass has one measured span; its ops' own times are not separable. The span is split
// across them by their weight bytes: what each GEMV reads, and, decode being read-bound, what its
// time follows. Profiles and traces then keep one entry per op, and a traced step runs as an
// untraced one does (feedback traces one evaluation in four).
void Model::split_gemv_group_times() {
  for (size_t i = 0; i < ops_.size(); ++i) {
    const Op& op = ops_[i];
    if (!gemv_grouped(op) || (start_ns_[i] == 0 && end_ns_[i] == 0)) continue;
    const size_t n = 1 + static_cast<size_t>(op.gemv_group);
    auto bytes = [&](size_t k) {
      const Op& m = ops_[i + k];
      return static_cast<double>(m.w->row_bytes) * static_cast<double>(m.r1 - m.r0);
    };
    double total = 0;
    for (size_t k = 0; k < n; ++k) total += bytes(k);
    const int64_t t0 = start_ns_[i];
    const double span = static_cast<double>(end_ns_[i] - t0);
    double before = 0;
    for (size_t k = 0; k < n; ++k) {
      start_ns_[i + k] = t0 + std::llround(span * before / total);
      before += bytes(k);
      end_ns_[i + k] = t0 + std::llround(span * before / total);
    }
    i += n - 1;
  }
}

// The op switch: each op's buffers resolved for its location, then the lane's kernels.
void Model::run_op(Kernels& kn, const Op& op, int64_t rows) {
  const StepState& st = step_state_;
  const Loc at = op.loc;
  // The spans this op works on: all, or those of device-KV / host-KV sequences (by-sequence layers).
  auto in_part = [&](const Span& sp) {
    if (op.part == 0) return true;
    const bool dev = seqs_[static_cast<size_t>(sp.seq)]->kv_loc == Loc::Dev;
    return op.part == 1 ? dev : !dev;
  };
  const int64_t E = cfg_.n_embd, KVW = cfg_.n_kv_heads * cfg_.head_dim, QW = cfg_.n_heads * cfg_.head_dim;
  // An op of one sub-batch of the pipelined program works on that sub-batch's rows only: rows
  // [0, n_dev_rows) or [n_dev_rows, n) (KV stores, attention and row copies pick their rows
  // themselves, by span or by range).
  int64_t r0 = 0;
  const bool own_rows = op.kind != OpKind::StoreKv && op.kind != OpKind::Attention && op.kind != OpKind::CopyRows;
  if (op.part != 0 && own_rows) {
    r0 = op.part == 1 ? 0 : st.n_dev_rows;
    rows = op.part == 1 ? st.n_dev_rows : st.n - st.n_dev_rows;
    if (rows <= 0) return;
  }
  auto B = [&](Buf b) { return buf_at(b, at) + r0 * width(b); };
  auto A = [&](GgmlType t) { return act_at(t, at) + r0 * act_row_stride(t); };
  switch (op.kind) {
    case OpKind::Embed: {
      // gemma: embeddings × sqrt(n_embd), in f32 as llama.cpp scales them.
      const float scale = variant_->embd_scale ? std::sqrt(static_cast<float>(E)) : 1.f;
      for (const Span& sp : st.spans)
        kn.embed(token_embd_.type, token_embd_.data, token_embd_.row_bytes, sp.tokens, sp.n, buf_at(Buf::X, at) + sp.row0 * E, E, scale);
      break;
    }
    case OpKind::RmsNorm: {
      // op.width set: per head (qk_norm), each of a row's heads normalised on its own.
      const int64_t w = op.width > 0 ? op.width : width(op.src);
      kn.rmsnorm(B(op.src), vec_at(op.vec, at), B(op.dst), rows, width(op.src) / w, w, cfg_.norm_eps, fused_converts(op, r0));
      break;
    }
    case OpKind::LayerNorm:
      kn.layernorm(B(op.src), vec_at(op.vec, at), vec_at(op.vec2, at), B(op.dst), rows, width(op.src), cfg_.norm_eps, fused_converts(op, r0));
      break;
    case OpKind::Convert:
      kn.convert(op.act_type, B(op.src), rows, op.width, A(op.act_type));
      break;
    case OpKind::MatMul: {
      if (!buf_at(op.dst, at)) break;
      float* dst = B(op.dst);
      const void* act = op.act_type == GgmlType::F32 ? static_cast<const void*>(B(op.src)) : A(op.act_type);
      // A step that wants every row's logits verifies draft tokens (speculative decoding): its
      // rows must be the bits of each token decoded alone, so the kept tokens are exactly the
      // greedy ones (some prefill tiles sum in another order).
      kn.matmul(op.w->type, op.wdata, op.packed, op.r1 - op.r0, op.w->cols, act, rows, dst + op.r0, width(op.dst), st.want_all);
      break;
    }
    case OpKind::AddBias:
      kn.add(B(op.dst), vec_at(op.vec, at), rows, width(op.dst), 0);
      break;
    case OpKind::AddResidual:
      kn.add(B(op.dst), B(op.src), rows, width(op.dst), width(op.dst));
      break;
    case OpKind::Rope:
      kn.rope(B(op.dst), rows, op.dst == Buf::Q ? cfg_.n_heads : cfg_.n_kv_heads, cfg_.head_dim, row_pos_.data() + r0, rope_of(op.layer));
      break;
    case OpKind::StoreKv: {
      const int64_t idx = op.kv_slot >= 0 ? op.kv_slot : kv_index_[static_cast<size_t>(op.layer)];
      for (const Span& sp : st.spans) {
        if (!in_part(sp) || !sp.runs_layer(op.layer)) continue;
        KvCache& kv = kv_for(*seqs_[static_cast<size_t>(sp.seq)], op.layer, op.kv_slot);
        store_kv(kn, kv, idx, buf_at(Buf::K, at) + sp.row0 * KVW, buf_at(Buf::V, at) + sp.row0 * KVW, sp.n, sp.pos0);
      }
      break;
    }
    case OpKind::Attention: {
      const int64_t idx = op.kv_slot >= 0 ? op.kv_slot : kv_index_[static_cast<size_t>(op.layer)];
      const AttentionWork work = at == Loc::Dev ? AttentionWork{&dev_attn_scratch_, dev_gather_k_, dev_gather_v_, dev_page_table_}
                                                : AttentionWork{&attn_scratch_, nullptr, nullptr, nullptr};
      for (const Span& sp : st.spans) {
        if (!in_part(sp) || !sp.attends(op.layer)) continue;
        KvCache& kv = kv_for(*seqs_[static_cast<size_t>(sp.seq)], op.layer, op.kv_slot);
        kn.attention(attention_shape(op.layer), buf_at(Buf::Q, at) + sp.row0 * QW, sp.n, sp.pos0, kv.pages(idx), buf_at(Buf::Att, at) + sp.row0 * QW, work);
      }
      break;
    }
    case OpKind::SwiGlu:
      kn.swiglu(B(Buf::Gate), B(Buf::Up), rows, cfg_.n_ff, fused_converts(op, r0));
      break;
    case OpKind::GeGlu:
      kn.geglu(B(Buf::Gate), B(Buf::Up), rows, cfg_.n_ff, fused_converts(op, r0));
      break;
    case OpKind::Gelu:
      kn.gelu(B(op.src), rows, width(op.src), fused_converts(op, r0));
      break;
    case OpKind::MoeFfn: {
      // One body on every lane (model/moe.h): router and experts on the lane's kernels, routing
      // on the host. A device with its own kernels keeps the scratch in its memory (dev_moe_);
      // the CPU lanes (host, loopback) in the host's.
      MoeFfn& moe = at == Loc::Dev ? moe_dev_ : moe_host_;
      const bool own = &kn == dk_;
      moe.run(kn, own ? device_.get() : nullptr, own ? dev_moe_ : moe.host_buffers(), moe_weights(layers_[static_cast<size_t>(op.layer)], at),
              B(op.src), rows, B(op.dst));
      break;
    }
    case OpKind::LayerEnter:
    case OpKind::LayerExit: {
      // The rows that run part of their token: X from / to their sequence's residual (host
      // memory), on the side where the compiled program keeps X: the host, or the device through
      // its copy lanes (those rows only).
      float* x = buf_at(Buf::X, at);
      const size_t row_bytes = static_cast<size_t>(E) * sizeof(float);
      for (const Span& sp : st.spans) {
        if (op.layer != (op.kind == OpKind::LayerEnter ? sp.layer : sp.layer_end - 1) || sp.layer < 0) continue;
        // A row that joined a deferred attention came into this layer through the previous one's
        // output projection and FFN; a row that deferred its attention kept X at the window point.
        if (op.kind == OpKind::LayerEnter ? sp.joins : sp.defers) continue;
        Sequence& q = *seqs_[static_cast<size_t>(sp.seq)];
        float* row = x + sp.row0 * E;
        if (op.kind == OpKind::LayerExit && sp.layer_end == cfg_.n_layers) {
          q.residual_pos = -1;  // the token is done: nothing waits for a next layer
        } else if (op.kind == OpKind::LayerExit) {
          q.residual.resize(static_cast<size_t>(E));  // allocates once per sequence
          if (at == Loc::Dev) device_->copy_to_host(q.residual.data(), row, row_bytes);
          else std::memcpy(q.residual.data(), row, row_bytes);
          q.residual_pos = sp.pos0;
          q.residual_layer = sp.layer_end - 1;
        } else if (sp.layer > 0) {
          if (at == Loc::Dev) device_->copy_to_device(row, q.residual.data(), row_bytes);
          else std::memcpy(row, q.residual.data(), row_bytes);
        }
      }
      break;
    }
    case OpKind::DeferredAttention: {
      // APEX's window point of this layer (host; Q's and X's rows valid here, compile).
      float* x = buf_at(Buf::X, Loc::Host);
      float* att = buf_at(Buf::Att, Loc::Host);
      const float* qrows = buf_at(Buf::Q, Loc::Host);
      for (const Span& sp : st.spans) {
        Sequence& q = *seqs_[static_cast<size_t>(sp.seq)];
        if (sp.joins && sp.layer - 1 == op.layer) {
          deferred_.wait(q.deferred_ticket);
          q.deferred_ticket = 0;
          std::memcpy(att + sp.row0 * QW, q.deferred_att.data(), static_cast<size_t>(QW) * sizeof(float));
          std::memcpy(x + sp.row0 * E, q.residual.data(), static_cast<size_t>(E) * sizeof(float));
          // Its KV moved to the device since (swapSequenceKv): its row is a device-KV row now, whose
          // attention output the output projection takes from the device's Att.
          if (q.kv_loc == Loc::Dev && buf_at(Buf::Att, Loc::Dev))
            device_->copy_to_device(buf_at(Buf::Att, Loc::Dev) + sp.row0 * QW, q.deferred_att.data(), static_cast<size_t>(QW) * sizeof(float));
        }
        if (sp.defers && sp.layer_end - 1 == op.layer) {
          float* row = x + sp.row0 * E;
          q.residual.assign(row, row + E);
          q.residual_pos = sp.pos0;
          q.residual_layer = op.layer;
          q.deferred_layer = op.layer;
          std::memcpy(q.deferred_q.data(), qrows + sp.row0 * QW, static_cast<size_t>(QW) * sizeof(float));
          KvCache& kv = kv_for(q, op.layer, -1);
          q.deferred_ticket = deferred_.start(attention_shape(op.layer), q.deferred_q.data(), sp.pos0, kv.pages(kv_index_[static_cast<size_t>(op.layer)]),
                                              q.deferred_att.data());
        }
      }
      break;
    }
    case OpKind::LogitSoftcap: {
      float* lg = buf_at(Buf::Logits, Loc::Host);
      if (lg) kn.softcap(lg, rows * cfg_.n_vocab, cfg_.final_softcap);
      break;
    }
    case OpKind::LastRows:
      // Each sequence's last row to row k (k-th span): the rows the LM head reads.
      if (!st.want_all) {
        float* x = buf_at(Buf::X, at);
        for (size_t k = 0; k < st.spans.size(); ++k) {
          const int64_t last = st.spans[k].row0 + st.spans[k].n - 1;
          if (last != static_cast<int64_t>(k)) kn.copy(x + static_cast<int64_t>(k) * E, x + last * E, static_cast<size_t>(E) * sizeof(float));
        }
      }
      break;
    case OpKind::CopyRows: {
      const Loc from = at == Loc::Host ? Loc::Dev : Loc::Host;
      int64_t r0 = 0, r1 = rows;
      if (op.part == 1) r1 = st.n_dev_rows;
      else if (op.part == 2) r0 = st.n_dev_rows;
      if (r1 <= r0) break;
      const size_t bytes = static_cast<size_t>((r1 - r0) * op.width) * sizeof(float);
      float* d = buf_at(op.dst, at) + r0 * op.width;
      const float* s = buf_at(op.src, from) + r0 * op.width;
      if (at == Loc::Dev) device_->copy_to_device(d, s, bytes);
      else device_->copy_to_host(d, s, bytes);
      break;
    }
    case OpKind::CopyCols: {
      // The device's rows of a split matmul, back into the host's output (strided per token).
      const int64_t w = width(op.dst);
      float* d = buf_at(op.dst, Loc::Host);
      const float* s = buf_at(op.src, Loc::Dev);
      if (!d) break;
      d += r0 * w;
      s += r0 * w;
      device_->copy_rows_to_host(d + op.r0, static_cast<size_t>(w) * sizeof(float), s + op.r0, static_cast<size_t>(w) * sizeof(float),
                                 static_cast<size_t>(op.r1 - op.r0) * sizeof(float), static_cast<size_t>(rows));
      break;
    }
    case OpKind::CopyWeight:
      device_->copy_to_device(const_cast<uint8_t*>(op.wdata), device_weight_bytes(*op.w), op.w->row_bytes * static_cast<size_t>(op.r1));
      break;
    case OpKind::CopyKv: {
      // Positions [from, pos0) of each sequence's host KV into its staging slot, whole pages;
      // KVPR's recomputed prefix is not copied.
      const LayerPlacement& lp = placement_.layers[static_cast<size_t>(op.layer)];
      const int64_t pt = cfg_.kv_page_tokens;
      for (const Span& sp : st.spans) {
        Sequence& q = *seqs_[static_cast<size_t>(sp.seq)];
        const size_t half = static_cast<size_t>(q.host->half_page_bytes());
        const int64_t from = std::min(lp.recompute_prefix, sp.pos0) / pt;
        const int64_t to = (sp.pos0 + pt - 1) / pt;
        const KvPages src = q.host->pages(kv_index_[static_cast<size_t>(op.layer)]);
        const KvPages dst = q.staging->pages(op.kv_slot);
        for (int64_t p = from; p < to; ++p) {
          device_->copy_to_device(const_cast<uint16_t*>(dst.k[p]), src.k[p], half);
          device_->copy_to_device(const_cast<uint16_t*>(dst.v[p]), src.v[p], half);
        }
      }
      break;
    }
    case OpKind::SaveActs: {
      for (const Span& sp : st.spans) {
        std::vector<float>& saved = seqs_[static_cast<size_t>(sp.seq)]->saved[static_cast<size_t>(op.layer)];
        const int64_t cap = static_cast<int64_t>(saved.size()) / E;
        const int64_t n_keep = std::max<int64_t>(0, std::min(sp.n, cap - sp.pos0));
        if (n_keep > 0)
          std::memcpy(saved.data() + sp.pos0 * E, buf_at(Buf::H, Loc::Host) + sp.row0 * E, static_cast<size_t>(n_keep * E) * sizeof(float));
      }
      break;
    }
    case OpKind::CopyActs: {
      const LayerPlacement& lp = placement_.layers[static_cast<size_t>(op.layer)];
      for (size_t k = 0; k < st.spans.size(); ++k) {
        const Span& sp = st.spans[k];
        const int64_t p = std::min(lp.recompute_prefix, sp.pos0);
        if (p > 0)
          device_->copy_to_device(dev_recompute_ + static_cast<int64_t>(k) * recompute_rows_ * E,
                                  seqs_[static_cast<size_t>(sp.seq)]->saved[static_cast<size_t>(op.layer)].data(), static_cast<size_t>(p * E) * sizeof(float));
      }
      break;
    }
    case OpKind::RecomputeKv:
      recompute_kv(kn, op);
      break;
  }
}

// KVPR: K and V of positions [0, p) of each sequence from its saved attn_norm rows (copied to
// the device by CopyActs), through the lane's kernels (conversion, matmul, bias, k_norm, RoPE,
// f16 store) as when they were first computed, into the layer's staging slot.
void Model::recompute_kv(Kernels& kn, const Op& op) {
  const Layer& L = layers_[static_cast<size_t>(op.layer)];
  const LayerPlacement& lp = placement_.layers[static_cast<size_t>(op.layer)];
  const int64_t E = cfg_.n_embd, KVW = cfg_.n_kv_heads * cfg_.head_dim;
  const int64_t step_rows = std::min(cfg_.batch_size, kDeviceRows);  // the device scratch's rows
  const StepState& st = step_state_;
  for (size_t k = 0; k < st.spans.size(); ++k) {
    const Span& sp = st.spans[k];
    KvCache& staging = *seqs_[static_cast<size_t>(sp.seq)]->staging;
    const int64_t p = std::min(lp.recompute_prefix, sp.pos0);
    for (int64_t c0 = 0; c0 < p; c0 += step_rows) {
      const int64_t nc = std::min(step_rows, p - c0);
      const float* h = dev_recompute_ + static_cast<int64_t>(k) * recompute_rows_ * E + c0 * E;
      for (auto [w, out, bias] : {std::make_tuple(&L.wk, dev_rk_, &L.bk), std::make_tuple(&L.wv, dev_rv_, &L.bv)}) {
        const GgmlType t = kn.act_type(w->type);
        const void* act = h;
        if (t != GgmlType::F32) {
          kn.convert(t, h, nc, E, act_at(t, Loc::Dev));
          act = act_at(t, Loc::Dev);
        }
        const RecomputeWeight& rw = recompute_w_.at(w);
        kn.matmul(w->type, rw.data, rw.packed, w->rows, w->cols, act, nc, out, KVW, false);
        if (!bias->empty()) kn.add(out, vec_at(bias->data(), Loc::Dev), nc, KVW, 0);
      }
      if (!L.k_norm_f.empty())
        kn.rmsnorm(dev_rk_, vec_at(L.k_norm_f.data(), Loc::Dev), dev_rk_, nc, cfg_.n_kv_heads, cfg_.head_dim, cfg_.norm_eps, RowConverts{});
      kn.rope(dev_rk_, nc, cfg_.n_kv_heads, cfg_.head_dim, recompute_pos_.data() + c0, rope_of(op.layer));
      store_kv(kn, staging, op.kv_slot, dev_rk_, dev_rv_, nc, c0);
    }
  }
}

// K and V rows of positions [pos0, pos0 + n) into a KV cache, page by page.
void Model::store_kv(Kernels& kn, KvCache& kv, int64_t idx, const float* k, const float* v, int64_t n, int64_t pos0) {
  const int64_t pt = cfg_.kv_page_tokens, KVW = cfg_.n_kv_heads * cfg_.head_dim;
  for (int64_t p0 = pos0; p0 < pos0 + n;) {
    const int64_t page_start = p0 / pt * pt;
    const int64_t m = std::min(pos0 + n, page_start + pt) - p0;
    const int64_t r = p0 - pos0;
    kn.kv_store(k + r * KVW, KVW, kv.k_at(idx, page_start, 0), kv.format(), m, p0 - page_start, cfg_.n_kv_heads, cfg_.head_dim, pt);
    kn.kv_store(v + r * KVW, KVW, kv.v_at(idx, page_start, 0), kv.format(), m, p0 - page_start, cfg_.n_kv_heads, cfg_.head_dim, pt);
    p0 += m;
  }
}

// The activation buffers an op's fused Convert ops write (compile's fuse pass), at its location.
RowConverts Model::fused_converts(const Op& op, int64_t row0) {
  RowConverts cv;
  cv.n = op.n_fused_convert;
  for (int k = 0; k < op.n_fused_convert; ++k) {
    cv.type[k] = op.fused_convert[k];
    cv.dst[k] = act_at(op.fused_convert[k], op.loc) + row0 * act_row_stride(op.fused_convert[k]);
  }
  return cv;
}

// A sub-batch's converted rows start at row0 × this: the widest row's bytes (E, the attention
// width or the FFN width), so the two sub-batches' regions stay apart whichever buffer either
// converts, and the buffers (sized for the widest row, batch_size or the device's rows) hold both.
size_t Model::act_row_stride(GgmlType t) const {
  return converted_bytes(t, std::max({cfg_.n_embd, cfg_.n_heads * cfg_.head_dim, cfg_.n_ff}), 1);
}

// A norm weight or bias as the op's location holds it: the host's vector, which the loopback
// device reads in place, or a device's own copy.
const float* Model::vec_at(const float* host, Loc l) const {
  if (!host || l == Loc::Host || !dk_) return host;
  auto it = dev_vecs_.find(host);
  if (it == dev_vecs_.end()) throw DeviceError("device op without a device copy of its norm weights or bias");
  return it->second;
}

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

}  // namespace fulcrum
