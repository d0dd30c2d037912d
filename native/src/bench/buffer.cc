#include "bench/buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace fulcrum {
namespace bench {

BigBuffer::BigBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) throw std::runtime_error("bench buffer: size must be positive");
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    throw std::runtime_error("bench buffer: cannot allocate " + std::to_string(bytes) +
                             " bytes: " + std::strerror(errno));
  }
#ifdef MADV_HUGEPAGE
  madvise(p, bytes, MADV_HUGEPAGE);  // advisory; ignored where THP is off
#endif
  data_ = static_cast<uint8_t*>(p);
}

BigBuffer::~BigBuffer() {
  if (data_) munmap(data_, size_);
}

}  // namespace bench
}  // namespace fulcrum
