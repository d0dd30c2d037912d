// A transfer that runs in the background while CPU kernels are timed (paper 000 §2.1: CPU ops
// are profiled under a concurrent H2D copy, which nearly doubles GEMM time). The transfer is a
// host memcpy thread standing in for the device's DMA engine.
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
  // "host-memcpy".
  virtual const char* kind() const = 0;
};

}  // namespace bench
}  // namespace fulcrum
