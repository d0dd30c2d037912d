#include "bench/bandwidth.h"

#include "bench/read_probe.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

namespace fulcrum {

double read_bandwidth(ThreadPool& pool, uint64_t bytes, int reps) {
  const uint64_t words = bytes / sizeof(uint64_t);
  if (words < 1024 || reps < 1) throw std::invalid_argument("read_bandwidth: need at least 8 KiB and 1 repetition");
  std::unique_ptr<uint64_t[]> buf(new uint64_t[words]);
  // First touch from the threads that will read, so pages land near them.
  pool.run([&](int ith, int nth) {
    int64_t b, e;
    ThreadPool::split(static_cast<int64_t>(words), ith, nth, &b, &e);
    for (int64_t i = b; i < e; ++i) buf[i] = static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
  });
  std::vector<uint64_t> sink(static_cast<size_t>(pool.size()) * 8, 0);
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.run([&](int ith, int nth) {
      int64_t b, e;
      ThreadPool::split(static_cast<int64_t>(words), ith, nth, &b, &e);
      sink[static_cast<size_t>(ith) * 8] ^= bench::read_stream(buf.get() + b, e - b);  // one cache line per thread
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(static_cast<double>(words * sizeof(uint64_t)) / s);
  }
  volatile uint64_t keep = sink[0];
  (void)keep;
  // The best repetition: on a shared machine the others only ever lower the figure, and the
  // limit being estimated is what the memory system can deliver.
  return *std::max_element(rates.begin(), rates.end());
}

}  // namespace fulcrum
