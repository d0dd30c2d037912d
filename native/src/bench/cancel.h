// Cancellation of running benchmarks: JS calls bench.cancel() when the profile's AbortSignal
// fires; every benchmark started before that call sees its token cancelled and returns early
// (between timed runs), so an aborted profile stops within one run.
#pragma once
#include <atomic>
#include <cstdint>

namespace fulcrum {
namespace bench {

class CancelToken {
 public:
  // A token for work starting now.
  static CancelToken current() { return CancelToken(epoch().load(std::memory_order_acquire)); }
  // Cancels every token handed out so far.
  static void cancel_all() { epoch().fetch_add(1, std::memory_order_acq_rel); }
  bool cancelled() const { return epoch().load(std::memory_order_relaxed) != epoch_; }

 private:
  explicit CancelToken(uint64_t e) : epoch_(e) {}
  static std::atomic<uint64_t>& epoch() {
    static std::atomic<uint64_t> e{0};
    return e;
  }
  uint64_t epoch_;
};

}  // namespace bench
}  // namespace fulcrum
