// The KV cache of a model, in pages. A page holds `page_tokens` consecutive positions of one
// layer, head-major: [n_kv_heads][page_tokens] rows of head_dim values in the cache's format
// (KvFormat: f16, or Q8_0 blocks) for K, then the same for V, 64-byte aligned. Head-major because attention walks one KV head over many positions: that walk is a
// contiguous run of page_tokens × head_dim values per page, where a position-major page would
// make it a 256-byte read every n_kv_heads × head_dim × 2 bytes (4 KiB on a 16-head model: a new
// 4 KiB page for every position, which defeats the hardware prefetcher).
// Each layer has a page table with a slot per page of the context; no page exists at load.
// Pages are taken when positions are about to be written. On the host each page slot has a fixed
// place in an address range reserved at construction for the whole context, a layer's K pages
// one after another and then its V pages, in 2 MiB pages where the kernel gives them (a page's
// memory is committed when it is first held, commit_host_pages, 2 MiB at a time per layer and
// half; the byte counts below are of the cache's own pages);
// clearing positions empties their slots and the memory stays for the next hold. A device cache
// allocates its pages from the device and returns cleared ones to a free list, taken first. So
// memory follows the positions held and steady-state generation allocates nothing. Pages are
// never zeroed: a position is always written before attention reads it.
//
// Positions are always held as a prefix [0, n): the same number of pages in every layer's
// table, all from index 0 (eval refuses gaps), which is what `held_pages_` counts.
#pragma once
#include <atomic>
#include <cstdint>
#include <vector>

#include "core/huge_region.h"
#include "kernels/attention.h"
#include "kernels/ops.h"

namespace fulcrum { class Device; }

namespace fulcrum {

class KvCache {
 public:
  // Positions per page unless the model config asks otherwise. 64 rather than 128 or 256: on the
  // 0.5B Q8_0 synthetic model (512-token prompt, 128 decoded) decode ran at the same speed with
  // all three (31.1 / 31.1 / 31.2 tokens/s on 1 thread, 49.5 / 48.7 / 51.9 on 2, within the
  // run-to-run spread); attention makes one kernel call per page segment, which is cheap at any
  // of these sizes. The smallest page holds the least memory past the last position (under 64
  // positions per layer: 7.5 MiB in use there against 9 MiB with 256) and frees at the finest grain.
  static constexpr int64_t kPageTokens = 64;
  static constexpr size_t kAlign = 64;

  // No memory is taken here beyond the page tables (n_layers × ceil(context/page_tokens) slots).
  // Throws std::runtime_error when head_dim cannot be stored in `format` (kv_format_refusal).
  KvCache(int64_t n_layers, int64_t context, int64_t n_kv_heads, int64_t head_dim, int64_t page_tokens, KvFormat format);
  // Pages taken from `device` (its budget enforced page by page, a refusal rolls the call back)
  // instead of a reserved host range: the KV pool of a device, or a device's staging layers.
  KvCache(int64_t n_layers, int64_t context, int64_t n_kv_heads, int64_t head_dim, int64_t page_tokens, KvFormat format, Device* device);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  // Makes every layer hold pages for positions [0, n_positions). Throws std::runtime_error
  // naming the layer, position and bytes when a page cannot be allocated; the cache is then as
  // it was before the call.
  void hold(int64_t n_positions);
  // Empties the slots of the pages that hold only positions ≥ from_pos (a device cache's pages go
  // to its free list).
  void release_from(int64_t from_pos);
  // Commits the host memory of the pages for positions [0, n_positions) (clamped to the context)
  // without holding them, as their first hold would (commit_host_pages); nothing for a device
  // cache, whose pages are allocated when held. Model::prepare_kv says why.
  void commit(int64_t n_positions);
  // Moves positions [from, to) to [from + delta, to + delta) in every layer (pages held first),
  // rotating each K by delta positions with `rope` (RoPE is a rotation: R(p + d) = R(d)·R(p)), so
  // cached keys read as if computed at their new positions (llama-server's --cache-reuse). V moves
  // as is. Host pages only (a device cache throws). The keys go through f32 and back to the
  // cache's format: one more rounding of each rotated key (measured in test/unit/kv-shift.test.ts).
  // ropes: one per layer of this cache (layers with their own RoPE base, gemma3), or one for all.
  void shift(int64_t from, int64_t to, int64_t delta, const std::vector<RopeParams>& ropes);
  bool on_device() const { return device_ != nullptr; }

