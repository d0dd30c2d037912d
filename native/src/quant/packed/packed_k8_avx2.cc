// Q4_K and Q5_K in 8-row groups (q4_kx8, q5_kx8: repack.h) × Q8_K activations as they are, AVX2;
// the avxvnni copy of this file (core/isa.h) takes the `#if defined(__AVXVNNI__)` branches. The
// AVX-512 16-row groups (packed_k16_avx512.cc) at ymm width, as q4_0x8 is q4_0x16's.
//
// A ymm's 8 int32 lanes are the group's 8 rows, each lane four quants of its row, and a
// sub-block's 256 multiply-adds for a token are eight multiplies by a 4-byte broadcast straight
// from the token's Q8_K quants. Plain AVX2: eight vpmaddubsw in two int16 chains of four (a chain
// at most 4·2·15·128 = 15360 for Q4_K's nibbles, 31744 for Q5_K's 5-bit values), then one vpmaddwd
// by the rows' scale of that sub-block (as int16 pairs) per chain sum: Q4_K adds the two chains
// first (30720 fits int16), Q5_K multiplies each. AVX-VNNI: eight vpdpbusd in two chains and one
// vpmulld by the scales (as x16). Both give vec_dot_q4_k's exact integer sums, so both copies give
// the same bits. The mins term and the float steps are x16's: four vpmaddwd of the rows' mins
// (int16 pairs) by the token's sub-block sums, two conversions and two fmas by d·dy and dmin·dy.
//
// Why not q4_kx4 (packed_k_avx2.cc, where Q4_K and Q5_K were before), a 128-bit lane per row:
// every 16 activations were a 16-byte broadcast shared by two rows, and per chunk of 64 elements
// and pair of rows (128 multiply-adds) a token ran four vpmaddubsw, two int16 adds, two vpmaddwd,
// two int32 adds besides the nibble unpacking and two scale shuffles, about 22 instructions: at
// 1 thread the GEMV was compute-bound (bench.matmul 5632 × 2048 from L3, 28.6 GB/s against Q4_0's
// 40). Here 512 multiply-adds take about 60, and the tile's unpacked nibbles serve its tokens.
// 2-vCPU Zen 4 at FULCRUM_ISA=avx2, alternating builds:
//   bench.matmul 5632 × 2048 from L3, 1 thread: Q4_K 1 token 224-231 -> 162-164 µs (40 GB/s, as
//     Q4_0's x8), 4 tokens 575 -> 452-455, 8 1167-1199 -> 897-907, 32 5056-5071 -> 3631-3827;
//     Q5_K 1 token 293-295 -> 252-260, 32 tokens 6333-6372 -> 4560 (6-token tiles);
//   in the model (256-token prefill, 48 decoded, medians of 4 alternating processes, tok/s):
//     1.3B Q4_K   1 thread prefill 60.4 -> 72.4, decode 31.8 -> 36.5; 2 threads 111.5 -> 136.6, 50.6 -> 57.0
//     1.3B Q4_K_M 1 thread prefill 57.0 -> 67.5, decode 29.9 -> 33.2; 2 threads 109.8 -> 130.9
//     1.3B Q5_K_M 1 thread prefill 48.7 -> 59.2, decode 25.5 -> 27.6; 2 threads 95.1 -> 116.8
//     (2-thread decode within the host's swings).
//
// The GEMV (the drivers' chunk_tile<1>, tiles/gemm_tile_dispatch.h: one stream of 1152-byte or 1408-byte
// super-blocks) and the tile run super_block below with the same float steps per (row, token), so
// a token's outputs are the same bits alone and in a batch.
#include <cstring>

#include "quant/formats/blocks.h"
#include "quant/packed/repack.h"
#include "quant/tiles/gemm_tile_dispatch.h"
#define QUANT_ISA QUANT_AVX2_LEVEL
#include "quant/dot/simd_avx2.h"

