// AVX2 helpers shared by the quant/*_avx2.cc and *_avx512.cc files. Everything is `static inline`
// (internal linkage): each ISA file keeps its own copy, so no AVX instruction can leak into
// baseline code through ODR merging. Include only from files compiled with -mavx2 -mfma -mf16c.
#pragma once
#if defined(__AVX512F__)
// GCC 12 reports its own _mm512_undefined_* idiom (`__Y = __Y`) inside inlined intrinsics such
// as _mm512_cvtepi32_ps / _mm512_inserti64x4 as uninitialised; those reports are false.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#include <cstdint>
#include <cstring>

#include "quant/formats/fp16_table.h"

namespace fulcrum {
namespace quant {
namespace simd {

// Kernel names get the ISA of the including file: QUANT_FN(vec_dot_q4_0) -> vec_dot_q4_0_avx2.
// The *_avx2.cc files are compiled twice (binding.gyp): plain, and with -mavxvnni for the avxvnni
// level (core/isa.h). They name their ISA QUANT_AVX2_LEVEL, which the compiler flags decide, so a
// copy's names cannot disagree with the instructions in it.
#if defined(__AVXVNNI__)
#define QUANT_AVX2_LEVEL avxvnni
#else
#define QUANT_AVX2_LEVEL avx2
#endif
#define QUANT_CAT2(a, b) a##_##b
#define QUANT_CAT(a, b) QUANT_CAT2(a, b)
#define QUANT_FN(name) QUANT_CAT(name, QUANT_ISA)

// Block scales: table lookup (exact, same value as F16C's conversion), cheaper than vcvtph2ps.
static inline float f16(uint16_t h) { return g_f16_table[h]; }
static inline uint16_t to_f16(float f) { return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT)); }

// Weight rows stream from memory once per token; prefetching this far ahead of the block being
// read more than doubles the throughput of the 32-element formats when the matrix is in DRAM
// (measured on a Xeon VM: Q4_0 3.6 -> 8+ GB/s single thread; 2 KiB beat 0.5, 1 and 4 KiB), and
// costs nothing measurable when it is in cache. Overridable at build time for experiments.
#ifndef FULCRUM_QUANT_PREFETCH
#define FULCRUM_QUANT_PREFETCH 2048
#endif
constexpr int kPrefetchAhead = FULCRUM_QUANT_PREFETCH;
// Prefetch the `bytes` that sit kPrefetchAhead bytes past p (one prefetch per cache line).
template <int bytes>
static inline void prefetch_ahead(const void* p) {
  const char* c = static_cast<const char*>(p) + kPrefetchAhead;
  for (int off = 0; off < bytes; off += 64) _mm_prefetch(c + off, _MM_HINT_T0);
}

static inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

static inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

static inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

static inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

// 16 bytes of packed nibbles -> 32 bytes 0..15: low nibbles first (elements 0..15), then high.
static inline __m256i nibbles_32(const uint8_t* p) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// 32 bits (little-endian) -> 32 bytes, byte j = 0xFF where bit j is set, else 0.
static inline __m256i bits_to_bytes_32(const uint8_t* p) {
  uint32_t x;
  std::memcpy(&x, p, 4);
  const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                        2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(x)), shuf);
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
}

// acc + Σ over groups of 4 of u8 * s8 -> 8 int32. u <= 128 and |s| <= 127 keep maddubs below
// int16 saturation, so every path gives the same integers.
// With AVX-512 VNNI (the *_avx512.cc files) or AVX-VNNI (the avxvnni copies) this is one vpdpbusd,
// which also does the accumulate; on plain AVX2 it is vpmaddubsw, vpmaddwd and vpaddd.
static inline __m256i dot_us8_add(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(acc, u, s);
#elif defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}
// Σ over groups of 4 of u8 * s8 -> 8 int32 (same limits as dot_us8_add).
static inline __m256i dot_us8(__m256i u, __m256i s) {
#if defined(__AVX512VNNI__) || defined(__AVXVNNI__)
  return dot_us8_add(_mm256_setzero_si256(), u, s);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}
// Σ s8 * s8 -> 8 int32, through |a| * (b with a's sign).
static inline __m256i dot_ss8(__m256i a, __m256i b) {
  return dot_us8(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

// 32 floats -> 32 int8 = round-half-even(x * id), clamped to [-127, 127], in element order.
static inline __m256i quantize_32(const float* x, __m256 id) {
  const __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 0), id));
  const __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), id));
  const __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), id));
  const __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), id));
  // packs work per 128-bit lane; the permute restores element order.
  const __m256i w01 = _mm256_packs_epi32(i0, i1);
  const __m256i w23 = _mm256_packs_epi32(i2, i3);
  __m256i b = _mm256_packs_epi16(w01, w23);
  b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  return _mm256_max_epi8(b, _mm256_set1_epi8(-127));
}

static inline float amax_32(const float* x) {
  __m256 m = abs_ps(_mm256_loadu_ps(x));
  m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + 8)));
  m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + 16)));
  m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + 24)));
  return hmax(m);
}

}  // namespace simd
}  // namespace quant
}  // namespace fulcrum
