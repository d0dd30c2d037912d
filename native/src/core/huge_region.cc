#include "core/huge_region.h"

#include <cerrno>

#include <sys/mman.h>

namespace fulcrum {

HugeRegion::HugeRegion(size_t bytes, bool huge_pages) {
  usable_ = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  // One huge page more than used, so the base can be moved up to a 2 MiB boundary.
  map_size_ = usable_ + kHugePage;
  void* p = ::mmap(nullptr, map_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    error_ = errno;
    map_size_ = usable_ = 0;
    return;
  }
  map_ = p;
  base_ = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + kHugePage - 1) / kHugePage * kHugePage);
#ifdef MADV_HUGEPAGE
  if (huge_pages) ::madvise(base_, usable_, MADV_HUGEPAGE);
#else
  (void)huge_pages;
#endif
}

HugeRegion& HugeRegion::operator=(HugeRegion&& o) noexcept {
  if (this != &o) {
    release();
    map_ = o.map_;
    map_size_ = o.map_size_;
    base_ = o.base_;
    usable_ = o.usable_;
    error_ = o.error_;
    o.map_ = nullptr;
    o.map_size_ = o.usable_ = 0;
    o.base_ = nullptr;
  }
  return *this;
}

void HugeRegion::release() {
  if (map_) ::munmap(map_, map_size_);
  map_ = nullptr;
  map_size_ = usable_ = 0;
  base_ = nullptr;
}

}  // namespace fulcrum
