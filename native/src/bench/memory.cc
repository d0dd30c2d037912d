#include "bench/memory.h"

#include <cstring>
#include <functional>
#include <stdexcept>

#include "bench/clock.h"
#include "bench/read_probe.h"
#include "bench/team.h"

namespace fulcrum {
namespace bench {
namespace {

// Slice [begin, end) of `bytes` for thread `tid` of `threads`, 4 KiB aligned.
void slice(size_t bytes, int tid, int threads, size_t* begin, size_t* end) {
  const size_t pages = bytes / 4096;
  *begin = pages * static_cast<size_t>(tid) / static_cast<size_t>(threads) * 4096;
  *end = tid + 1 == threads ? bytes : pages * static_cast<size_t>(tid + 1) / static_cast<size_t>(threads) * 4096;
}

void check_args(size_t bytes, const std::vector<int>& thread_counts, const RunPlan& plan) {
  if (bytes < (1u << 20)) throw std::runtime_error("memory bench: buffer must be at least 1 MiB");
  if (thread_counts.empty()) throw std::runtime_error("memory bench: no thread counts");
  for (int t : thread_counts) {
    if (t < 1 || t > 1024) throw std::runtime_error("memory bench: thread count out of range");
  }
  if (plan.warmups < 0 || plan.runs < 1) throw std::runtime_error("memory bench: runs must be >= 1");
}

// Times plan.warmups + plan.runs executions of job on a team of each size.
std::vector<ThreadSamples> time_by_threads(const std::vector<int>& thread_counts, const RunPlan& plan,
                                           const CancelToken& cancel,
                                           const std::function<void(int tid, int threads)>& job) {
  std::vector<ThreadSamples> out;
  for (int threads : thread_counts) {
    Team team(threads);
    ThreadSamples s;
    s.threads = threads;
    s.ns.reserve(static_cast<size_t>(plan.runs));
    const std::function<void(int)> run = [&](int tid) { job(tid, threads); };
    for (int r = 0; r < plan.warmups + plan.runs; ++r) {
      if (cancel.cancelled()) return out;
      const int64_t t0 = now_ns();
      team.run(run);
      const int64_t t1 = now_ns();
      if (r >= plan.warmups) s.ns.push_back(t1 - t0);
    }
    out.push_back(std::move(s));
  }
  return out;
}

// Touches every page so the timed runs see no page faults; in parallel, so pages land where
// the readers run (one NUMA node here, but the same code is right on two).
void first_touch(BigBuffer& buf, int threads) {
  Team team(threads);
  team.run([&](int tid) {
    size_t b, e;
    slice(buf.size(), tid, threads, &b, &e);
    for (size_t i = b; i < e; i += 64) buf.data()[i] = static_cast<uint8_t>(i >> 12);
  });
}

int max_of(const std::vector<int>& v) {
  int m = 1;
  for (int x : v) m = x > m ? x : m;
  return m;
}

}  // namespace

std::vector<ThreadSamples> bench_memory_read(size_t bytes, const std::vector<int>& thread_counts,
                                             const RunPlan& plan, const CancelToken& cancel, bool prefetch, int streams) {
  check_args(bytes, thread_counts, plan);
  BigBuffer buf(bytes);
  first_touch(buf, max_of(thread_counts));
  std::atomic<uint64_t> sink{0};
  auto out = time_by_threads(thread_counts, plan, cancel, [&](int tid, int threads) {
    size_t b, e;
    slice(bytes, tid, threads, &b, &e);
    // Slices are 4 KiB aligned, so whole 64-bit words.
    sink.fetch_add(read_streams(reinterpret_cast<const uint64_t*>(buf.data() + b), static_cast<int64_t>((e - b) / 8), streams, prefetch),
                   std::memory_order_relaxed);
  });
  keep(sink);
  return out;
}

std::vector<ThreadSamples> bench_memory_copy(size_t bytes, const std::vector<int>& thread_counts,
                                             const RunPlan& plan, const CancelToken& cancel) {
  check_args(bytes, thread_counts, plan);
  BigBuffer src(bytes), dst(bytes);
  first_touch(src, max_of(thread_counts));
  first_touch(dst, max_of(thread_counts));
  return time_by_threads(thread_counts, plan, cancel, [&](int tid, int threads) {
    size_t b, e;
    slice(bytes, tid, threads, &b, &e);
    std::memcpy(dst.data() + b, src.data() + b, e - b);
  });
}

BackgroundCopier::BackgroundCopier(size_t bytes) : src_(bytes), dst_(bytes), chunk_(bytes) {
  std::memset(src_.data(), 1, bytes);
  std::memset(dst_.data(), 2, bytes);
}

BackgroundCopier::~BackgroundCopier() {
  if (thread_.joinable()) stop();
}

void BackgroundCopier::start() {
  if (thread_.joinable()) throw std::runtime_error("background copier: already running");
  stop_.store(false);
  copies_.store(0);
  started_ns_ = now_ns();
  std::atomic<bool> running{false};
  thread_ = std::thread([this, &running] {
    running.store(true, std::memory_order_release);
    // Copy in 4 MiB pieces so stop() is honoured within about a millisecond.
    const size_t piece = size_t{4} << 20;
    uint64_t copied = 0;
    while (!stop_.load(std::memory_order_relaxed)) {
      for (size_t off = 0; off < chunk_ && !stop_.load(std::memory_order_relaxed); off += piece) {
        const size_t n = chunk_ - off < piece ? chunk_ - off : piece;
        std::memcpy(dst_.data() + off, src_.data() + off, n);
        copied += n;
      }
    }
    copies_.store(copied, std::memory_order_release);
  });
  while (!running.load(std::memory_order_acquire)) std::this_thread::yield();
}

TransferTotals BackgroundCopier::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  TransferTotals t;
  t.ns = now_ns() - started_ns_;
  t.bytes = copies_.load(std::memory_order_acquire);
  return t;
}

}  // namespace bench
}  // namespace fulcrum