namespace fulcrum {
namespace quant {
namespace {

// How far ahead of its one stream the GEMV prefetches (prefetchnta, where the CPU's choice has
// software prefetch), as the AVX-512 K-quants' (packed_k16_avx512.cc): 4.5 KiB (repack.h), four
// Q4_K super-blocks of the 8 rows.
constexpr size_t kGemvPrefetchBytes = kOneStreamPrefetchBytes;
// q4_kx8 / q5_kx8 offsets (repack.h): d, dmin, the three scale-word planes, the fifth-bit vectors
// (Q5_K), then the nibble vectors.
constexpr size_t kDAt = k_rows::d_at(8), kDminAt = k_rows::dmin_at(8), kQhAt = k_rows::qh_at(8);
constexpr size_t kW0At = k_rows::scale_words_at(8), kW1At = kW0At + 32, kW2At = kW0At + 64;
template <bool kFifthBit>
constexpr size_t kQsAt = k_rows::qs_at(8, kFifthBit);

inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

inline __m256i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// (v & 0x0f) | (bit 4 of qh shifted by kShift): a nibble with its fifth bit (Q5_K).
template <int kShift>
inline __m256i with_fifth_bit(__m256i v, __m256i qh, __m256i m0f, __m256i m10) {
  const __m256i b = kShift > 0 ? _mm256_slli_epi16(qh, kShift) : kShift < 0 ? _mm256_srli_epi16(qh, -kShift) : qh;
  return _mm256_or_si256(_mm256_and_si256(v, m0f), _mm256_and_si256(b, m10));
}

// The group's per-super-block factors: the rows' 6-bit scales and mins (byte j of a lane: sub-block
// j or 4 + j), their d and dmin.
struct Scales {
  __m256i sc_lo, sc_hi;        // bytes: scales 0-3 / 4-7
  __m256i m02, m13, m46, m57;  // int16 pairs: (min 0, min 2), (1, 3), (4, 6), (5, 7)
  __m256 d, dmin;
};

// vec_dot_q4_k's unpacking of the 12 scale bytes (scales 0-3 = W0 & 0x3f, mins 0-3 = W1 & 0x3f,
// scales 4-7 = (W2 & 0x0f) | ((W0 >> 2) & 0x30), mins 4-7 = ((W2 >> 4) & 0x0f) | ((W1 >> 2) & 0x30),
// per byte) on the 8 rows' words at once.
inline Scales load_scales(const uint8_t* cw) {
  const __m256i w0 = load32(cw + kW0At), w1 = load32(cw + kW1At), w2 = load32(cw + kW2At);
  const __m256i m3f = _mm256_set1_epi8(0x3f), m0f = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
  Scales s;
  s.sc_lo = _mm256_and_si256(w0, m3f);
  s.sc_hi = _mm256_or_si256(_mm256_and_si256(w2, m0f), _mm256_and_si256(_mm256_srli_epi32(w0, 2), m30));
  const __m256i mins_lo = _mm256_and_si256(w1, m3f);
  const __m256i mins_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(w2, 4), m0f), _mm256_and_si256(_mm256_srli_epi32(w1, 2), m30));
  const __m256i low_bytes = _mm256_set1_epi16(0x00ff);
  s.m02 = _mm256_and_si256(mins_lo, low_bytes), s.m13 = _mm256_srli_epi16(mins_lo, 8);
  s.m46 = _mm256_and_si256(mins_hi, low_bytes), s.m57 = _mm256_srli_epi16(mins_hi, 8);
  s.d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(cw + kDAt)));
  s.dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(cw + kDminAt)));
  return s;
}

// Sub-block J's scale of each row, by one byte shuffle: with AVX-VNNI an int32 lane (vpmulld's
// operand), otherwise the same value in both int16 halves of the lane (vpmaddwd's).
template <int J>
inline __m256i scale_of(const Scales& s) {
  constexpr char j = J % 4, z = static_cast<char>(0x80);
#if defined(__AVXVNNI__)
  constexpr char h = z;
#else
  constexpr char h = j;
#endif
  const __m256i ctl = _mm256_setr_epi8(j, z, h, z, 4 + j, z, 4 + h, z, 8 + j, z, 8 + h, z, 12 + j, z, 12 + h, z,  //
                                       j, z, h, z, 4 + j, z, 4 + h, z, 8 + j, z, 8 + h, z, 12 + j, z, 12 + h, z);
  // With AVX-VNNI h is 0x80 and 4 + h etc. still have the top bit set: those bytes are zero.
  return _mm256_shuffle_epi8(J < 4 ? s.sc_lo : s.sc_hi, ctl);
}

