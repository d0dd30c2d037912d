// f16 helpers of the block formats. `static inline` on purpose: this header is included by
// baseline and ISA-specific files alike, and internal linkage keeps each file's copy its own
// (no ODR merge of an AVX-512 copy into baseline code). The conversions (core/fp16.h) match
// F16C's VCVTPH2PS / VCVTPS2PH (round to nearest even) bit for bit, so the scalar and SIMD
// paths quantize identically.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/fp16.h"

namespace fulcrum {
namespace quant {

// One implementation of the conversions serves the whole addon (core/fp16.h); these names are
// the ones the block formats use.
static inline float f16_to_f32(uint16_t h) { return fp16_to_fp32(h); }
static inline uint16_t f32_to_f16(float f) { return fp32_to_fp16(f); }

// Round to nearest, ties to even (what SIMD cvtps uses under the default MXCSR), as an int.
static inline int round_even(float x) { return static_cast<int>(std::nearbyint(x)); }

}  // namespace quant
}  // namespace fulcrum
