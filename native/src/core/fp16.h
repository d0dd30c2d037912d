// Scalar conversions between float and the 16-bit formats (IEEE half, bfloat16).
// Everything here is `static inline` so each translation unit (baseline or ISA-specific) keeps
// its own copy: no ODR sharing between files compiled for different instruction sets.
#pragma once
#include <cstdint>
#include <cstring>

namespace fulcrum {

static inline float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal half: mant * 2^-24, exact in float
      const float f = static_cast<float>(mant) * (1.0f / 16777216.0f);
      return sign ? -f : f;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, like the F16C instruction with rounding mode 0.
static inline uint16_t fp32_to_fp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  // Inf stays inf; a NaN keeps its top payload bits and is quieted, as F16C does.
  if (ax >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? (0x200u | ((ax >> 13) & 0x3ffu)) : 0u));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to infinity
  if (ax < 0x38800000u) {  // result is a half subnormal or zero: let float addition round it
    float a;
    std::memcpy(&a, &ax, 4);
    const float r = a + 0.5f;  // the ulp of 0.5f is 2^-24, the half subnormal step
    uint32_t rb;
    std::memcpy(&rb, &r, 4);
    return static_cast<uint16_t>(sign | (rb - 0x3f000000u));
  }
  const uint32_t odd = (ax >> 13) & 1u;
  ax += 0xc8000fffu + odd;  // re-bias exponent by -112 and round half to even
  return static_cast<uint16_t>(sign | (ax >> 13));
}

static inline float bf16_to_fp32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even; NaN stays a quiet NaN (ggml's convention).
static inline uint16_t fp32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 64u);
  return static_cast<uint16_t>((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

}  // namespace fulcrum
