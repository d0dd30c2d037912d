// Q4_K and Q5_K in 16-row groups (q4_kx16, q5_kx16: repack.h) × Q8_K activations as they are,
// AVX-512 VNNI: the frame of the 32-element formats' 16-row groups (packed_x16_avx512.cc) for the
// K-quants. Q5_K is Q4_K with each nibble's fifth bit from a qh vector of the same rows and
// elements (one shift and one vpternlogd a vector).
//
// A zmm's 16 int32 lanes are the group's 16 rows, each lane four quants of its row, so a
// sub-block's 512 multiply-adds for a token are eight vpdpbusd whose activation operand is a
// 4-byte broadcast straight from the token's Q8_K quants (vpbroadcastd from memory: a load, no
// shuffle). A lane's sum is one (row, sub-block) product, at most 32·15·128 = 61440, and one
// vpmulld by the rows' 6-bit scales of that sub-block adds it to the row's super-block sum (exact
// int32, vec_dot_q4_k's integer sums). Per super-block and token the mins term is four vpdpwssd
// of the rows' mins (int16 pairs) by the token's sub-block sums, then two conversions and two fmas
// by d·dy and dmin·dy. The AVX2 8-row groups (packed_k8_avx2.cc) are this frame at ymm width.
//
// Why not q4_kx4 (packed_k_avx512.cc, where Q4_K was before), whose zmm holds four rows in
// 128-bit lanes: every 16 activations are a 16-byte broadcast shared by four rows only, and per
// 256 multiply-adds a token ran about 10 instructions against about 5.5 here (the nibble unpacking
// and the scales serve the tile's 8 tokens). 2-vCPU Zen 4 (avx512, no AMX), alternating builds:
//   bench.matmul 5632 × 2048 from L3, 1 thread: 1 token 148 -> 110 µs, 8 tokens 969 -> 597,
//     32 4041 -> 2396 (now the 32-element formats' rate: Q4_0 8 tokens 623);
//   1.3B Q4_K, 256-token prefill: 1 thread 79.1 -> 107.5 tok/s, 2 threads 154.4 -> 205.1;
//     1.3B Q4_K_M 78.9 -> 103.4 and 151.8 -> 191.4;
//   decode (48 tokens): 1 thread level (35.7 / 36.1 tok/s, medians of 8); 2 threads level while
//     the host gave ~35 GB/s and about 5 % lower while it gave ~60 (1.3B Q4_K 53-58 -> 52-53),
//     as bench.matmul at 2 threads from DRAM: 6.5 MB matrices 2-5 % lower, a 37 MB one level
//     (one thread: 31.7-32.9 -> 33.6-34.2 GB/s). Software prefetch (prefetchnta 1.5-4.5 KiB,
//     prefetcht0/t1), one or three streams, chunks of the two streams alternating, smaller
//     claims at the end of a matmul: none recovered it.
// Q5_K, against q5_kx4 (packed_k_avx512.cc then, with its vpdpbusd chunk): bench.matmul 5632 ×
// 2048 from L3, 1 thread: 1 token 212 -> 162 µs, 8 tokens 1052 -> 669, 32 4185 -> 2612; from
// DRAM 1 thread 32.2-33.9 -> 36.2-36.7 GB/s, 2 threads 37.3-37.6 -> 36.4-37.4. 1.3B Q5_K_M
// (alternating processes, medians of 5): prefill 74.6 -> 98.5 tok/s (1 thread), 138.2 -> 186.3
// (2); decode 29.2 -> 31.0 (1), 2 threads within the host's swings (45.5 / 44.6 against 47.0 /
// 44.8 at ~58 GB/s). 0.5B Q5_K_M: prefill 285.6 -> 304.3 and 513.8 -> 543.1, decode 94.1 -> 97.5
// and 132.4 -> 131.7.
//
// The GEMV (the drivers' chunk_tile<1>, tiles/gemm_tile_dispatch.h: one stream of 2304-byte super-blocks)
// and the tile run super_block below with the same float steps per (row, token), so a token's
// outputs are the same bits alone and in a batch.
#include <cstring>

#include "quant/formats/blocks.h"
#include "quant/packed/packed_k16_blocks.h"
#include "quant/packed/repack.h"
#include "quant/tiles/gemm_tile_dispatch.h"
#define QUANT_ISA avx512
#include "quant/dot/simd_avx512.h"

