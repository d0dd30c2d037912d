#include "bench/read_probe.h"

#include "core/isa.h"

namespace fulcrum {
namespace bench {

uint64_t read_stream_avx512(const uint64_t* p, int64_t words, bool prefetch);  // read_probe_avx512.cc

namespace {

// 2 KiB ahead, in words.
constexpr int64_t kPrefetchWords = 2048 / 8;

uint64_t read_stream_portable(const uint64_t* p, int64_t words, bool prefetch) {
  uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  int64_t i = 0;
  for (; i + 8 <= words; i += 8) {  // one cache line per iteration
    if (prefetch) __builtin_prefetch(p + i + kPrefetchWords, 0, 3);
    a0 ^= p[i] ^ p[i + 4];
    a1 ^= p[i + 1] ^ p[i + 5];
    a2 ^= p[i + 2] ^ p[i + 6];
    a3 ^= p[i + 3] ^ p[i + 7];
  }
  for (; i < words; ++i) a0 ^= p[i];
  return a0 ^ a1 ^ a2 ^ a3;
}

}  // namespace

uint64_t read_stream(const uint64_t* p, int64_t words, bool prefetch) {
  static const bool wide = kernel_choice().isa == Isa::Avx512;
  return wide ? read_stream_avx512(p, words, prefetch) : read_stream_portable(p, words, prefetch);
}

uint64_t read_streams(const uint64_t* p, int64_t words, int streams, bool prefetch) {
  if (streams <= 1) return read_stream(p, words, prefetch);
  const int64_t seg = words / streams / 8 * 8;  // whole cache lines per segment
  uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  for (int64_t i = 0; i < seg; i += 8) {
    for (int s = 0; s < streams; ++s) {
      const uint64_t* q = p + s * seg + i;
      if (prefetch) __builtin_prefetch(q + kPrefetchWords, 0, 3);
      a0 ^= q[0] ^ q[4];
      a1 ^= q[1] ^ q[5];
      a2 ^= q[2] ^ q[6];
      a3 ^= q[3] ^ q[7];
    }
  }
  return a0 ^ a1 ^ a2 ^ a3 ^ read_stream(p + seg * streams, words - seg * streams, prefetch);
}

}  // namespace bench
}  // namespace fulcrum
