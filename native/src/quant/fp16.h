// IEEE binary16 <-> binary32 in portable C++. `static inline` on purpose: this header is
// included by baseline and ISA-specific files alike, and internal linkage keeps each file's
// copy its own (no ODR merge of an AVX-512 copy into baseline code).
// The conversions match F16C's VCVTPH2PS / VCVTPS2PH(round to nearest even) bit for bit, so
// the scalar and SIMD paths quantize identically.
#pragma once
#include <cstdint>
#include <cstring>
#include <cmath>

namespace fulcrum {
namespace quant {

static inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do { mant <<= 1; ++e; } while ((mant & 0x400u) == 0);
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3FFu) << 13);
    }
  } else if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);  // inf / NaN (payload kept)
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

static inline uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) {  // inf or NaN (quiet the NaN like F16C does)
    return static_cast<uint16_t>(sign | 0x7C00u | (abs > 0x7F800000u ? (0x200u | ((abs >> 13) & 0x3FFu)) : 0u));
  }
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to >= 65536: inf
  if (abs < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    if (abs < 0x33000000u) return sign;  // < 2^-25 rounds to zero (2^-25 itself ties to even 0)
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14 + (113 - e) - ... : value = m * 2^(e-150); half unit 2^-24
    // result = m * 2^(e-150) / 2^-24 = m >> (126 - e)
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  // normal: rebias exponent, round mantissa from 23 to 10 bits, nearest even (carry may bump exp)
  uint32_t h = ((abs >> 13) - ((127 - 15) << 10));
  const uint32_t rem = abs & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

// Round to nearest, ties to even (what SIMD cvtps uses under the default MXCSR), as an int.
static inline int round_even(float x) { return static_cast<int>(std::nearbyint(x)); }

}  // namespace quant
}  // namespace fulcrum
