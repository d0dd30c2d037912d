// Sequences and their KV: which cache holds each layer's KV for the current placement, moving a
// sequence's KV between device and host, forgetting and shifting positions.
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

int64_t Model::n_past(int32_t seq) const {
  if (seq < 0 || seq >= static_cast<int32_t>(seqs_.size())) return 0;
  return seqs_[static_cast<size_t>(seq)]->n_past.load(std::memory_order_relaxed);
}

uint64_t Model::kv_bytes_in_use() const {
  uint64_t b = 0;
  for (const auto& q : seqs_)
    for (const KvCache* c : {q->host.get(), q->dev.get(), q->by_seq.get()})
      if (c) b += c->bytes_in_use();
  return b;
}

uint64_t Model::kv_bytes_reserved() const {
  uint64_t b = 0;
  for (const auto& q : seqs_)
    for (const KvCache* c : {q->host.get(), q->dev.get(), q->by_seq.get()})
      if (c) b += c->bytes_reserved();
  return b;
}

void Model::join_deferred(Sequence& q, bool keep) {
  const uint64_t ticket = q.deferred_ticket;
  q.deferred_ticket = 0;
  if (!keep) {
    q.deferred_layer = -1;
    q.residual_pos = -1;
  }
  deferred_.wait(ticket);
}

void Model::clear_kv(int64_t from_pos, int32_t seq) {
  if (from_pos < 0) throw std::runtime_error("clearKv: position " + std::to_string(from_pos) + " is negative");
  check_seq(seq, "clearKv");
  Sequence& q = *seqs_[static_cast<size_t>(seq)];
  q.n_past = std::min(q.n_past.load(), from_pos);
  // A token part-way through its layers at a cleared position is gone with its KV (and its
  // deferred attention, which reads that KV, is waited for first).
  join_deferred(q, q.residual_pos < q.n_past.load());
  if (q.residual_pos >= q.n_past.load()) q.residual_pos = -1;
  for (KvCache* c : {q.host.get(), q.dev.get(), q.by_seq.get(), q.staging.get()})
    if (c) c->release_from(q.n_past.load());
}

// The first hold of a KV page commits its memory (2 MiB a layer and half at a time, populated in
// bulk: KvCache::commit_host_pages), and where that memory has never been touched the commit is
// slow: on the 2-vCPU Intel host (a Firecracker VM) after 20 s idle, populating the 0.5B's 48 MiB
// took 0.59 s (48 calls of ~12 ms, strace -T), the first 1-token evaluation after loading 0.60 s
// against ~15 ms once committed, and the first 512-token prefill chunk 1.28-1.39 s against 0.64 s.
// A first completion paid that inside its latency; committing at load (Engine.load) moves it to
// where the weights' own first touch already costs seconds on that host (5.3-5.8 s there, 0.3 s
// with memory just freed), and costs milliseconds where first touches are cheap.
void Model::prepare_kv(int64_t positions, int32_t seq) {
  if (positions < 0) throw std::runtime_error("prepareKv: positions " + std::to_string(positions) + " is negative");
  check_seq(seq, "prepareKv");
  Sequence& q = *seqs_[static_cast<size_t>(seq)];
  for (KvCache* c : {q.host.get(), q.dev.get(), q.by_seq.get(), q.staging.get()})
    if (c) c->commit(positions);
}