namespace fulcrum {
namespace quant {
namespace {

// How far ahead of its one stream the GEMV prefetches (prefetchnta, where the CPU's choice has
// software prefetch: KernelChoice::gemv_prefetch): two Q4_K super-blocks of the 16 rows. 1 KiB
// was chosen for the two streams it read before (2 KiB ahead in all). AMD EPYC Zen 5, one
// stream, bench.matmul from a 256 MiB ring, 1 thread, medians of 100, alternating builds, Q4_K
// 2048 x 5632 / 896 x 4864 GB/s: 1 KiB 34.8-35.9 / 32.4-33.3, 2304 B 36.6-36.8 / -, 4608 B
// 37.6-38.3 / 36.5-36.6, 6912 B 37.4-37.6 / 35.2-37.0, 9216 B 36.3-36.6 / 33.6-33.8.
// Four streams 2 KiB ahead (the 32-element formats' walk on most CPUs, core/isa.h
// KernelChoice::gemv_four_streams) measured worse here: on a Zen 5, 1.3B Q4_K decode at 2 threads
// 45-53 -> 36-38 tok/s (1 thread level), alternating processes; so the K-quants keep this walk.
constexpr size_t kGemvPrefetchBytes = kOneStreamPrefetchBytes;
// One sub-block's sums for one token: eight vpdpbusd of the rows' unsigned nibbles w[k] by the
// token's quants y[4k..4k+3] (two chains of four, added: the order of exact int32 sums does not
// matter).
inline __m512i sub_block_sum(const __m512i* w, const int8_t* y) {
  __m512i a = _mm512_setzero_si512(), b = _mm512_setzero_si512();
  for (int k = 0; k < 4; ++k) {
    a = _mm512_dpbusd_epi32(a, w[k], bcast4(y + 4 * k));
    b = _mm512_dpbusd_epi32(b, w[k + 4], bcast4(y + 16 + 4 * k));
  }
  return _mm512_add_epi32(a, b);
}

// Chunk c (64 elements) of C tokens into their super-block sums: sub-block 2c from the low nibbles
// of the chunk's eight vectors, 2c + 1 from the high ones (the vectors are read twice, from L1,
// rather than held: eight unpacked vectors, the C sums and accumulators fit the 32 registers).
// Q5_K (kFifthBit): each nibble gets its fifth bit from the qh vector of the same rows and
// elements (bit 2·Ch of qh byte l for the low nibbles of chunk Ch, 2·Ch + 1 for the high ones, as
// vec_dot_q5_k), moved to bit 4 by one shift: values 0..31, a lane's sum at most 32·31·128.
template <bool kFifthBit, int C, int Ch>
[[gnu::always_inline]] inline void chunk_sums(const uint8_t* cw, const Scales& s, const block_q8_K* const* y, __m512i* sum) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m10 = _mm512_set1_epi8(0x10);
  const uint8_t* q = cw + kQsAt<kFifthBit> + 512 * Ch;
  const uint8_t* qh = cw + kQhAt;
  __m512i w[8];
  for (int k = 0; k < 8; ++k) {
    const __m512i v = _mm512_loadu_si512(q + 64 * k);
    if constexpr (kFifthBit) w[k] = with_fifth_bit<4 - 2 * Ch>(v, _mm512_loadu_si512(qh + 64 * k), m4, m10);
    else w[k] = _mm512_and_si512(v, m4);
  }
  const __m512i sc0 = scale_of<2 * Ch>(s);
  for (int c = 0; c < C; ++c) sum[c] = _mm512_add_epi32(sum[c], _mm512_mullo_epi32(sub_block_sum(w, y[c]->qs + 64 * Ch), sc0));
  const __m512i sc1 = scale_of<2 * Ch + 1>(s);
  if constexpr (kFifthBit) {
    for (int k = 0; k < 8; ++k) {
      const __m512i v = _mm512_srli_epi16(_mm512_loadu_si512(q + 64 * k), 4);
      w[k] = with_fifth_bit<3 - 2 * Ch>(v, _mm512_loadu_si512(qh + 64 * k), m4, m10);
    }
    for (int c = 0; c < C; ++c) sum[c] = _mm512_add_epi32(sum[c], _mm512_mullo_epi32(sub_block_sum(w, y[c]->qs + 64 * Ch + 32), sc1));
  } else {
    // The high nibbles where they are (16 × the nibble, at most 240: still an unsigned byte), so
    // the sub-block's sum is 16 × its sum, exactly (at most 32·240·128 in a lane); one arithmetic
    // shift of that sum per token replaces a shift of each of the eight weight vectors, which on
    // Intel share port 0 with vpdpbusd and vpmulld. The same exact int32 sums, so the same bits.
    const __m512i mf0 = _mm512_set1_epi8(static_cast<char>(0xF0));
    for (int k = 0; k < 8; ++k) w[k] = _mm512_and_si512(_mm512_loadu_si512(q + 64 * k), mf0);
    for (int c = 0; c < C; ++c)
      sum[c] = _mm512_add_epi32(sum[c], _mm512_mullo_epi32(_mm512_srai_epi32(sub_block_sum(w, y[c]->qs + 64 * Ch + 32), 4), sc1));
  }
}

// One super-block of the group (cw) for C tokens (y[c]: each token's Q8_K block) into their
// accumulators.
template <bool kFifthBit, int C>
[[gnu::always_inline]] inline void super_block(const uint8_t* cw, const block_q8_K* const* y, __m512* acc) {
  const Scales s = load_scales(cw);
  __m512i sum[C];
  for (int c = 0; c < C; ++c) sum[c] = _mm512_setzero_si512();
  chunk_sums<kFifthBit, C, 0>(cw, s, y, sum);
  chunk_sums<kFifthBit, C, 1>(cw, s, y, sum);
  chunk_sums<kFifthBit, C, 2>(cw, s, y, sum);
  chunk_sums<kFifthBit, C, 3>(cw, s, y, sum);
  for (int c = 0; c < C; ++c) acc[c] = finish_super_block(acc[c], sum[c], s, y[c]);
}

// The drivers' kernel (tiles/gemm_tile_dispatch.h): a chunk is one super-block of the 16 rows.
template <bool kFifthBit>
struct KernelX16 {
  static constexpr int64_t kChunkCols = QK_K;
  static constexpr size_t kChunkBytes = 16 * (kFifthBit ? sizeof(block_q5_K) : sizeof(block_q4_K)), kActChunkBytes = sizeof(block_q8_K);
  static constexpr int kGroupRows = 16;
  // With software prefetch, one stream (gemm_tile_dispatch.h), not the two it read before: on an AMD EPYC Zen 5 the walk
  // of one 2304-byte super-block after another draws more from DRAM. bench.matmul 896 x 4864 Q4_K
  // from a 256 MiB ring, 1 thread, medians of 100, alternating builds: 32.7-34.1 -> 32.6-35.7
  // GB/s; in the model (0.5B Q4_K's ffn_down, 48 tokens after 256) 32.3-32.7 -> 34.9-36.0.
  // Without software prefetch (the Zen 4) one stream as well (it read two there before:
  // gemm_tile_dispatch.h has the measurements).
  static constexpr int kGemvStreams = 1;
  using Acc = __m512;
  static Acc zero() { return _mm512_setzero_ps(); }
  // The GEMV's step, one token: a call, not inlined. Inlined into the two-stream walk it read
  // before (tiles/gemm_tile_dispatch.h) the two super-blocks' values and sums spilled:
  // bench.matmul Q4_K 1 token (5632 x 2048 from L3) 110 -> 189-194 µs, Q5_K 163 -> 244-248.
  // Inlined into today's one-stream walk it measured the same as the call (Q4_K 70-71 GB/s).
  [[gnu::noinline]] static void chunk(Acc& acc, const uint8_t* cw, const uint8_t* a) { chunk_tile<1>(&acc, cw, a, 0); }
  static void store(float* out, Acc acc) { _mm512_storeu_ps(out, acc); }
  // The walk's prefetch: the next super-block of the group.
  static constexpr int kTileAhead = 1;
  // One super-block of the 16 rows × C tokens (token c's Q8_K block at a + c·as): each sub-block's
  // unpacked nibbles serve the C tokens from registers.
  template <int C>
  [[gnu::always_inline]] static inline void chunk_tile(Acc* acc, const uint8_t* cw, const uint8_t* a, size_t as) {
    const block_q8_K* y[C];
    for (int c = 0; c < C; ++c) y[c] = reinterpret_cast<const block_q8_K*>(a + c * as);
    super_block<kFifthBit, C>(cw, y, acc);
  }
};

using Q4Kx16 = KernelX16<false>;
using Q5Kx16 = KernelX16<true>;

}  // namespace

// The entry points (tiles/gemm_tile_dispatch.h).
FULCRUM_PACKED_ENTRY_POINTS(q4_kx16, avx512, Q4Kx16, kGemvPrefetchBytes, kPackedTileColsX16Avx512)
FULCRUM_PACKED_ENTRY_POINTS(q5_kx16, avx512, Q5Kx16, kGemvPrefetchBytes, kPackedTileColsX16Avx512)
FULCRUM_PACKED_STREAMS2_ENTRY_POINT(q4_kx16, avx512, Q4Kx16)
FULCRUM_PACKED_STREAMS2_ENTRY_POINT(q5_kx16, avx512, Q5Kx16)

}  // namespace quant
}  // namespace fulcrum
