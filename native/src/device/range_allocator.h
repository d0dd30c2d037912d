// First-fit allocation of [0, size) in `align`-byte units with coalescing frees: the loopback
// device carves its arena with it, the Vulkan device its handle space. Not thread-safe (callers
// hold their own lock).
#pragma once
#include <cstddef>
#include <iterator>
#include <map>

namespace fulcrum {

class RangeAllocator {
 public:
  RangeAllocator(size_t size, size_t align) : size_(size), align_(align) { free_[0] = size; }
  size_t rounded(size_t bytes) const { return bytes == 0 ? align_ : (bytes + align_ - 1) / align_ * align_; }
  // Offset of a free range of rounded(bytes), or npos when there is none that large.
  static constexpr size_t npos = ~size_t{0};
  size_t take(size_t bytes) {
    const size_t n = rounded(bytes);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < n) continue;
      const size_t off = it->first, len = it->second;
      free_.erase(it);
      if (len > n) free_[off + n] = len - n;
      used_[off] = n;
      in_use_ += n;
      return off;
    }
    return npos;
  }
  // Length of the range given back (0: `off` was not taken).
  size_t give(size_t off) {
    auto u = used_.find(off);
    if (u == used_.end()) return 0;
    size_t start = off, len = u->second;
    const size_t freed = len;
    in_use_ -= len;
    used_.erase(u);
    auto next = free_.lower_bound(start);
    if (next != free_.end() && next->first == start + len) {
      len += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == start) {
        start = prev->first;
        len += prev->second;
        free_.erase(prev);
      }
    }
    free_[start] = len;
    return freed;
  }
  size_t in_use() const { return in_use_; }
  size_t size() const { return size_; }

 private:
  size_t size_, align_, in_use_ = 0;
  std::map<size_t, size_t> free_;  // offset -> length
  std::map<size_t, size_t> used_;  // offset -> length
};

}  // namespace fulcrum
