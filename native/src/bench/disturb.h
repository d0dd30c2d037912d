// A transfer that runs in the background while CPU kernels are timed (paper 000 §2.1: CPU ops
// are profiled under a concurrent H2D copy, which nearly doubles GEMM time). Two kinds: a
// CUDA host→device DMA when a GPU exists, and a host memcpy thread as the stand-in without one.
#pragma once
#include <cstdint>

namespace fulcrum {
namespace bench {

struct TransferTotals {
  uint64_t bytes = 0;  // bytes transferred while running (each byte counted once)
  int64_t ns = 0;
};

class Disturber {
 public:
  virtual ~Disturber() = default;
  // Starts the transfer loop; returns once it is under way.
  virtual void start() = 0;
  virtual TransferTotals stop() = 0;
  // "cuda-h2d" or "host-memcpy".
  virtual const char* kind() const = 0;
};

}  // namespace bench
}  // namespace fulcrum
