// The prefill tiles of Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 in their 16-row groups (q4_0x16 ... q8_0x16,
// repack.h) on AMX-INT8 (Sapphire Rapids and later): one row group × up to 32 tokens a call.
//
// A 16-row group's block is eight 64-byte vectors whose byte 4·r + b is quant 4·m + b of row r
// (packed_x16_blocks.h): exactly AMX's B-tile layout (K/4 rows of N 4-byte groups) with the
// group's rows as N. So the weights are the B tile (Q8_0 loaded as stored; the nibble formats'
// eight unpacked vectors through a 512-byte buffer) and the tokens' block quants the A tile, read
// where the "q8_0 sums" activations hold them (32 bytes a token, the rows act_stride apart: no
// transposing gather). tdpbsud (signed tokens × unsigned quants) gives the 16 tokens × 16 rows of
// exact int32 block sums; the float step per (token, block) is the AVX-512 kernels' dot_block
// (packed_x16_avx512.cc): the sum from the token's −o·Σy seed, converted, times d_w·d_y, fused
// into the accumulator, plus m·s for Q4_1 / Q5_1. Integer sums are exact in any order, so every
// output is the same bits as the decode GEMV's: a token's outputs are the same alone and in a
// batch (what exact speculation needs), and these formats stay in their row groups on AMX CPUs,
// where the decode GEMV reads them best.
//
// The process must hold the AMX tile state (KernelChoice::amx_int8 says it does:
// core/kernel_select.cc asked for it).
#pragma GCC target("amx-tile,amx-int8")
#include <type_traits>

#include "quant/tiles/amx_tiles.h"
#include "quant/packed/packed_x16_blocks.h"
#include "quant/packed/repack.h"
#define QUANT_ISA avx512
#include "quant/dot/simd_avx512.h"

namespace fulcrum {
namespace quant {
namespace {

// The group's block at cw into tile 4: Q8_0's stored vectors as they are, the others' unpacked
// vectors through `buf`.
template <class F>
inline void load_weight_tile(const uint8_t* cw, uint8_t* buf) {
  if constexpr (std::is_same_v<F, Q8_0x16>) {
    _tile_loadd(4, cw + 32, 64);
  } else {
    const BlockW b = F::load(cw);
    for (int m = 0; m < 8; ++m) _mm512_store_si512(buf + 64 * m, b.u[m]);
    _tile_loadd(4, buf, 64);
  }
}

// Tokens [c0, c1) of one block from their integer sums (sums[c − c0]), seeded with their −o·Σy
// unless kMin: the AVX-512 kernels' float step (scale_block), so every output is their bits.
template <class F>
inline void fold_block(__m512* acc, const int32_t (*sums)[16], int c0, int c1, const uint8_t* a, size_t as, __m512 d, __m512 mw) {
  for (int c = c0; c < c1; ++c) {
    const uint8_t* ta = a + c * as;
    __m512i s = _mm512_load_si512(sums[c - c0]);
    if constexpr (!F::kMin) s = _mm512_add_epi32(s, bcast4(ta + 36));
    acc[c] = scale_block<F>(acc[c], s, d, ta, mw);
  }
}

// Each block's weights in tile 4 serve both 16-token halves (tiles 2 -> 0 and 3 -> 1), so a
// weight byte is read and unpacked once per 32 tokens.
template <class F, bool kTwoHalves>
void amx_walk(int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as, int cols) {
  alignas(64) uint8_t wbuf[8 * 64];
  alignas(64) int32_t sums[kRowGroupHalf][16];
  __m512 acc[2 * kRowGroupHalf];
  for (int c = 0; c < cols; ++c) acc[c] = _mm512_setzero_ps();
  const int lo = cols < kRowGroupHalf ? cols : kRowGroupHalf;
  const int64_t blocks = n / QK8_0;
  for (int64_t j = 0; j < blocks; ++j) {
    const uint8_t* cw = w + j * F::kBlockBytes;
    const uint8_t* a = act + j * kQ8SumsBlockBytes;
    for (size_t o = 0; o < F::kBlockBytes + 32; o += 64)
      _mm_prefetch(reinterpret_cast<const char*>(cw + 2 * F::kBlockBytes + o), _MM_HINT_T0);
    load_weight_tile<F>(cw, wbuf);
    _tile_loadd(2, a, static_cast<long>(as));
    _tile_zero(0);
    _tile_dpbsud(0, 2, 4);
    if constexpr (kTwoHalves) {
      _tile_loadd(3, a + kRowGroupHalf * as, static_cast<long>(as));
      _tile_zero(1);
      _tile_dpbsud(1, 3, 4);
    }
    const __m512 d = load_scales(cw);
    const __m512 mw = block_mins<F>(cw);
    _tile_stored(0, sums, 64);
    fold_block<F>(acc, sums, 0, lo, a, as, d, mw);
    if constexpr (kTwoHalves) {
      _tile_stored(1, sums, 64);
      fold_block<F>(acc, sums, kRowGroupHalf, cols, a, as, d, mw);
    }
  }
  for (int c = 0; c < cols; ++c) _mm512_storeu_ps(out + c * os, acc[c]);
}

template <class F>
void amx_tile(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols) {
  if (cols <= 0 || cols > kPackedTileColsX16Amx) return;
  const TileConfigScope tiles(row_group_tiles(cols));  // the thread's previous configuration returns on exit
  if (cols > kRowGroupHalf) amx_walk<F, true>(n, out, out_stride, w, act, act_stride, cols);
  else amx_walk<F, false>(n, out, out_stride, w, act, act_stride, cols);
}

}  // namespace

void tile_q4_0x16_amx(int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as, int cols) {
  amx_tile<Q4_0x16>(n, out, os, w, act, as, cols);
}
void tile_q4_1x16_amx(int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as, int cols) {
  amx_tile<Q4_1x16>(n, out, os, w, act, as, cols);
}
void tile_q5_0x16_amx(int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as, int cols) {
  amx_tile<Q5_0x16>(n, out, os, w, act, as, cols);
}
void tile_q5_1x16_amx(int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as, int cols) {
  amx_tile<Q5_1x16>(n, out, os, w, act, as, cols);
}
void tile_q8_0x16_amx(int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as, int cols) {
  amx_tile<Q8_0x16>(n, out, os, w, act, as, cols);
}

}  // namespace quant
}  // namespace fulcrum
