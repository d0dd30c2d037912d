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

// Hands out [0, n) in contiguous chunks of `chunk` from a shared counter: one fetch_add a claim.
// Threads that run late (preempted) claim fewer chunks instead of holding everyone at the join.
class ChunkCounter {
 public:
  ChunkCounter(int64_t n, int64_t chunk) : n_(n), chunk_(chunk < 1 ? 1 : chunk) {}
  bool claim(int64_t* begin, int64_t* end) {
    const int64_t b = next_.fetch_add(chunk_, std::memory_order_relaxed);
    if (b >= n_) return false;
    *begin = b;
    *end = b + chunk_ < n_ ? b + chunk_ : n_;
    return true;
  }

 private:
  const int64_t n_, chunk_;
  std::atomic<int64_t> next_{0};
};

// Decode's claims of [0, n): `chunk` while much is left, then about 1/split of what is left,
// down to `unit` (every claim a multiple of it but the last). A GEMV's fixed claims leave the
// caller waiting at the join for the other thread's last whole chunk; shrinking claims end
// both threads within a few small claims of each other. (Measured with the pool instrumented, 0.5B
// Q4_0 at 2 threads: the caller's wait at a join 2.28 µs with fixed claims, 1.20-1.57 tapered.)
// kernels/matmul.cc decode_claims chooses chunk and split. One compare-exchange a claim.
class TaperedCounter {
 public:
  TaperedCounter(int64_t n, int64_t chunk, int64_t unit, int split)
      : n_(n), chunk_(chunk < 1 ? 1 : chunk), unit_(unit < 1 ? 1 : unit), split_(split < 1 ? 1 : split) {}
  bool claim(int64_t* begin, int64_t* end) {
    int64_t b = next_.load(std::memory_order_relaxed);
    for (;;) {
      if (b >= n_) return false;
      const int64_t left = n_ - b;
      int64_t take = left / split_ / unit_ * unit_;
      take = take < unit_ ? unit_ : take > chunk_ ? chunk_ : take;
      const int64_t e = take < left ? b + take : n_;
      if (next_.compare_exchange_weak(b, e, std::memory_order_relaxed)) {
        *begin = b;
        *end = e;
        return true;
      }
    }
  }

 private:
  const int64_t n_, chunk_, unit_, split_;
  std::atomic<int64_t> next_{0};
};

// Physical cores this process may run on (distinct core/package pairs under /sys among the CPUs
// in the affinity mask); falls back to the logical count.
int physical_cores();

}  // namespace fulcrum
