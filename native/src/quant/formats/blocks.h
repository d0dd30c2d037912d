// Block layouts of ggml's quantized formats, byte-identical to what GGUF files store.
// Every struct is packed by construction (only uint8/int8/uint16/int16/float members in an
// order that needs no padding); the static_asserts pin the sizes to ggml's.
#pragma once
#include <cstdint>

namespace fulcrum {
namespace quant {

constexpr int QK4_0 = 32, QK4_1 = 32, QK5_0 = 32, QK5_1 = 32, QK8_0 = 32, QK8_1 = 32;
constexpr int QK_K = 256;       // super-block of the K-quants
constexpr int K_SCALE_SIZE = 12;  // 8 six-bit scales + 8 six-bit mins of Q4_K/Q5_K

using f16_t = uint16_t;  // IEEE binary16 bits

// x = d * (q - 8), q in 0..15; element j in the low nibble of qs[j], element j+16 in the high.
struct block_q4_0 { f16_t d; uint8_t qs[QK4_0 / 2]; };
// x = d * q + m, q in 0..15; same nibble order as Q4_0.
struct block_q4_1 { f16_t d; f16_t m; uint8_t qs[QK4_1 / 2]; };
// x = d * (q - 16), q in 0..31; low 4 bits as Q4_0, bit 4 of element j is bit j of qh (LE u32).
struct block_q5_0 { f16_t d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; };
// x = d * q + m, q in 0..31; bit layout as Q5_0.
struct block_q5_1 { f16_t d; f16_t m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; };
// x = d * q.
struct block_q8_0 { f16_t d; int8_t qs[QK8_0]; };
// x = d * q; s = d * sum(q) (the activation format of Q4_1/Q5_1 dot products).
struct block_q8_1 { f16_t d; f16_t s; int8_t qs[QK8_1]; };
// x = d * q; bsums[i] = sum of qs[16i .. 16i+15] (the activation format of the K-quants).
struct block_q8_K { float d; int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; };
// 8 sub-blocks of 32: x = d*sc[j]*q - dmin*m[j]; 6-bit sc/m packed in `scales` (see
// get_scale_min_k4); qs: 4 chunks of 32 bytes, low nibbles = sub-block 2c, high = 2c+1.
struct block_q4_K { f16_t d; f16_t dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qs[QK_K / 2]; };
// As Q4_K plus a fifth bit: bit (2c) of qh[l] for sub-block 2c, bit (2c+1) for 2c+1.
struct block_q5_K { f16_t d; f16_t dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; };
// 16 sub-blocks of 16: x = d * scales[j] * (q - 32), q 6-bit: low 4 bits in ql, high 2 in qh.
struct block_q6_K { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; f16_t d; };

static_assert(sizeof(block_q4_0) == 18, "q4_0 size");
static_assert(sizeof(block_q4_1) == 20, "q4_1 size");
static_assert(sizeof(block_q5_0) == 22, "q5_0 size");
static_assert(sizeof(block_q5_1) == 24, "q5_1 size");
static_assert(sizeof(block_q8_0) == 34, "q8_0 size");
static_assert(sizeof(block_q8_1) == 36, "q8_1 size");
static_assert(sizeof(block_q8_K) == 292, "q8_K size");
static_assert(sizeof(block_q4_K) == 144, "q4_K size");
static_assert(sizeof(block_q5_K) == 176, "q5_K size");
static_assert(sizeof(block_q6_K) == 210, "q6_K size");

}  // namespace quant
}  // namespace fulcrum
