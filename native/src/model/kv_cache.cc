#include "model/kv_cache.h"

#include "device/device.h"
#include "ggml_types.h"
#include "quant/formats/fp16.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <sys/mman.h>
#include <stdexcept>
#include <string>

namespace fulcrum {
namespace {
#ifdef MADV_POPULATE_WRITE
constexpr int kMadvPopulateWrite = MADV_POPULATE_WRITE;
#else
constexpr int kMadvPopulateWrite = 23;  // Linux 5.14's value; older kernels refuse it (EINVAL) and the pages fault in as written
#endif

// FULCRUM_KV_HUGE_PAGES=0: the host KV region in 4 KiB pages (the constructor says why 2 MiB).
bool kv_huge_pages() {
  static const bool on = [] {
    const char* e = std::getenv("FULCRUM_KV_HUGE_PAGES");
    return !(e && e[0] == '0' && e[1] == 0);
  }();
  return on;
}
}  // namespace

KvCache::KvCache(int64_t n_layers, int64_t context, int64_t n_kv_heads, int64_t head_dim, int64_t page_tokens, KvFormat format)
    : n_layers_(n_layers), context_(context), n_kv_heads_(n_kv_heads), head_dim_(head_dim), page_tokens_(page_tokens), format_(format),
      row_bytes_(kv_row_bytes(format, head_dim)) {
  if (n_layers < 1 || context < 1 || n_kv_heads < 1 || head_dim < 1 || page_tokens < 1)
    throw std::runtime_error("KV cache: layers " + std::to_string(n_layers) + ", context " + std::to_string(context) + ", KV heads " +
                             std::to_string(n_kv_heads) + ", head size " + std::to_string(head_dim) + " and page size " +
                             std::to_string(page_tokens) + " must all be positive");
  const std::string refusal = kv_format_refusal(format, head_dim);
  if (!refusal.empty()) throw std::runtime_error("KV cache: " + refusal);
  table_size_ = (context + page_tokens - 1) / page_tokens;
  const uint64_t half = half_page_bytes();
  v_offset_ = static_cast<size_t>((half + kAlign - 1) / kAlign * kAlign);
  block_bytes_ = 2 * static_cast<uint64_t>(v_offset_);
  k_tables_.assign(static_cast<size_t>(n_layers), std::vector<uint16_t*>(static_cast<size_t>(table_size_), nullptr));
  v_tables_.assign(static_cast<size_t>(n_layers), std::vector<uint16_t*>(static_cast<size_t>(table_size_), nullptr));
  // Address space for every page of the context, reserved once: only pages held at some point
  // take memory (commit_host_pages commits them when first held), and pages never move. Each layer's pages have fixed
  // places, its K pages one after another and then its V pages (host_k_page, host_v_page), so a
  // decode step's walk over a layer's positions is one stream through K and one through V, as
  // bench.attention lays a layer out. Taken in order across layers (layer 0's page 0, layer 1's,
  // …), as before, the 0.5B's pages of one layer were 768 KiB apart, and every 16 KiB page started
  // a new stream: bench.attention, 14 heads of 64 over 2, 1 thread, from DRAM, on a Zen 5 (AMD
  // EPYC, 2 vCPUs), pages contiguous 9.9-10.4 µs at 280 positions and 36.5-36.9 at 1024, the same
  // pages scattered 17.7-18.0 and 56.6-61.1.
  // Advised for 2 MiB pages (transparent huge pages), which commit_host_pages populates when a
  // page is first held. Attention reads a layer's K and V over every position each token, a new
  // 4 KiB page every 16 positions of a 128-value head: with 4 KiB pages that walk missed the TLB
  // every 4 KiB and crossed pages the hardware prefetchers stop at. Measured on the 2-vCPU Zen 5
  // host (a Firecracker VM), both with the pages populated when held, 512-token prompt then 128
  // decoded, alternating processes, tok/s, 4 KiB -> 2 MiB: 1.3B Q4_K decode 1 thread 29.5 / 30.2
  // -> 33.5 / 30.2, 2 threads 54.0 / 53.1 -> 57.4 / 58.6; 0.5B Q4_0 1 thread 129.0 / 129.5 ->
  // 135.0 / 134.6 (2 threads 186.5 / 208.1 -> 196.5 / 202.6); bench-cpu-ops, 1.3B Q4_K at one
  // thread: attention 5.9 -> 4.2-4.5 ms a token, store_kv 0.51 -> 0.13 ms; the cold 512-token
  // prefill at 2 threads 2344 / 2551 -> 2194 / 2423 ms (warm: 2156-2257). An earlier host whose
  // 4 KiB faults were cheap measured it the other way for prefill (a 2 MiB page's first write
  // stalled on compaction: 312 ms of the 1.3B's 512-token prefill storing K/V against 53) when
  // pages were taken at their first write in store_kv. Memory is then committed 2 MiB at a time
  // per layer and half (K or V): a 0.5B layer's K for 4096 positions is 1 MiB, so its first hold
  // commits the context's KV. FULCRUM_KV_HUGE_PAGES=0 keeps 4 KiB pages.
  layer_bytes_ = 2 * static_cast<uint64_t>(table_size_) * static_cast<uint64_t>(v_offset_);
  const uint64_t need = static_cast<uint64_t>(n_layers) * layer_bytes_;
  host_ = HugeRegion(static_cast<size_t>(need), kv_huge_pages());
  if (!host_.ok())
    throw std::runtime_error("KV cache: cannot reserve " + std::to_string(need) + " bytes of address space for " +
                             std::to_string(context) + " positions × " + std::to_string(n_layers) + " layers (" + std::strerror(host_.error()) +
                             "); lower the context length");
}

KvCache::KvCache(int64_t n_layers, int64_t context, int64_t n_kv_heads, int64_t head_dim, int64_t page_tokens, KvFormat format, Device* device)
    : KvCache(n_layers, context, n_kv_heads, head_dim, page_tokens, format) {
  if (!device) return;
  host_.release();  // device pages: the host range is not used
  device_ = device;
  // Device pages only: their allocations per slot, and a free list where every page the context
  // can need fits, so releasing never allocates.
  blocks_.assign(static_cast<size_t>(n_layers), std::vector<void*>(static_cast<size_t>(table_size_), nullptr));
  free_.reserve(static_cast<size_t>(n_layers * table_size_));
}

KvCache::~KvCache() {
  if (device_) {
    for (auto& layer : blocks_)
      for (void* b : layer) device_->free(b);
    for (void* b : free_) device_->free(b);
  }
}

// Host pages [touched_pages_, pages) of every layer committed in one call per layer and half
// (MADV_POPULATE_WRITE) instead of one page fault per 4 KiB as store_kv first writes them: on the
// 2-vCPU AMD EPYC (Zen 5) host, a Firecracker VM, a first write costs 12 µs a 4 KiB page against
// 0.7 µs populated in bulk (plus 5.5 µs at the first access: the hypervisor's own mapping). The
// 1.3B's K and V rows of a token are 48 such pages, and a head-major page crosses into new 4 KiB
// pages for all its heads at once, every 16 positions: 32 faults in one layer's store_kv, ~400
// µs, long enough that the other thread went to sleep and had to be woken for the attention.
// Measured, 1.3B Q4_K, 512-token prompt then 128 decoded, alternating processes: decode 1 thread
// 30.2 / 31.8 / 29.9 -> 30.9 / 32.2 / 32.8 tok/s, 2 threads 55.9 / 51.1 / 52.7 -> 56.3 / 54.3 (a
// third run hit a slow moment of the host: 38.2); prefill at 2 threads 206 / 198 / 205 -> 217 /
// 201 / 211 tok/s. Kernels before 5.14 refuse the advice (EINVAL) and the pages fault in as before.
void KvCache::commit_host_pages(int64_t pages) {
  if (pages <= touched_pages_) return;
  // [from, to) widened to whole 4 KiB pages; advisory: a refusal leaves the pages to fault in.
  const auto populate = [](const uint8_t* from, const uint8_t* to) {
    constexpr uintptr_t kOsPage = 4096;
    const uintptr_t b = reinterpret_cast<uintptr_t>(from) / kOsPage * kOsPage;
    const uintptr_t e = (reinterpret_cast<uintptr_t>(to) + kOsPage - 1) / kOsPage * kOsPage;
    ::madvise(reinterpret_cast<void*>(b), e - b, kMadvPopulateWrite);
  };
  for (int64_t l = 0; l < n_layers_; ++l) {
    populate(host_k_page(l, touched_pages_), host_k_page(l, pages));
    populate(host_v_page(l, touched_pages_), host_v_page(l, pages));
  }
  touched_pages_ = pages;
  allocated_.store(touched_pages_ * n_layers_, std::memory_order_relaxed);
}

void KvCache::commit(int64_t n_positions) {
  if (device_ || n_positions <= 0) return;
  commit_host_pages(pages_for(n_positions));
}

int64_t KvCache::pages_for(int64_t n_positions) const { return std::min(table_size_, (n_positions + page_tokens_ - 1) / page_tokens_); }

void KvCache::hold(int64_t n_positions) {
  const int64_t want = pages_for(n_positions);
  if (!device_) {
    // Host pages have fixed places (the constructor): holding one is filling its slot.
    for (int64_t p = held_pages_.load(std::memory_order_relaxed); p < want; ++p) {
      const size_t slot = static_cast<size_t>(p);
      for (int64_t l = 0; l < n_layers_; ++l) {
        const size_t li = static_cast<size_t>(l);
        k_tables_[li][slot] = reinterpret_cast<uint16_t*>(host_k_page(l, p));
        v_tables_[li][slot] = reinterpret_cast<uint16_t*>(host_v_page(l, p));
      }
      held_pages_.store(p + 1, std::memory_order_relaxed);
    }
    commit_host_pages(want);
    return;
  }
  for (int64_t p = held_pages_.load(std::memory_order_relaxed); p < want; ++p) {
    const size_t slot = static_cast<size_t>(p);
    for (int64_t l = 0; l < n_layers_; ++l) {
      const size_t li = static_cast<size_t>(l);
      void* block = nullptr;
      std::string refused;
      if (!free_.empty()) {
        block = free_.back();
        free_.pop_back();
      } else {
        try {
          block = device_->alloc(block_bytes_, "a KV cache page (layer " + std::to_string(l) + ", positions " + std::to_string(p * page_tokens_) + ".." +
                                                   std::to_string(std::min(context_, (p + 1) * page_tokens_) - 1) + ")");
          allocated_.fetch_add(1, std::memory_order_relaxed);
        } catch (const DeviceError& e) {
          refused = e.what();
        }
      }
      if (!block) {
        // Put back this slot's pages of the earlier layers, so the cache is as before the call.
        for (int64_t u = 0; u < l; ++u) {
          const size_t ui = static_cast<size_t>(u);
          free_.push_back(blocks_[ui][slot]);
          blocks_[ui][slot] = nullptr;
          k_tables_[ui][slot] = v_tables_[ui][slot] = nullptr;
        }
        throw DeviceError(refused);
      }
      blocks_[li][slot] = block;
      k_tables_[li][slot] = static_cast<uint16_t*>(block);
      v_tables_[li][slot] = reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(block) + v_offset_);
    }
    held_pages_.store(p + 1, std::memory_order_relaxed);
  }
}

