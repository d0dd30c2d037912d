// A persistent pool of worker threads. `run(fn)` calls fn(ith, nth) exactly once for every
// ith in [0, nth) and returns when all calls have finished: one dispatch plus one join per call,
// no allocation. The caller runs share 0; each worker claims its own share when it wakes, and
// the caller runs any share whose worker has not claimed it by the time the caller is done —
// so a worker that the OS has not scheduled (a busy machine) delays nothing. Workers spin
// briefly on the dispatch counter (decode issues kernels back to back) and then sleep on a
// condition variable, so an idle model costs no CPU.
#pragma once
#include <atomic>
#include <memory>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace fulcrum {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  template <class F>
  void run(F&& fn) {
    run_impl(&call<typename std::remove_reference<F>::type>, const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // Splits [0, n) into nth contiguous ranges; thread ith gets [begin, end).
  static void split(int64_t n, int ith, int nth, int64_t* begin, int64_t* end) {
    const int64_t per = n / nth, extra = n % nth;
    *begin = ith * per + (ith < extra ? ith : extra);
    *end = *begin + per + (ith < extra ? 1 : 0);
  }

 private:
  template <class F>
  static void call(void* ctx, int ith, int nth) { (*static_cast<F*>(ctx))(ith, nth); }
  void run_impl(void (*fn)(void*, int, int), void* ctx);
  void worker_loop(int ith);

  const int n_threads_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> generation_{0};
  // Per share of the current job: 0 unclaimed, 1 claimed by its worker, 2 run by the caller,
  // 3 finished by its worker.
  std::unique_ptr<std::atomic<int>[]> slots_;
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  void (*fn_)(void*, int, int) = nullptr;
  void* ctx_ = nullptr;
  std::mutex mutex_;
  std::condition_variable wake_;
};

// Hands out [0, n) in contiguous chunks from a shared counter, each claim taking the work left
// divided by the thread count (rounded up to `unit`, at least `min_chunk`). When the threads
// start together the first takes a full share and the others' claims follow each other, so each
// thread streams one long run of rows (a hardware prefetcher restarts at every jump); a thread
// that runs late (preempted) still leaves its work to the others, who claim the shrinking rest.
class ChunkCounter {
 public:
  ChunkCounter(int64_t n, int64_t unit, int64_t min_chunk, int nth)
      : n_(n), unit_(unit < 1 ? 1 : unit), min_(min_chunk < 1 ? 1 : min_chunk), nth_(nth < 1 ? 1 : nth) {}
  bool claim(int64_t* begin, int64_t* end) {
    int64_t cur = next_.load(std::memory_order_relaxed);
    for (;;) {
      if (cur >= n_) return false;
      const int64_t left = n_ - cur;
      int64_t size = (left / nth_ + unit_ - 1) / unit_ * unit_;
      if (size < min_) size = min_;
      if (size > left) size = left;
      if (next_.compare_exchange_weak(cur, cur + size, std::memory_order_relaxed)) {
        *begin = cur;
        *end = cur + size;
        return true;
      }
    }
  }

 private:
  const int64_t n_, unit_, min_;
  const int nth_;
  std::atomic<int64_t> next_{0};
};

// Physical cores this process may run on (distinct core/package pairs under /sys among the CPUs
// in the affinity mask); falls back to the logical count.
int physical_cores();

}  // namespace fulcrum