void Model::shift_kv(int64_t from, int64_t to, int64_t delta, int32_t seq) {
  check_seq(seq, "shiftKv");
  Sequence& q = *seqs_[static_cast<size_t>(seq)];
  join_deferred(q, true);  // its attention reads the pages being moved
  if (q.dev || q.by_seq || q.staging || !q.host)
    throw std::runtime_error("shiftKv: sequence " + std::to_string(seq) + " keeps KV on the device; shifting is supported for host KV only");
  for (const auto& rows : q.saved)
    if (!rows.empty()) throw std::runtime_error("shiftKv: sequence " + std::to_string(seq) + " recomputes KV from saved rows (KVPR); shifting is not supported");
  if (to > q.n_past.load()) throw std::runtime_error("shiftKv: positions " + std::to_string(from) + ".." + std::to_string(to) + " of sequence " + std::to_string(seq) + " are not all held (" + std::to_string(q.n_past.load()) + " are)");
  q.host->shift(from, to, delta, layer_ropes_);
  // Several chunks may be moved before one eval (keepAfter): the held range only grows here; the
  // next eval without keepAfter rewinds past what it writes.
  q.n_past = std::max(q.n_past.load(), to + delta);
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
  const KvFormat kf = cfg_.kv_format;
  for (auto& sp : seqs_) {
    Sequence& q = *sp;
    join_deferred(q, false);
    q.host.reset();
    q.dev.reset();
    q.by_seq.reset();
    q.staging.reset();
    q.saved.clear();
    q.n_past = 0;
    // A cache for each kind of layer present (host always: the CPU path and fallbacks need it).
    q.host = std::make_unique<KvCache>(std::max(1, counts[0]), ctx, kvh, hd, pt, kf);
    if (counts[1] > 0) q.dev = std::make_unique<KvCache>(counts[1], ctx, kvh, hd, pt, kf, device_.get());
    if (counts[2] > 0) {
      if (q.kv_loc == Loc::Dev && device_) q.by_seq = std::make_unique<KvCache>(counts[2], ctx, kvh, hd, pt, kf, device_.get());
      else q.by_seq = std::make_unique<KvCache>(counts[2], ctx, kvh, hd, pt, kf);
    }
    if (streamed) q.staging = std::make_unique<KvCache>(2, ctx, kvh, hd, pt, kf, device_.get());
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
  join_deferred(q, false);
  q.kv_loc = loc;
  q.n_past = 0;
  q.by_seq.reset();
  int n = 0;
  for (int8_t c : kv_cache_of_) n += c == 2;
  if (n == 0) return;
  const int64_t ctx = cfg_.context_length, kvh = cfg_.n_kv_heads, hd = cfg_.head_dim, pt = cfg_.kv_page_tokens;
  const KvFormat kf = cfg_.kv_format;
  if (loc == Loc::Dev) q.by_seq = std::make_unique<KvCache>(n, ctx, kvh, hd, pt, kf, device_.get());
  else q.by_seq = std::make_unique<KvCache>(n, ctx, kvh, hd, pt, kf);
  if (q.host) q.host->release_from(0);
  if (q.dev) q.dev->release_from(0);
  if (q.staging) q.staging->release_from(0);
}

void Model::swap_sequence_kv(int32_t seq, Loc loc) {
  check_seq(seq, "swapSequenceKv");
  if (loc == Loc::Dev && !device_) throw std::runtime_error("swapSequenceKv: the model has no device");
  Sequence& q = *seqs_[static_cast<size_t>(seq)];
  // A deferred attention reads the pages being moved; its output stays with the sequence.
  join_deferred(q, true);
  if (q.kv_loc == loc || !q.by_seq) {
    q.kv_loc = loc;
    return;
  }
  const int64_t ctx = cfg_.context_length, kvh = cfg_.n_kv_heads, hd = cfg_.head_dim, pt = cfg_.kv_page_tokens;
  const KvFormat kf = cfg_.kv_format;
  auto moved = loc == Loc::Dev ? std::make_unique<KvCache>(q.by_seq->n_layers(), ctx, kvh, hd, pt, kf, device_.get())
                               : std::make_unique<KvCache>(q.by_seq->n_layers(), ctx, kvh, hd, pt, kf);
  // A token part-way through its layers (layer-by-layer steps) has K and V at its position for
  // the layers done: they move with the rest.
  const int64_t n = q.n_past.load() + (q.residual_pos == q.n_past.load() ? 1 : 0);
  moved->hold(n);  // throws DeviceError when the device is full; nothing has changed then
  const size_t bytes = static_cast<size_t>(moved->half_page_bytes());
  for (int64_t l = 0; l < moved->n_layers(); ++l) {
    const KvPages from = q.by_seq->pages(l), to = moved->pages(l);
    for (int64_t p = 0; p < moved->held_pages(); ++p) {
      // K and V apart: a host page's V is not after its K (a layer's K pages are contiguous,
      // then its V pages: KvCache).
      if (loc == Loc::Dev) {
        device_->copy_to_device(const_cast<uint16_t*>(to.k[p]), from.k[p], bytes);
        device_->copy_to_device(const_cast<uint16_t*>(to.v[p]), from.v[p], bytes);
      } else {
        device_->copy_to_host(const_cast<uint16_t*>(to.k[p]), from.k[p], bytes);
        device_->copy_to_host(const_cast<uint16_t*>(to.v[p]), from.v[p], bytes);
      }
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

}  // namespace fulcrum
