// AVX-512 helpers for the 32-element block formats: two blocks per zmm. Include only from
// *_avx512.cc files; everything is static inline (see simd_avx2.h for why).
#pragma once
#include "quant/dot/simd_avx2.h"

namespace fulcrum {
namespace quant {
namespace simd {

// Two blocks' 16 packed-nibble bytes -> 64 bytes 0..15 laid out as the blocks' elements:
// [a low nibbles | a high nibbles | b low | b high], matching two consecutive Q8 blocks.
static inline __m512i nibbles_2x32(const uint8_t* a, const uint8_t* b) {
  const __m256i ab = _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
  // [a, a, b, b] by 64-bit lanes, then shift the second copy of each by 4 bits
  const __m512i dup = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3), _mm512_castsi256_si512(ab));
  const __m512i shifts = _mm512_setr_epi64(0, 0, 0x0004000400040004LL, 0x0004000400040004LL, 0, 0,
                                           0x0004000400040004LL, 0x0004000400040004LL);
  return _mm512_and_si512(_mm512_srlv_epi16(dup, shifts), _mm512_set1_epi8(0x0F));
}

// Two consecutive 32-byte int8 blocks (at a and b) in one zmm.
static inline __m512i load_2x32(const int8_t* a, const int8_t* b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a))),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)), 1);
}

// Per-4 sums of u8*s8 (vpdpbusd), 16 int32: lanes 0..7 block a, 8..15 block b.
static inline __m512i dot_us8_512(__m512i u, __m512i s) {
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s);
}

// [da x8 | db x8]
static inline __m512 scales_2(float da, float db) {
  return _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(da), _mm512_set1_ps(db));
}

static inline uint64_t qh_2(const uint8_t* a, const uint8_t* b) {
  uint32_t x, y;
  std::memcpy(&x, a, 4);
  std::memcpy(&y, b, 4);
  return static_cast<uint64_t>(x) | (static_cast<uint64_t>(y) << 32);
}

}  // namespace simd
}  // namespace quant
}  // namespace fulcrum
