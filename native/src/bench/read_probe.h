// The one read-bandwidth probe: every benchmark that measures how fast memory streams into a core
// (the profiler's memory read, bench:cpu's decode limit, the quant kernels' GB/s ceiling) reads
// through read_stream, so their figures are the same loop's and comparable.
#pragma once
#include <cstdint>

namespace fulcrum {
namespace bench {

// Reads `words` 64-bit words from `p` once and returns a value that depends on every one (so the
// loads cannot be removed). 64-byte loads where AVX-512 is available (a 16- or 8-byte loop
// under-reads the bus), four independent accumulators otherwise. With `prefetch`, each cache line
// is also prefetched 2 KiB ahead, as the decode kernels do (on some machines, this VM among them,
// that reads DRAM faster than the hardware prefetcher alone).
uint64_t read_stream(const uint64_t* p, int64_t words, bool prefetch = false);

// The same bytes read as `streams` equal segments side by side, a cache line from each in turn
// (the last words % (8 · streams) read after): what the decode GEMV does (one row-group segment
// per stream, quant/tiles/gemm_tile_dispatch.h). On a Zen 3 VM one core reads DRAM faster with
// several streams in flight than with one, so the bandwidth a core can draw is the best of both.
uint64_t read_streams(const uint64_t* p, int64_t words, int streams, bool prefetch = false);

}  // namespace bench
}  // namespace fulcrum
