// The q4_0x16 / q4_1x16 / q5_0x16 / q5_1x16 / q8_0x16 blocks (repack.h) as the AVX-512 kernels
// read them: eight unsigned vectors whose 32-bit lane r holds four quants of row r, the rows'
// scales (and Q4_1's / Q5_1's mins). Shared by the AVX-512 VNNI kernels (packed_x16_avx512.cc)
// and the AMX-INT8 prefill tiles over the same layout (packed_x16_amx_avx512.cc), whose weight
// tile is exactly these eight vectors, one 64-byte tile row each. Include only from *_avx512.cc
// files after simd_avx512.h; everything has internal linkage (ODR rule: no shared inline ISA code).
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "quant/formats/blocks.h"

namespace fulcrum {
namespace quant {
namespace {

// One block of the group's 16 rows as eight unsigned vectors: u[m] lane r = row r's quants
// 4m..4m+3 (plus the format's offset); d the rows' scales.
struct BlockW {
  __m512i u[8];
  __m512 d;
};

inline __m512 load_scales(const uint8_t* cw) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(cw))); }

// A block's scales at cw and its 4 × 64 nibble bytes at qs: vector k's low nibbles are quants
// 4k.., its high nibbles 16+4k.. (q4_0x16, and q5_0x16's low four bits).
inline BlockW load_nibbles(const uint8_t* cw, const uint8_t* qs) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  BlockW b;
  b.d = load_scales(cw);
  for (int k = 0; k < 4; ++k) {
    const __m512i v = _mm512_loadu_si512(qs + 64 * k);
    b.u[k] = _mm512_and_si512(v, m4);
    b.u[k + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
  }
  return b;
}

// Formats whose value is d·q + m (Q4_1, Q5_1) have kMin: their blocks carry the rows' m and their
// activations the token's s = dy·Σy (Q8_1's, "q8_1 sums") in place of a seed, and a block adds
// m·s after the scaled integer sum (vec_dot_q5_1's terms).
// q4_0x16: 288 bytes a block, the nibbles at 32.
struct Q4_0x16 {
  static constexpr size_t kBlockBytes = 16 * sizeof(block_q4_0);
  static constexpr bool kMin = false;
  static inline BlockW load(const uint8_t* cw) { return load_nibbles(cw, cw + 32); }
};

// q4_1x16: 320 bytes a block: the rows' d at 0 and m at 32 (f16), the nibbles at 64.
struct Q4_1x16 {
  static constexpr size_t kBlockBytes = 16 * sizeof(block_q4_1);
  static constexpr bool kMin = true;
  static inline BlockW load(const uint8_t* cw) { return load_nibbles(cw, cw + 64); }
  static inline __m512 mins(const uint8_t* cw) { return load_scales(cw + 32); }
};

// q5_0x16: 352 bytes a block; the nibbles as q4_0x16's at 96, and at 32 eight 64-bit masks whose
// bit 4·r + b says row r's quant 4m + b (m = 0..7) has its fifth bit: one masked add each.
struct Q5_0x16 {
  static constexpr size_t kBlockBytes = 16 * sizeof(block_q5_0);
  static constexpr bool kMin = false;
  // The scales at cw, the masks at masks, the nibbles at qs.
  static inline BlockW load_at(const uint8_t* cw, const uint8_t* masks, const uint8_t* qs) {
    const __m512i sixteen = _mm512_set1_epi8(16);
    BlockW b = load_nibbles(cw, qs);
    for (int m = 0; m < 8; ++m) {
      uint64_t bits;
      std::memcpy(&bits, masks + 8 * m, 8);
      b.u[m] = _mm512_mask_add_epi8(b.u[m], _cvtu64_mask64(bits), b.u[m], sixteen);
    }
    return b;
  }
  static inline BlockW load(const uint8_t* cw) { return load_at(cw, cw + 32, cw + 96); }
};

// q5_1x16: 384 bytes a block: the rows' d at 0 and m at 32 (f16), then q5_0x16's masks (at 64)
// and nibbles (at 128). Quants 0..31 against Σy-free activations.
struct Q5_1x16 {
  static constexpr size_t kBlockBytes = 16 * sizeof(block_q5_1);
  static constexpr bool kMin = true;
  static inline BlockW load(const uint8_t* cw) { return Q5_0x16::load_at(cw, cw + 64, cw + 128); }
  static inline __m512 mins(const uint8_t* cw) { return load_scales(cw + 32); }
};

// q8_0x16: 544 bytes a block; vector m holds quants 4m..4m+3, sign bits flipped.
struct Q8_0x16 {
  static constexpr size_t kBlockBytes = 16 * sizeof(block_q8_0);
  static constexpr bool kMin = false;
  static inline BlockW load(const uint8_t* cw) {
    BlockW b;
    b.d = load_scales(cw);
    for (int m = 0; m < 8; ++m) b.u[m] = _mm512_loadu_si512(cw + 32 + 64 * m);
    return b;
  }
};

inline __m512i bcast4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Formats whose blocks carry the rows' m (kMin): F::mins, else zeros.
template <class F>
inline __m512 block_mins(const uint8_t* cw) {
  if constexpr (F::kMin) return F::mins(cw);
  else return _mm512_setzero_ps();
}

// The float step of one (row group, token, block) from its exact integer sums s (seeded with the
// token's −o·Σy, or from zero for the kMin formats): converted, times d_w·d_y (d the rows'
// scales, the token's d_y at a + 32), fused into the accumulator; kMin formats then add the rows'
// m times the token's s (at a + 36; mw: block_mins). Every kernel over these layouts ends a block
// here, so they all give an output the same bits.
template <class F>
inline __m512 scale_block(__m512 acc, __m512i s, __m512 d, const uint8_t* a, __m512 mw) {
  float dy;
  std::memcpy(&dy, a + 32, 4);
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, _mm512_set1_ps(dy)), acc);
  if constexpr (F::kMin) {
    float sy;
    std::memcpy(&sy, a + 36, 4);
    acc = _mm512_fmadd_ps(mw, _mm512_set1_ps(sy), acc);
  }
  return acc;
}

}  // namespace
}  // namespace quant
}  // namespace fulcrum