void KvCache::release_from(int64_t from_pos) {
  const int64_t keep = (std::max<int64_t>(0, from_pos) + page_tokens_ - 1) / page_tokens_;
  for (int64_t p = held_pages_.load(std::memory_order_relaxed); p > keep; --p) {
    const size_t slot = static_cast<size_t>(p - 1);
    for (int64_t l = 0; l < n_layers_; ++l) {
      const size_t li = static_cast<size_t>(l);
      // A device page goes to the free list; a host page stays in its place (still committed,
      // as a page on the free list was) for the next hold of its slot.
      if (device_) {
        free_.push_back(blocks_[li][slot]);
        blocks_[li][slot] = nullptr;
      }
      k_tables_[li][slot] = v_tables_[li][slot] = nullptr;
    }
    held_pages_.store(p - 1, std::memory_order_relaxed);
  }
}

void KvCache::shift(int64_t from, int64_t to, int64_t delta, const std::vector<RopeParams>& ropes) {
  if (ropes.empty()) throw std::runtime_error("KV cache: shift without RoPE parameters");
  if (device_) throw std::runtime_error("KV cache: shifting positions is supported for host pages only");
  if (from < 0 || to <= from || from + delta < 0 || to + delta > context_)
    throw std::runtime_error("KV cache: cannot move positions " + std::to_string(from) + ".." + std::to_string(to) + " by " + std::to_string(delta) +
                             " within a context of " + std::to_string(context_));
  if (delta == 0) return;
  hold(to + delta);
  // Moving right, the last positions go first (and moving left, the first), so no source
  // position is overwritten before it is read.
  std::vector<float> k(static_cast<size_t>(head_dim_));
  const TypeTraits& q8 = type_traits(GgmlType::Q8_0);
  const int64_t n = to - from;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t src = delta > 0 ? to - 1 - i : from + i;
    const int64_t dst = src + delta;
    for (int64_t l = 0; l < n_layers_; ++l) {
      for (int64_t h = 0; h < n_kv_heads_; ++h) {
        const uint8_t* ks = k_at(l, src, h);
        if (format_ == KvFormat::Q8_0) {
          q8.dequantize_row(ks, k.data(), head_dim_);
        } else {
          for (int64_t d = 0; d < head_dim_; ++d) k[static_cast<size_t>(d)] = quant::f16_to_f32(reinterpret_cast<const uint16_t*>(ks)[d]);
        }
        rope_row(k.data(), 1, head_dim_, delta, ropes[static_cast<size_t>(l) < ropes.size() ? static_cast<size_t>(l) : 0]);
        uint8_t* kd = k_at(l, dst, h);
        if (format_ == KvFormat::Q8_0) {
          q8.quantize_row(k.data(), kd, head_dim_);
        } else {
          for (int64_t d = 0; d < head_dim_; ++d) reinterpret_cast<uint16_t*>(kd)[d] = quant::f32_to_f16(k[static_cast<size_t>(d)]);
        }
        std::memmove(v_at(l, dst, h), v_at(l, src, h), static_cast<size_t>(row_bytes_));
      }
    }
  }
}

}  // namespace fulcrum
