// The benchmarks' one clock: the steady clock in nanoseconds (never the wall clock, which can
// jump), and a compiler barrier that keeps measured results from being optimised away.
#pragma once
#include <time.h>

#include <chrono>
#include <cstdint>

namespace fulcrum {
namespace bench {

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// CPU time consumed by the calling thread: unlike the steady clock it does not advance while
// the thread is preempted, so it separates memory stalls (which it counts) from time-sharing
// with other threads on the same core (which it does not).
inline int64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Makes `value` observable to the compiler so the loop that produced it is kept.
template <typename T>
inline void keep(const T& value) {
  asm volatile("" : : "g"(&value) : "memory");
}

}  // namespace bench
}  // namespace fulcrum
