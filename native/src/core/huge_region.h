// An anonymous address range whose base is aligned to 2 MiB and, when asked, advised for
// transparent huge pages: what the weight copy (Model::relocate_matmul_weights) and the host KV
// cache (KvCache) are kept in. Only the address space is reserved here; pages take memory when
// first written or populated. Both need the same three steps (reserve 2 MiB more than asked, align
// the base up, advise the aligned part), so they live here once.
#pragma once
#include <cstddef>
#include <cstdint>

namespace fulcrum {

class HugeRegion {
 public:
  HugeRegion() = default;
  // At least `bytes` usable from base(); huge_pages: MADV_HUGEPAGE on them (advisory: where
  // transparent huge pages are off, or the kernel predates the advice, 4 KiB pages). On failure
  // ok() is false and error() holds mmap's errno; nothing throws.
  HugeRegion(size_t bytes, bool huge_pages);
  ~HugeRegion() { release(); }
  HugeRegion(const HugeRegion&) = delete;
  HugeRegion& operator=(const HugeRegion&) = delete;
  HugeRegion(HugeRegion&& o) noexcept { *this = static_cast<HugeRegion&&>(o); }
  HugeRegion& operator=(HugeRegion&& o) noexcept;

  static constexpr size_t kHugePage = size_t{2} << 20;
  bool ok() const { return base_ != nullptr; }
  int error() const { return error_; }
  uint8_t* base() const { return base_; }
  // Usable bytes from base() (the request rounded up to whole 2 MiB pages).
  size_t usable() const { return usable_; }
  // Returns the address space to the system (the destructor does the same).
  void release();

 private:
  void* map_ = nullptr;  // what mmap returned, map_size_ bytes
  size_t map_size_ = 0;
  uint8_t* base_ = nullptr;
  size_t usable_ = 0;
  int error_ = 0;
};

}  // namespace fulcrum
