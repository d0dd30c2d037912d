// The read loop of the bandwidth probe (read_probe.h) with 64-byte loads.
#include <immintrin.h>

// GCC 12 reports the _mm512_undefined_* pass-through operand of its own inlined intrinsics
// (`__Y = __Y`) as uninitialised; the operand is never read (all-ones masks). False reports.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <cstdint>

namespace fulcrum {
namespace bench {

uint64_t read_stream_avx512(const uint64_t* p, int64_t words, bool prefetch) {
  constexpr int64_t ahead = 2048 / 8;  // 2 KiB, in words
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= words; i += 32) {  // four cache lines per iteration
    if (prefetch) {
      for (int l = 0; l < 4; ++l) _mm_prefetch(reinterpret_cast<const char*>(p + i + ahead + 8 * l), _MM_HINT_T0);
    }
    a0 = _mm512_xor_si512(a0, _mm512_loadu_si512(p + i));
    a1 = _mm512_xor_si512(a1, _mm512_loadu_si512(p + i + 8));
    a2 = _mm512_xor_si512(a2, _mm512_loadu_si512(p + i + 16));
    a3 = _mm512_xor_si512(a3, _mm512_loadu_si512(p + i + 24));
  }
  a0 = _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3));
  uint64_t r = static_cast<uint64_t>(_mm512_reduce_or_epi64(a0));
  for (; i < words; ++i) r ^= p[i];
  return r;
}

}  // namespace bench
}  // namespace fulcrum
