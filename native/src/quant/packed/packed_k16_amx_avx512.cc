// The prefill tiles of Q4_K and Q5_K in their 16-row groups (q4_kx16, q5_kx16: repack.h) on
// AMX-INT8 (Sapphire Rapids and later): one row group × up to 32 tokens a call.
//
// A super-block's chunk of 64 elements is eight 64-byte vectors whose byte 4·r + b holds row r's
// quants 4·k + b of two sub-blocks (low nibbles the first, high nibbles the second;
// packed_k16_blocks.h): unpacked to bytes (with Q5_K's fifth bit), each sub-block is AMX's B-tile
// layout (8 rows of the 16 rows' 4-byte quant groups). The tokens' Q8_K quants of the sub-block are
// the A tile (32 bytes a token, read where the Q8_K rows hold them, act_stride apart), and
// tdpbsud (signed tokens × unsigned quants) gives the 16 tokens × 16 rows of exact int32
// sub-block sums. Each joins the rows' super-block sums times their 6-bit scale (one vpmulld, as
// in the AVX-512 kernels: the scale differs by row, which AMX cannot apply), and the super-block
// ends in the AVX-512 kernels' float step (finish_super_block). Integer sums are exact in any
// order, so every output is the same bits as the decode GEMV's (packed_k16_avx512.cc): a token's
// outputs are the same alone and in a batch, and Q4_K stays in its row groups on AMX CPUs, where
// the decode GEMV reads it best.
//
// Each sub-block's unpacked weights serve both 16-token halves (two A and two C tiles). The
// process must hold the AMX tile state (KernelChoice::amx_int8 says it does).
#pragma GCC target("amx-tile,amx-int8")
#include <cstddef>

#include "quant/tiles/amx_tiles.h"
#include "quant/packed/packed_k16_blocks.h"
#include "quant/packed/repack.h"
#define QUANT_ISA avx512
#include "quant/dot/simd_avx512.h"

