// Q4_0 in the q4_0x4 layout's piece order (repack.h) × Q8_0 activations arranged as broadcast
// pieces ("q8_0 bcast"), AVX-512 VNNI: the AVX2 piece kernels (packed_pieces_avx2.cc) two pieces
// a zmm.
//
// Why not the row order (packed_avx512.cc), which Q5_0 and Q8_0 keep: there a zmm holds one row's
// chunk, its 16 int32 lanes four per block, so every (row, token) and 128 multiply-adds pay two
// vpdpbusd, four loads and a float step of three operations. In piece order a lane is a
// (row, block) pair: a block pair's 256 multiply-adds for four rows are four vpdpbusd over four
// activation loads and one float step. The arranged activations are 2.5x the row order's bytes,
// though, and that decides how it must be driven. Measured on an AMD EPYC (Zen 4, AVX-512, 2
// vCPUs), 0.5B Q4_0, 256-token prefill in one step, 1 thread, alternating processes (tok/s):
//   row order, 4 tokens a tile                          244-263
//   piece order, one row group × 4 or 8 tokens           191-209 (activation loads per MAC too many)
//   piece order, two row groups × 4 tokens (tile2)       257-266
//   piece order, two row groups × 8 tokens               284-294; 2 threads 518-523 against 451-455;
//                                                         1.3B 1 thread 82-85 against 75-76
// and decode (the GEMV below, four weight streams as the AVX2 pieces read them; the row order's
// GEMV is one stream): 1 thread 103-109 tok/s against 84-87, 2 threads 149-176 against 114-122.
//
// The GEMV and the tile share `step` per (row group, token, block pair) and the final reduction,
// so a token's outputs are the same bits alone and in a batch.
#include <cstring>

#include "quant/formats/blocks.h"
#include "quant/packed/repack.h"
#include "quant/tiles/gemm_tile_dispatch.h"
#define QUANT_ISA avx512
#include "quant/dot/simd_avx512.h"

namespace fulcrum {
namespace quant {
namespace {

constexpr int64_t kChunkCols = 4 * QK8_0;
constexpr size_t kChunkBytes = 4 * 4 * sizeof(block_q4_0);  // 288, as row order
constexpr size_t kQs = 32, kPairBytes = 128;
constexpr size_t kActPairBytes = kQ8BcastPairBytes;  // 320
constexpr size_t kGemvPrefetchBytes = 512;

// A block pair's weights, unpacked: the low nibbles of pieces (0, 1) and (2, 3), then the high
// nibbles of the same; lane 8·k + 4·h + r of zmm holds four quants of row r, block 2p + h from
// piece 2·(zmm % 2) + k. The arranged activations' vectors 2j, 2j + 1 (quants of pieces j, j + 1;
// high nibbles: vectors 4 + …) are 64 contiguous bytes, so one zmm load pairs with each.
struct PairW {
  __m512i w[4];
  __m512 d;  // the eight (row, block) scales, in both halves
};

inline PairW load_pair(const uint8_t* cw, int p) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const uint8_t* q = cw + kQs + kPairBytes * p;
  const __m512i v0 = _mm512_loadu_si512(q), v1 = _mm512_loadu_si512(q + 64);
  PairW out;
  out.w[0] = _mm512_and_si512(v0, m4);
  out.w[1] = _mm512_and_si512(v1, m4);
  out.w[2] = _mm512_and_si512(_mm512_srli_epi16(v0, 4), m4);
  out.w[3] = _mm512_and_si512(_mm512_srli_epi16(v1, 4), m4);
  out.d = _mm512_broadcast_f32x8(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(cw + 16 * p))));
  return out;
}

// One (row group, token, block pair): quants ≤ 15 against |y| ≤ 127 (vpdpbusd sums in int32), the
// arranged −8·Σy seeds the low half only (the halves are added at the end), then the scales.
inline __m512 step(__m512 acc, const PairW& w, const uint8_t* a) {
  const __m512i seed = _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 288)));
  __m512i s0 = _mm512_dpbusd_epi32(seed, w.w[0], _mm512_loadu_si512(a));
  __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.w[1], _mm512_loadu_si512(a + 64));
  s0 = _mm512_dpbusd_epi32(s0, w.w[2], _mm512_loadu_si512(a + 128));
  s1 = _mm512_dpbusd_epi32(s1, w.w[3], _mm512_loadu_si512(a + 192));
  const __m512 dy = _mm512_broadcast_f32x8(_mm256_loadu_ps(reinterpret_cast<const float*>(a + 256)));
  return _mm512_fmadd_ps(_mm512_mul_ps(w.d, dy), _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), acc);
}

