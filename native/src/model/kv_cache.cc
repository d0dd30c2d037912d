#include "model/kv_cache.h"

#include "device/device.h"
#include "ggml_types.h"
#include "quant/formats/fp16.h"

#include <algorithm>
#include <cstdlib>
#include <cerrno>
#include <cstring>

#include <sys/mman.h>
#include <stdexcept>
#include <string>

namespace fulcrum {

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
  // Address space for every page of the context, reserved once: only written pages take memory
  // (the OS commits them on first write), and pages never move. Each layer's pages have fixed
  // places, its K pages one after another and then its V pages (host_k_page, host_v_page), so a
  // decode step's walk over a layer's positions is one stream through K and one through V, as
  // bench.attention lays a layer out. Taken in order across layers (layer 0's page 0, layer 1's,
  // …), as before, the 0.5B's pages of one layer were 768 KiB apart, and every 16 KiB page started
  // a new stream: bench.attention, 14 heads of 64 over 2, 1 thread, from DRAM, on a Zen 5 (AMD
  // EPYC, 2 vCPUs), pages contiguous 9.9-10.4 µs at 280 positions and 36.5-36.9 at 1024, the same
  // pages scattered 17.7-18.0 and 56.6-61.1.
  // Not advised for 2 MiB pages: that made decode attention ≈10 % faster (1.3B, 576 positions:
  // 11.5 -> 10.5 ms per token) but with this kernel's THP defrag=madvise every first write to a
  // 2 MiB page stalls on compaction: a 512-token prefill of the 1.3B model spent 312 ms storing
  // K/V instead of 53.
  constexpr size_t kHuge = size_t{2} << 20;
  layer_bytes_ = 2 * static_cast<uint64_t>(table_size_) * static_cast<uint64_t>(v_offset_);
  const uint64_t need = static_cast<uint64_t>(n_layers) * layer_bytes_;
  region_size_ = static_cast<size_t>((need + kHuge - 1) / kHuge * kHuge) + kHuge;
  void* r = ::mmap(nullptr, region_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (r == MAP_FAILED)
    throw std::runtime_error("KV cache: cannot reserve " + std::to_string(region_size_) + " bytes of address space for " +
                             std::to_string(context) + " positions × " + std::to_string(n_layers) + " layers (" + std::strerror(errno) +
                             "); lower the context length");
  region_ = r;
  host_base_ = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(r) + kHuge - 1) / kHuge * kHuge);
}

KvCache::KvCache(int64_t n_layers, int64_t context, int64_t n_kv_heads, int64_t head_dim, int64_t page_tokens, KvFormat format, Device* device)
    : KvCache(n_layers, context, n_kv_heads, head_dim, page_tokens, format) {
  if (!device) return;
  ::munmap(region_, region_size_);  // device pages: the host range is not used
  region_ = nullptr;
  region_size_ = 0;
  host_base_ = nullptr;
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
  if (region_) ::munmap(region_, region_size_);
}

void KvCache::hold(int64_t n_positions) {
  const int64_t want = std::min(table_size_, (n_positions + page_tokens_ - 1) / page_tokens_);
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
      if (p + 1 > touched_pages_) {
        touched_pages_ = p + 1;
        allocated_.store(touched_pages_ * n_layers_, std::memory_order_relaxed);
      }
    }
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
