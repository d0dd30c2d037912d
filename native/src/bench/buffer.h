// Large page-aligned buffers for the memory benchmarks: mmap'd so that freeing returns the
// memory to the system at once (the profiler allocates hundreds of MiB per measurement), with
// transparent huge pages requested so TLB misses do not blur the DRAM figure.
#pragma once
#include <cstddef>
#include <cstdint>

namespace fulcrum {
namespace bench {

class BigBuffer {
 public:
  // Throws std::runtime_error naming the size when the system refuses it.
  explicit BigBuffer(size_t bytes);
  ~BigBuffer();
  BigBuffer(const BigBuffer&) = delete;
  BigBuffer& operator=(const BigBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace bench
}  // namespace fulcrum