// Lanes 8·k + 4·h + r summed over k, then h: row r's output.
inline __m128 finish(__m512 acc) {
  const __m256 halves = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
  return _mm_add_ps(_mm256_castps256_ps128(halves), _mm256_extractf128_ps(halves, 1));
}

// The drivers' kernel (tiles/gemm_tile_dispatch.h). The GEMV is the tile's one-token case.
struct Kernel {
  static constexpr int64_t kChunkCols = quant::kChunkCols;
  static constexpr size_t kChunkBytes = quant::kChunkBytes, kActChunkBytes = 2 * kActPairBytes;
  static constexpr int kGroupRows = 4;
  using Acc = __m512;
  static Acc zero() { return _mm512_setzero_ps(); }
  static void chunk(Acc& acc, const uint8_t* cw, const uint8_t* a) {
    for (int p = 0; p < 2; ++p) acc = step(acc, load_pair(cw, p), a + p * kActPairBytes);
  }
  static void store(float* out, Acc acc) { _mm_storeu_ps(out, finish(acc)); }
  template <int C>
  static void tile(int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as) {
    const int64_t chunks = n / kChunkCols;
    const size_t group_bytes = static_cast<size_t>(chunks) * kChunkBytes;
    __m512 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
    for (int64_t j = 0; j < chunks; ++j) {
      const uint8_t* cw = w + j * kChunkBytes;
      // The next row group's same chunk: the caller's next tile call reads it.
      for (size_t o = 0; o < kChunkBytes + 32; o += 64) _mm_prefetch(reinterpret_cast<const char*>(cw + group_bytes + o), _MM_HINT_T0);
      for (int p = 0; p < 2; ++p) {
        const PairW pw = load_pair(cw, p);
        const uint8_t* a = act + j * kActChunkBytes + p * kActPairBytes;
        for (int c = 0; c < C; ++c) acc[c] = step(acc[c], pw, a + c * as);
      }
    }
    for (int c = 0; c < C; ++c) _mm_storeu_ps(out + c * os, finish(acc[c]));
  }
  // Two consecutive row groups (8 rows) × C tokens: each activation load serves both.
  template <int C>
  static void tile2(int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as) {
    const int64_t chunks = n / kChunkCols;
    const size_t group_bytes = static_cast<size_t>(chunks) * kChunkBytes;
    __m512 acc0[C], acc1[C];
    for (int c = 0; c < C; ++c) acc0[c] = acc1[c] = _mm512_setzero_ps();
    for (int64_t j = 0; j < chunks; ++j) {
      const uint8_t* cw = w + j * kChunkBytes;
      for (size_t o = 0; o < kChunkBytes + 32; o += 64) _mm_prefetch(reinterpret_cast<const char*>(cw + 2 * group_bytes + o), _MM_HINT_T0);
      for (size_t o = 0; o < kChunkBytes + 32; o += 64) _mm_prefetch(reinterpret_cast<const char*>(cw + 3 * group_bytes + o), _MM_HINT_T0);
      for (int p = 0; p < 2; ++p) {
        const PairW pw0 = load_pair(cw, p), pw1 = load_pair(cw + group_bytes, p);
        const uint8_t* a = act + j * kActChunkBytes + p * kActPairBytes;
        for (int c = 0; c < C; ++c) {
          acc0[c] = step(acc0[c], pw0, a + c * as);
          acc1[c] = step(acc1[c], pw1, a + c * as);
        }
      }
    }
    for (int c = 0; c < C; ++c) {
      _mm_storeu_ps(out + c * os, finish(acc0[c]));
      _mm_storeu_ps(out + c * os + 4, finish(acc1[c]));
    }
  }
};
template <int C>
void tile2_any(int cols, int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as) {
  if (cols == C) Kernel::tile2<C>(n, out, os, w, act, as);
  else if constexpr (C > 1) tile2_any<C - 1>(cols, n, out, os, w, act, as);
}

}  // namespace

void gemv_q4_0x4_pieces_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) {
  packed_gemv_groups<Kernel>(n, out, w, groups, act, kGemvPrefetchBytes);
}
void tile_q4_0x4_pieces_avx512(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols) {
  packed_tile_any<Kernel, kPackedTileColsPiecesAvx512>(cols, n, out, out_stride, w, act, act_stride);
}
void tile2_q4_0x4_pieces_avx512(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols) {
  tile2_any<kPackedTileColsPiecesAvx512>(cols, n, out, out_stride, w, act, act_stride);
}

}  // namespace quant
}  // namespace fulcrum
