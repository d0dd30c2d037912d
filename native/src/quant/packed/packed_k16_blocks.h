// The q4_kx16 / q5_kx16 super-blocks (repack.h) as the AVX-512 kernels read them: the offsets, the
// 16 rows' scales and mins unpacked from their scale-word planes, the fifth bit's merge, and the
// float step that ends a (row group, token, super-block) from its exact integer sums. Shared by
// the AVX-512 VNNI kernels (packed_k16_avx512.cc) and the AMX-INT8 prefill tiles over the same
// layout (packed_k16_amx_avx512.cc), so both give every output the same bits. Include only from
// *_avx512.cc files after simd_avx512.h; everything has internal linkage (ODR rule: no shared
// inline ISA code).
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "quant/formats/blocks.h"
#include "quant/packed/repack.h"

namespace fulcrum {
namespace quant {
namespace {

// q4_kx16 / q5_kx16 offsets (repack.h): d, dmin, the three scale-word planes, the fifth-bit
// vectors (Q5_K), then the nibble vectors.
constexpr size_t kDAt = k_rows::d_at(16), kDminAt = k_rows::dmin_at(16), kQhAt = k_rows::qh_at(16);
constexpr size_t kW0At = k_rows::scale_words_at(16), kW1At = kW0At + 64, kW2At = kW0At + 128;
template <bool kFifthBit>
constexpr size_t kQsAt = k_rows::qs_at(16, kFifthBit);

// (v & 0x0f) | (bit & 0x10), the bit at position 4 of `bit` already shifted there: vpternlogd of
// A = v, B = bit & 0x10, C = 0x0f as (A & C) | B.
template <int kShift>
inline __m512i with_fifth_bit(__m512i v, __m512i qh, __m512i m0f, __m512i m10) {
  const __m512i b = kShift > 0 ? _mm512_slli_epi16(qh, kShift) : kShift < 0 ? _mm512_srli_epi16(qh, -kShift) : qh;
  return _mm512_ternarylogic_epi32(v, _mm512_and_si512(b, m10), m0f, 0xEC);
}

inline __m512i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// The group's per-super-block factors: the rows' 6-bit scales and mins (byte j of a lane: sub-block
// j or 4 + j), their d and dmin.
struct Scales {
  __m512i sc_lo, sc_hi;            // bytes: scales 0-3 / 4-7
  __m512i m02, m13, m46, m57;      // int16 pairs: (min 0, min 2), (1, 3), (4, 6), (5, 7)
  __m512 d, dmin;
};

// vec_dot_q4_k's unpacking of the 12 scale bytes (utils: scales 0-3 = W0 & 0x3f, mins 0-3 = W1 &
// 0x3f, scales 4-7 = (W2 & 0x0f) | ((W0 >> 2) & 0x30), mins 4-7 = ((W2 >> 4) & 0x0f) | ((W1 >> 2) &
// 0x30), per byte) on the 16 rows' words at once.
inline Scales load_scales(const uint8_t* cw) {
  const __m512i w0 = _mm512_loadu_si512(cw + kW0At), w1 = _mm512_loadu_si512(cw + kW1At), w2 = _mm512_loadu_si512(cw + kW2At);
  const __m512i m3f = _mm512_set1_epi8(0x3f), m0f = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
  Scales s;
  s.sc_lo = _mm512_and_si512(w0, m3f);
  // (A & C) | B: vpternlogd 0xEC.
  s.sc_hi = _mm512_ternarylogic_epi32(w2, _mm512_and_si512(_mm512_srli_epi32(w0, 2), m30), m0f, 0xEC);
  const __m512i mins_lo = _mm512_and_si512(w1, m3f);
  const __m512i mins_hi = _mm512_ternarylogic_epi32(_mm512_srli_epi32(w2, 4), _mm512_and_si512(_mm512_srli_epi32(w1, 2), m30), m0f, 0xEC);
  const __m512i low_bytes = _mm512_set1_epi16(0x00ff);
  s.m02 = _mm512_and_si512(mins_lo, low_bytes), s.m13 = _mm512_srli_epi16(mins_lo, 8);
  s.m46 = _mm512_and_si512(mins_hi, low_bytes), s.m57 = _mm512_srli_epi16(mins_hi, 8);
  s.d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(cw + kDAt)));
  s.dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(cw + kDminAt)));
  return s;
}

// Sub-block j's scale of each row as an int32 lane.
template <int J>
inline __m512i scale_of(const Scales& s) {
  const __m512i v = J < 4 ? s.sc_lo : s.sc_hi;
  constexpr int kShift = 8 * (J % 4);
  if constexpr (kShift == 24) return _mm512_srli_epi32(v, 24);
  else return _mm512_and_si512(kShift == 0 ? v : _mm512_srli_epi32(v, kShift), _mm512_set1_epi32(0xff));
}

// The end of one (row group, token, super-block): the token's mins term Σ_j m_j·B_j (its
// sub-block sums B_j from the 16-element bsums, as the int16 pairs the mins are in), then
// d·dy·sum − dmin·dy·mins into the accumulator.
inline __m512 finish_super_block(__m512 acc, __m512i sum, const Scales& s, const block_q8_K* y) {
  // (B0, B2), (B1, B3), (B4, B6), (B5, B7).
  const __m128i b = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y->bsums)),
                                   _mm_loadu_si128(reinterpret_cast<const __m128i*>(y->bsums + 8)));
  const __m128i pairs = _mm_shuffle_epi8(b, _mm_setr_epi8(0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15));
  __m512i mins = _mm512_dpwssd_epi32(_mm512_setzero_si512(), s.m02, _mm512_set1_epi32(_mm_extract_epi32(pairs, 0)));
  mins = _mm512_dpwssd_epi32(mins, s.m13, _mm512_set1_epi32(_mm_extract_epi32(pairs, 1)));
  mins = _mm512_dpwssd_epi32(mins, s.m46, _mm512_set1_epi32(_mm_extract_epi32(pairs, 2)));
  mins = _mm512_dpwssd_epi32(mins, s.m57, _mm512_set1_epi32(_mm_extract_epi32(pairs, 3)));
  const __m512 dy = _mm512_set1_ps(y->d);
  acc = _mm512_fmadd_ps(_mm512_mul_ps(s.d, dy), _mm512_cvtepi32_ps(sum), acc);
  return _mm512_fnmadd_ps(_mm512_mul_ps(s.dmin, dy), _mm512_cvtepi32_ps(mins), acc);
}

}  // namespace
}  // namespace quant
}  // namespace fulcrum
