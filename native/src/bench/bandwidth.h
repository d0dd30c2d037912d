// Sustained memory read bandwidth with the model's own thread pool: the physical limit that
// decode (which streams every weight once per token) is compared against (bench:cpu). Each
// thread reads its slice with the one read probe (bench/read_probe.h).
#pragma once
#include <cstdint>

#include "core/thread_pool.h"

namespace fulcrum {

// Reads a `bytes` buffer `reps` times with `pool`'s threads; returns the best bytes/second (other
// load on the machine only lowers the figure; the limit is the best the memory system delivers).
double read_bandwidth(ThreadPool& pool, uint64_t bytes, int reps);

}  // namespace fulcrum