  // Attention's view of one layer: page pointers (nullptr past the held pages).
  KvPages pages(int64_t layer) const {
    const size_t l = static_cast<size_t>(layer);
    return KvPages{k_tables_[l].data(), v_tables_[l].data(), page_tokens_, format_};
  }
  // KV head `head`'s row at position pos in layer's K or V (the page must be held); the following
  // positions of the same page follow at row_bytes() strides.
  uint8_t* k_at(int64_t layer, int64_t pos, int64_t head) const {
    return reinterpret_cast<uint8_t*>(k_tables_[static_cast<size_t>(layer)][static_cast<size_t>(pos / page_tokens_)]) +
           (head * page_tokens_ + pos % page_tokens_) * row_bytes_;
  }
  uint8_t* v_at(int64_t layer, int64_t pos, int64_t head) const {
    return reinterpret_cast<uint8_t*>(v_tables_[static_cast<size_t>(layer)][static_cast<size_t>(pos / page_tokens_)]) +
           (head * page_tokens_ + pos % page_tokens_) * row_bytes_;
  }
  KvFormat format() const { return format_; }
  // Bytes of one KV head's row (kv_row_bytes), and of a page's K (or V) rows.
  int64_t row_bytes() const { return row_bytes_; }
  uint64_t half_page_bytes() const { return static_cast<uint64_t>(page_tokens_ * n_kv_heads_ * row_bytes_); }

  int64_t page_tokens() const { return page_tokens_; }
  int64_t held_pages() const { return held_pages_.load(std::memory_order_relaxed); }
  int64_t n_layers() const { return n_layers_; }
  // Bytes of one page (K and V of page_tokens positions of one layer, with alignment padding).
  uint64_t page_bytes() const { return block_bytes_; }
  // Bytes of the pages in the page tables, and of every page allocated (free list included).
  // Safe to read from any thread.
  uint64_t bytes_in_use() const { return static_cast<uint64_t>(held_pages_.load(std::memory_order_relaxed)) * n_layers_ * block_bytes_; }
  uint64_t bytes_reserved() const { return static_cast<uint64_t>(allocated_.load(std::memory_order_relaxed)) * block_bytes_; }

 private:
  int64_t n_layers_, context_, n_kv_heads_, head_dim_, page_tokens_, table_size_;
  KvFormat format_;
  int64_t row_bytes_;  // one KV head's row
  size_t v_offset_ = 0;     // bytes from a page's start to its V rows
  uint64_t block_bytes_ = 0;
  // Per layer: the K and V row pointers of each page slot, and the page's allocation.
  std::vector<std::vector<uint16_t*>> k_tables_, v_tables_;
  std::vector<std::vector<void*>> blocks_;  // device caches only (a host page's place is fixed)
  std::vector<void*> free_;  // device caches only: capacity for every page of the context, reserved up front
  Device* device_ = nullptr;  // page source when not the reserved range
  // Host pages: layer l's K page p at host_.base() + l·layer_bytes_ + p·v_offset_, its V pages
  // after its table_size_ K pages (2 MiB aligned at the start). Empty for a device cache.
  HugeRegion host_;
  uint64_t layer_bytes_ = 0;
  int64_t touched_pages_ = 0;  // host page slots ever held: committed, and their memory stays committed
  void commit_host_pages(int64_t pages);
  // The pages that hold positions [0, n_positions), at most the table's.
  int64_t pages_for(int64_t n_positions) const;
  uint8_t* host_k_page(int64_t layer, int64_t page) const {
    return host_.base() + static_cast<uint64_t>(layer) * layer_bytes_ + static_cast<uint64_t>(page) * v_offset_;
  }
  uint8_t* host_v_page(int64_t layer, int64_t page) const {
    return host_k_page(layer, page) + static_cast<uint64_t>(table_size_) * v_offset_;
  }
  std::atomic<int64_t> held_pages_{0};  // page slots filled in every layer's table
  std::atomic<int64_t> allocated_{0};   // pages allocated (held + free)
};

}  // namespace fulcrum