namespace fulcrum {
namespace quant {
namespace {

constexpr size_t kQsOffset = offsetof(block_q8_K, qs);

// Sub-block j's scale of each row (scale_of<J> at run time: the sums are exact either way).
inline __m512i scale_at(const Scales& s, int j) {
  const __m512i v = j < 4 ? s.sc_lo : s.sc_hi;
  return _mm512_and_si512(_mm512_srli_epi32(v, static_cast<unsigned>(8 * (j % 4))), _mm512_set1_epi32(0xff));
}

// Tokens [c0, c1) of one sub-block: their integer sums (sums[c − c0]) times the rows' scale into
// the super-block sums.
inline void add_scaled(__m512i* isum, const int32_t (*sums)[16], int c0, int c1, __m512i sc) {
  for (int c = c0; c < c1; ++c) isum[c] = _mm512_add_epi32(isum[c], _mm512_mullo_epi32(_mm512_load_si512(sums[c - c0]), sc));
}

// Chunk Ch of the super-block at cw (sub-blocks 2·Ch, 2·Ch + 1) for the call's tokens (their Q8_K
// blocks at a, as apart): the chunk's nibbles unpacked into `wq` (the first sub-block's, then
// the second's; Q5_K with the fifth bit from the qh vector of the same rows and elements, as
// chunk_sums in packed_k16_avx512.cc), then per sub-block the AMX products.
template <bool kFifthBit, bool kTwoHalves, int Ch>
inline void chunk_amx(const uint8_t* cw, const Scales& s, const uint8_t* a, size_t as, int cols, uint8_t (*wq)[512],
                      int32_t (*sums)[16], __m512i* isum) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m10 = _mm512_set1_epi8(0x10);
  const uint8_t* q = cw + kQsAt<kFifthBit> + 512 * Ch;
  const uint8_t* qh = cw + kQhAt;
  for (int k = 0; k < 8; ++k) {
    const __m512i v = _mm512_loadu_si512(q + 64 * k);
    const __m512i hi = _mm512_srli_epi16(v, 4);
    if constexpr (kFifthBit) {
      const __m512i h = _mm512_loadu_si512(qh + 64 * k);
      _mm512_store_si512(wq[0] + 64 * k, with_fifth_bit<4 - 2 * Ch>(v, h, m4, m10));
      _mm512_store_si512(wq[1] + 64 * k, with_fifth_bit<3 - 2 * Ch>(hi, h, m4, m10));
    } else {
      _mm512_store_si512(wq[0] + 64 * k, _mm512_and_si512(v, m4));
      _mm512_store_si512(wq[1] + 64 * k, _mm512_and_si512(hi, m4));
    }
  }
  const int lo = cols < kRowGroupHalf ? cols : kRowGroupHalf;
  for (int h = 0; h < 2; ++h) {
    const int j = 2 * Ch + h;
    const uint8_t* aq = a + kQsOffset + 32 * j;
    _tile_loadd(4, wq[h], 64);
    _tile_loadd(2, aq, static_cast<long>(as));
    _tile_zero(0);
    _tile_dpbsud(0, 2, 4);
    if constexpr (kTwoHalves) {
      _tile_loadd(3, aq + kRowGroupHalf * as, static_cast<long>(as));
      _tile_zero(1);
      _tile_dpbsud(1, 3, 4);
    }
    const __m512i sc = scale_at(s, j);
    _tile_stored(0, sums, 64);
    add_scaled(isum, sums, 0, lo, sc);
    if constexpr (kTwoHalves) {
      _tile_stored(1, sums, 64);
      add_scaled(isum, sums, kRowGroupHalf, cols, sc);
    }
  }
}

template <bool kFifthBit, bool kTwoHalves>
void amx_walk(int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as, int cols) {
  constexpr size_t kSuperBlockBytes = 16 * (kFifthBit ? sizeof(block_q5_K) : sizeof(block_q4_K));
  alignas(64) uint8_t wq[2][512];
  alignas(64) int32_t sums[kRowGroupHalf][16];
  __m512i isum[2 * kRowGroupHalf];
  __m512 acc[2 * kRowGroupHalf];
  for (int c = 0; c < cols; ++c) acc[c] = _mm512_setzero_ps();
  const int64_t super_blocks = n / QK_K;
  const TileConfigScope tiles(row_group_tiles(cols));  // the thread's previous configuration returns on exit
  for (int64_t i = 0; i < super_blocks; ++i) {
    const uint8_t* cw = w + i * kSuperBlockBytes;
    const uint8_t* a = act + i * sizeof(block_q8_K);
    for (size_t o = 0; o < kSuperBlockBytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(cw + kSuperBlockBytes + o), _MM_HINT_T0);
    const Scales s = load_scales(cw);
    for (int c = 0; c < cols; ++c) isum[c] = _mm512_setzero_si512();
    chunk_amx<kFifthBit, kTwoHalves, 0>(cw, s, a, as, cols, wq, sums, isum);
    chunk_amx<kFifthBit, kTwoHalves, 1>(cw, s, a, as, cols, wq, sums, isum);
    chunk_amx<kFifthBit, kTwoHalves, 2>(cw, s, a, as, cols, wq, sums, isum);
    chunk_amx<kFifthBit, kTwoHalves, 3>(cw, s, a, as, cols, wq, sums, isum);
    for (int c = 0; c < cols; ++c)
      acc[c] = finish_super_block(acc[c], isum[c], s, reinterpret_cast<const block_q8_K*>(a + c * as));
  }
  for (int c = 0; c < cols; ++c) _mm512_storeu_ps(out + c * os, acc[c]);
}

template <bool kFifthBit>
void amx_tile(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols) {
  if (cols <= 0 || cols > kPackedTileColsX16Amx) return;
  if (cols > kRowGroupHalf) amx_walk<kFifthBit, true>(n, out, out_stride, w, act, act_stride, cols);
  else amx_walk<kFifthBit, false>(n, out, out_stride, w, act, act_stride, cols);
}

}  // namespace

void tile_q4_kx16_amx(int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as, int cols) {
  amx_tile<false>(n, out, os, w, act, as, cols);
}
void tile_q5_kx16_amx(int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as, int cols) {
  amx_tile<true>(n, out, os, w, act, as, cols);
}

}  // namespace quant
}  // namespace fulcrum