// One sub-block's sums for one token times the rows' scale of that sub-block: the rows' unsigned
// values w[k] by the token's quants y[4k..4k+3].
template <bool kFifthBit>
inline __m256i scaled_sub_block_sum(const __m256i* w, const int8_t* y, __m256i scale) {
#if defined(__AVXVNNI__)
  __m256i a = _mm256_setzero_si256(), b = _mm256_setzero_si256();
  for (int k = 0; k < 4; ++k) {
    a = _mm256_dpbusd_avx_epi32(a, w[k], bcast4(y + 4 * k));
    b = _mm256_dpbusd_avx_epi32(b, w[k + 4], bcast4(y + 16 + 4 * k));
  }
  return _mm256_mullo_epi32(_mm256_add_epi32(a, b), scale);
#else
  __m256i a = _mm256_maddubs_epi16(w[0], bcast4(y)), b = _mm256_maddubs_epi16(w[4], bcast4(y + 16));
  for (int k = 1; k < 4; ++k) {
    a = _mm256_add_epi16(a, _mm256_maddubs_epi16(w[k], bcast4(y + 4 * k)));
    b = _mm256_add_epi16(b, _mm256_maddubs_epi16(w[k + 4], bcast4(y + 16 + 4 * k)));
  }
  if constexpr (kFifthBit) return _mm256_add_epi32(_mm256_madd_epi16(a, scale), _mm256_madd_epi16(b, scale));
  else return _mm256_madd_epi16(_mm256_add_epi16(a, b), scale);
#endif
}

// Chunk Ch (64 elements) of C tokens into their super-block sums: sub-block 2·Ch from the low
// nibbles of the chunk's eight vectors, 2·Ch + 1 from the high ones (the vectors are read twice,
// from L1, rather than held: eight unpacked vectors, the C sums and the temporaries fill the 16
// registers). Q5_K (kFifthBit): each nibble gets its fifth bit from the qh vector of the same rows
// and elements (bit 2·Ch of qh byte l for the low nibbles, 2·Ch + 1 for the high ones, as
// vec_dot_q5_k), moved to bit 4 by one shift.
template <bool kFifthBit, int C, int Ch>
[[gnu::always_inline]] inline void chunk_sums(const uint8_t* cw, const Scales& s, const block_q8_K* const* y, __m256i* sum) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m10 = _mm256_set1_epi8(0x10);
  const uint8_t* q = cw + kQsAt<kFifthBit> + 256 * Ch;
  const uint8_t* qh = cw + kQhAt;
  __m256i w[8];
  for (int k = 0; k < 8; ++k) {
    const __m256i v = load32(q + 32 * k);
    if constexpr (kFifthBit) w[k] = with_fifth_bit<4 - 2 * Ch>(v, load32(qh + 32 * k), m4, m10);
    else w[k] = _mm256_and_si256(v, m4);
  }
  const __m256i sc0 = scale_of<2 * Ch>(s);
  for (int c = 0; c < C; ++c) sum[c] = _mm256_add_epi32(sum[c], scaled_sub_block_sum<kFifthBit>(w, y[c]->qs + 64 * Ch, sc0));
  for (int k = 0; k < 8; ++k) {
    const __m256i v = _mm256_srli_epi16(load32(q + 32 * k), 4);
    if constexpr (kFifthBit) w[k] = with_fifth_bit<3 - 2 * Ch>(v, load32(qh + 32 * k), m4, m10);
    else w[k] = _mm256_and_si256(v, m4);
  }
  const __m256i sc1 = scale_of<2 * Ch + 1>(s);
  for (int c = 0; c < C; ++c) sum[c] = _mm256_add_epi32(sum[c], scaled_sub_block_sum<kFifthBit>(w, y[c]->qs + 64 * Ch + 32, sc1));
}

// One super-block of the group (cw) for C tokens (y[c]: each token's Q8_K block) into their
// accumulators.
template <bool kFifthBit, int C>
[[gnu::always_inline]] inline void super_block(const uint8_t* cw, const block_q8_K* const* y, __m256* acc) {
  const Scales s = load_scales(cw);
  __m256i sum[C];
  for (int c = 0; c < C; ++c) sum[c] = _mm256_setzero_si256();
  chunk_sums<kFifthBit, C, 0>(cw, s, y, sum);
  chunk_sums<kFifthBit, C, 1>(cw, s, y, sum);
  chunk_sums<kFifthBit, C, 2>(cw, s, y, sum);
  chunk_sums<kFifthBit, C, 3>(cw, s, y, sum);
  for (int c = 0; c < C; ++c) {
    // The token's sub-block sums B0..B7 (pairs of its 16-element sums, at most 32·128: int16) as
    // the int16 pairs the mins are in: (B0, B2), (B1, B3), (B4, B6), (B5, B7).
    const __m128i b = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y[c]->bsums)),
                                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(y[c]->bsums + 8)));
    const __m256i pairs = _mm256_broadcastsi128_si256(_mm_shuffle_epi8(b, _mm_setr_epi8(0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15)));
    const __m256i mins = _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(s.m02, _mm256_shuffle_epi32(pairs, 0x00)), _mm256_madd_epi16(s.m13, _mm256_shuffle_epi32(pairs, 0x55))),
                                          _mm256_add_epi32(_mm256_madd_epi16(s.m46, _mm256_shuffle_epi32(pairs, 0xAA)), _mm256_madd_epi16(s.m57, _mm256_shuffle_epi32(pairs, 0xFF))));
    const __m256 dy = _mm256_set1_ps(y[c]->d);
    acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(s.d, dy), _mm256_cvtepi32_ps(sum[c]), acc[c]);
    acc[c] = _mm256_fnmadd_ps(_mm256_mul_ps(s.dmin, dy), _mm256_cvtepi32_ps(mins), acc[c]);
  }
}

