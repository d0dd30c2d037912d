// GPU-side measurements through the CUDA driver API (loaded at run time): which devices exist,
// host↔device bandwidth with pageable and pinned host memory, device-to-device copy bandwidth,
// per-transfer latency, and the cost of one tiny asynchronous operation (a launch-overhead
// proxy). Also the real H2D DMA used as the concurrent transfer of the contention measurement.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <atomic>
#include <vector>

#include "bench/cancel.h"
#include "bench/cuda_driver.h"
#include "bench/disturb.h"
#include "bench/memory.h"

namespace fulcrum {
namespace bench {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  size_t total_bytes = 0;
  int cc_major = 0, cc_minor = 0;
  int multiprocessors = 0;
  int clock_khz = 0, memory_clock_khz = 0, memory_bus_bits = 0;
};

struct CudaProbe {
  bool available = false;
  std::string reason;  // why not, when !available
  int driver_version = 0;
  std::vector<CudaDeviceInfo> devices;
};

CudaProbe cuda_probe();

struct CudaLinkSamples {
  size_t bytes = 0;        // size of each large transfer
  size_t small_bytes = 0;  // size of the latency transfers
  size_t free_bytes = 0, total_bytes = 0;  // cuMemGetInfo once the context exists
  std::vector<int64_t> h2d_pageable, h2d_pinned, d2h_pageable, d2h_pinned, d2d, small_h2d;
  std::vector<int64_t> tiny_op;  // ns per asynchronous 1-byte memset, averaged over a batch
};

// Throws std::runtime_error naming the failing driver call.
CudaLinkSamples bench_cuda_link(int device, size_t bytes, const RunPlan& plan, const CancelToken& cancel);

// Loops cudaMemcpyAsync-style H2D copies from pinned host memory until stopped.
class CudaDmaCopier : public Disturber {
 public:
  CudaDmaCopier(int device, size_t bytes);
  ~CudaDmaCopier() override;
  void start() override;
  TransferTotals stop() override;
  const char* kind() const override { return "cuda-h2d"; }

 private:
  const CudaDriver* d_;
  int device_;
  CuContext ctx_ = nullptr;
  void* host_ = nullptr;
  CuDevicePtr dev_ = 0;
  size_t bytes_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> copied_{0};
  std::string error_;
  int64_t started_ns_ = 0;
};

}  // namespace bench
}  // namespace fulcrum
