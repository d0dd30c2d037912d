// Memory microbenchmarks for the hardware profile: streaming read and copy bandwidth of a buffer
// far larger than the last-level cache, by thread count; and a background copier that keeps
// DRAM busy while CPU kernels are timed (paper 000 §2.1: CPU timings are taken under a
// concurrent transfer; without a GPU, a host memcpy thread stands in for the H2D DMA).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "bench/buffer.h"
#include "bench/cancel.h"
#include "bench/disturb.h"

namespace fulcrum {
namespace bench {

struct RunPlan {
  int warmups = 1;
  int runs = 5;
};

// Timed runs (warm-ups excluded) at one thread count.
struct ThreadSamples {
  int threads = 0;
  std::vector<int64_t> ns;
  // Kernel benchmarks: CPU time of the calling thread (pool thread 0) per timed run.
  std::vector<int64_t> cpu_ns;
};

// Each run reads all `bytes` once, split into one contiguous slice per thread, through the one
// read probe (read_probe.h; `prefetch` and `streams` as there). The only read-bandwidth benchmark: the
// profiler's memory read, bench:cpu's decode limit and the quant kernels' single-thread ceiling
// (test/bench/bench-quant.mjs) all call it.
std::vector<ThreadSamples> bench_memory_read(size_t bytes, const std::vector<int>& thread_counts,
                                             const RunPlan& plan, const CancelToken& cancel, bool prefetch = false, int streams = 1);

// Each run copies `bytes` (source and destination are separate `bytes`-sized buffers), split
// into one slice per thread.
std::vector<ThreadSamples> bench_memory_copy(size_t bytes, const std::vector<int>& thread_counts,
                                             const RunPlan& plan, const CancelToken& cancel);

// Copies between two buffers of `bytes` each on its own thread until stopped: the stand-in
// for an H2D DMA on a machine without a GPU. Unlike a DMA it occupies one core, so callers
// time kernels on the remaining cores to measure memory contention, not time-sharing.
class BackgroundCopier : public Disturber {
 public:
  explicit BackgroundCopier(size_t bytes);
  ~BackgroundCopier() override;
  BackgroundCopier(const BackgroundCopier&) = delete;
  BackgroundCopier& operator=(const BackgroundCopier&) = delete;

  void start() override;
  TransferTotals stop() override;
  const char* kind() const override { return "host-memcpy"; }

 private:
  BigBuffer src_, dst_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> copies_{0};
  int64_t started_ns_ = 0;
  size_t chunk_;
};

}  // namespace bench
}  // namespace fulcrum