// The drivers' kernel (tiles/gemm_tile_dispatch.h): a chunk is one super-block of the 8 rows.
template <bool kFifthBit>
struct KernelX8 {
  static constexpr int64_t kChunkCols = QK_K;
  static constexpr size_t kChunkBytes = 8 * (kFifthBit ? sizeof(block_q5_K) : sizeof(block_q4_K)), kActChunkBytes = sizeof(block_q8_K);
  static constexpr int kGroupRows = 8;
  // With software prefetch, one stream (gemm_tile_dispatch.h) 4.5 KiB ahead, not two 1 KiB ahead each: AMD
  // EPYC Zen 5, bench.matmul from a 256 MiB ring, 1 thread, medians of 100 (60 for 2048 x 5632),
  // three alternating rounds, GB/s: FULCRUM_ISA=avx2 Q4_K 896 x 4864 34.1-35.3 -> 34.5-38.1,
  // 2048 x 5632 34.9-35.5 -> 38.6-39.2; avxvnni 33.5-35.1 -> 35.3-37.9 and 34.3-35.2 -> 36.3-38.0;
  // Q5_K 2048 x 5632 level (31-33). (One stream 1 KiB ahead was slower: avx2 35 -> 33.5.)
  // Without software prefetch (the Zen 4) one stream as well (it read two there before:
  // gemm_tile_dispatch.h has the measurements).
  static constexpr int kGemvStreams = 1;
  using Acc = __m256;
  static Acc zero() { return _mm256_setzero_ps(); }
  // The GEMV's step, one token: a call, not inlined. Inlined into the two-stream walk
  // (tiles/gemm_tile_dispatch.h) the two super-blocks' values and sums spill: bench.matmul
  // Q4_K 1 token (5632 x 2048 from L3, FULCRUM_ISA=avx2) 161 -> 186-192 µs, Q5_K 255 -> 293-297.
  [[gnu::noinline]] static void chunk(Acc& acc, const uint8_t* cw, const uint8_t* a) { chunk_tile<1>(&acc, cw, a, 0); }
  static void store(float* out, Acc acc) { _mm256_storeu_ps(out, acc); }
  // The walk's prefetch: the next super-block of the group.
  static constexpr int kTileAhead = 1;
  // One super-block of the 8 rows × C tokens (token c's Q8_K block at a + c·as): each sub-block's
  // unpacked values serve the C tokens from registers.
  template <int C>
  [[gnu::always_inline]] static inline void chunk_tile(Acc* acc, const uint8_t* cw, const uint8_t* a, size_t as) {
    const block_q8_K* y[C];
    for (int c = 0; c < C; ++c) y[c] = reinterpret_cast<const block_q8_K*>(a + c * as);
    super_block<kFifthBit, C>(cw, y, acc);
  }
};

using Q4Kx8 = KernelX8<false>;
using Q5Kx8 = KernelX8<true>;

}  // namespace

// The entry points (tiles/gemm_tile_dispatch.h).
FULCRUM_PACKED_ENTRY_POINTS(q4_kx8, QUANT_AVX2_LEVEL, Q4Kx8, kGemvPrefetchBytes, kPackedTileColsQ4_kx8Avx2)
FULCRUM_PACKED_ENTRY_POINTS(q5_kx8, QUANT_AVX2_LEVEL, Q5Kx8, kGemvPrefetchBytes, kPackedTileColsQ5_kx8Avx2)
FULCRUM_PACKED_STREAMS2_ENTRY_POINT(q4_kx8, QUANT_AVX2_LEVEL, Q4Kx8)
FULCRUM_PACKED_STREAMS2_ENTRY_POINT(q5_kx8, QUANT_AVX2_LEVEL, Q5Kx8)

}  // namespace quant
}  // namespace fulcrum
