// Q4_0, Q5_0 and Q8_0 in the q4_0x4 / q5_0x4 / q8_0x4 layouts' AVX2 piece order (repack.h) × Q8_0 activations
// arranged as broadcast pieces ("q8_0 bcast"), AVX2; the avxvnni copy of this file (core/isa.h)
// takes the `#if defined(__AVXVNNI__)` branches, where one vpdpbusd does a vpmaddubsw, its widening
// vpmaddwd and the int32 add (same integers: the plain AVX2 sums never saturate).
//
// Why a second byte order on AVX2: in the row order each ymm holds one row's two blocks, so every
// (row, token, two blocks) needs its own int32 widening, scale product, conversion, fma and, at
// the end, a horizontal sum — about 9.5 operations per 64 multiply-adds. Here a ymm lane is a
// (row, block) pair: 32-bit lane 4h + r holds four consecutive quants of row r, block 2p + h, and
// the activation vector holds the token's matching four quants of block 2p + h in all four lanes
// of its half (arranged once per matmul). Eight vpmaddubsw cover a block pair for all four rows
// at once; their int16 sums add without saturating (Q4_0: 8 · 2 · 15 · 128 = 30720 < 32767), then one
// vpmaddwd (Q5_0: two), the −8·Σy correction, one conversion, one scale product and one fma serve 256
// multiply-adds: about 20 operations, and the lanes are already the outputs (no horizontal sum).
//
// The GEMV and the tile share `F::pair` per (row group, token, block pair) and the final
// reduction, so a token's outputs are the same bits alone and in a batch.
#include <cstring>

#include "quant/formats/blocks.h"
#include "quant/packed/repack.h"
#include "quant/tiles/gemm_tile_dispatch.h"
#define QUANT_ISA QUANT_AVX2_LEVEL
#include "quant/dot/simd_avx2.h"

namespace fulcrum {
namespace quant {
namespace {

constexpr int64_t kChunkCols = 4 * QK8_0;
constexpr size_t kPairBytes = 128;                   // one block pair's nibbles, four rows
constexpr size_t kActPairBytes = kQ8BcastPairBytes;  // 320
constexpr size_t kGemvPrefetchBytes = 512;

// A block pair's weights, unpacked: w[s] holds quants 4s..4s+3 of each (row, block) lane.
struct PairW {
  __m256i w[8];
  __m256 d;  // the eight (row, block) scales, lane 4h + r
};

inline const __m256i* act_vec(const uint8_t* a) { return reinterpret_cast<const __m256i*>(a); }

// The float part both formats share: lanes' int32 sums times the (row, block) × token scales.
inline __m256 scale_step(__m256 acc, const PairW& w, __m256i s, const uint8_t* a) {
  const __m256 sc = _mm256_mul_ps(w.d, _mm256_loadu_ps(reinterpret_cast<const float*>(a + 256)));
  return _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(s), acc);
}

struct Q4_0P {
  static constexpr size_t kChunkBytes = 4 * 4 * sizeof(block_q4_0);  // 288, as row order
  static constexpr size_t kQs = 32;
  static inline PairW load_pair(const uint8_t* cw, int p) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    PairW out;
    const uint8_t* q = cw + kQs + kPairBytes * p;
    for (int m = 0; m < 4; ++m) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * m));
      out.w[m] = _mm256_and_si256(v, m4);
      out.w[m + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    }
    out.d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(cw + 16 * p)));
    return out;
  }
  // Quants <= 15: eight vpmaddubsw sums fit int16 (8 · 2 · 15 · 128 = 30720).
  static inline __m256 step(__m256 acc, const PairW& w, const uint8_t* a) {
    const __m256i* y = act_vec(a);
#if defined(__AVXVNNI__)
    // Two chains of four (the correction starts one) so consecutive vpdpbusd do not wait on each other.
    __m256i s0 = _mm256_dpbusd_avx_epi32(_mm256_loadu_si256(y + 9), w.w[0], _mm256_loadu_si256(y + 0));
    __m256i s1 = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w.w[1], _mm256_loadu_si256(y + 1));
    for (int m = 2; m < 8; m += 2) {
      s0 = _mm256_dpbusd_avx_epi32(s0, w.w[m], _mm256_loadu_si256(y + m));
      s1 = _mm256_dpbusd_avx_epi32(s1, w.w[m + 1], _mm256_loadu_si256(y + m + 1));
    }
    return scale_step(acc, w, _mm256_add_epi32(s0, s1), a);
#else
    __m256i p0 = _mm256_maddubs_epi16(w.w[0], _mm256_loadu_si256(y + 0));
    __m256i p1 = _mm256_maddubs_epi16(w.w[1], _mm256_loadu_si256(y + 1));
    p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(w.w[2], _mm256_loadu_si256(y + 2)));
    p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(w.w[3], _mm256_loadu_si256(y + 3)));
    p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(w.w[4], _mm256_loadu_si256(y + 4)));
    p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(w.w[5], _mm256_loadu_si256(y + 5)));
    p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(w.w[6], _mm256_loadu_si256(y + 6)));
    p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(w.w[7], _mm256_loadu_si256(y + 7)));
    const __m256i s = _mm256_add_epi32(_mm256_madd_epi16(_mm256_add_epi16(p0, p1), _mm256_set1_epi16(1)), _mm256_loadu_si256(y + 9));
    return scale_step(acc, w, s, a);
#endif
  }
};

// Q5_0 (repack.h): the pair's fifth bits in one 32-byte plane, vector s's in bit s of each byte:
// a 16-bit shift brings them to bit 4 (a byte's bit 4 comes from the same byte's bit s for shifts
// up to 4 either way) and an AND keeps it. The plane replaced eight 32-bit masks each expanded by a
// broadcast, a shuffle, an AND and a compare (5 vector operations a vector against 2): bench.matmul
// 4864 x 896 Q5_0 at one thread, alternating builds, from L3 12.5-13.8 -> 17.3-19.4 GB/s, from DRAM
// 8.3-12.2 -> 12.2-13.7; against a read probe just before and after, 84-87 % -> 103-106 % at one
// thread, 81-84 % -> 85-92 % at two.
struct Q5_0P {
  static constexpr size_t kChunkBytes = 4 * 4 * sizeof(block_q5_0);  // 352, as row order
  static constexpr size_t kQh = 32, kQs = 96;
  template <int S>
  static inline __m256i fifth(__m256i plane, __m256i sixteen) {
    if constexpr (S < 4) return _mm256_and_si256(_mm256_slli_epi16(plane, 4 - S), sixteen);
    else if constexpr (S == 4) return _mm256_and_si256(plane, sixteen);
    else return _mm256_and_si256(_mm256_srli_epi16(plane, S - 4), sixteen);
  }
  static inline PairW load_pair(const uint8_t* cw, int p) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), sixteen = _mm256_set1_epi8(16);
    PairW out;
    const uint8_t* q = cw + kQs + kPairBytes * p;
    const __m256i plane = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cw + kQh + 32 * p));
    const __m256i hi[8] = {fifth<0>(plane, sixteen), fifth<1>(plane, sixteen), fifth<2>(plane, sixteen), fifth<3>(plane, sixteen),
                           fifth<4>(plane, sixteen), fifth<5>(plane, sixteen), fifth<6>(plane, sixteen), fifth<7>(plane, sixteen)};
    for (int m = 0; m < 4; ++m) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * m));
      out.w[m] = _mm256_or_si256(_mm256_and_si256(v, m4), hi[m]);
      out.w[m + 4] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), hi[m + 4]);
    }
    out.d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(cw + 16 * p)));
    return out;
  }
  // Quants <= 31: four vpmaddubsw sums fit int16 (4 · 2 · 31 · 128 = 31744), so two vpmaddwd;
  // the correction is −16·Σy, twice the arranged −8·Σy.
  static inline __m256 step(__m256 acc, const PairW& w, const uint8_t* a) {
    const __m256i* y = act_vec(a);
#if defined(__AVXVNNI__)
    const __m256i corr = _mm256_loadu_si256(y + 9);
    __m256i s0 = _mm256_dpbusd_avx_epi32(corr, w.w[0], _mm256_loadu_si256(y + 0));
    __m256i s1 = _mm256_dpbusd_avx_epi32(corr, w.w[1], _mm256_loadu_si256(y + 1));
    for (int m = 2; m < 8; m += 2) {
      s0 = _mm256_dpbusd_avx_epi32(s0, w.w[m], _mm256_loadu_si256(y + m));
      s1 = _mm256_dpbusd_avx_epi32(s1, w.w[m + 1], _mm256_loadu_si256(y + m + 1));
    }
    return scale_step(acc, w, _mm256_add_epi32(s0, s1), a);
#else
    __m256i p0 = _mm256_maddubs_epi16(w.w[0], _mm256_loadu_si256(y + 0));
    __m256i p1 = _mm256_maddubs_epi16(w.w[4], _mm256_loadu_si256(y + 4));
    p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(w.w[1], _mm256_loadu_si256(y + 1)));
    p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(w.w[5], _mm256_loadu_si256(y + 5)));
    p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(w.w[2], _mm256_loadu_si256(y + 2)));
    p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(w.w[6], _mm256_loadu_si256(y + 6)));
    p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(w.w[3], _mm256_loadu_si256(y + 3)));
    p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(w.w[7], _mm256_loadu_si256(y + 7)));
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i corr = _mm256_loadu_si256(y + 9);
    const __m256i s = _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(p0, ones), _mm256_madd_epi16(p1, ones)), _mm256_add_epi32(corr, corr));
    return scale_step(acc, w, s, a);
#endif
  }
};

// Q8_0 (q8_0x4 in piece order, repack.h): signed quants, so each 4-quant piece runs as |w| ·
// (y with w's sign) through vpmaddubsw; a piece's pair sums (≤ 2 · 127 · 127) fit int16 but two
// pieces' would not, so every piece is widened by vpmaddwd and the eight added in int32 (exact:
// their order does not matter). The −8·Σy correction of the arrangement is not used. Per block
// pair and token: 8 vpsignb, 8 vpmaddubsw, 8 vpmaddwd, 7 adds and the shared float step, for 256
// multiply-adds (the row-order kernel it replaced — a ymm per row and two blocks, 4 rows × 2
// tokens a tile — needed about 50); |w| is taken once per tile and serves all its tokens.
// Measured on the shared 2-vCPU Zen 3, 256 tokens, 1 thread, GFLOP/s by process CPU time against
// the row-order kernel, alternating: at load 6, 4864×896 52–65 against 47–54, 896×4864 51–63
// against 50–51, 896×896 (best run) 81–83 against 54–67; at load 9, 896×4864 31–38 against 34–40
// (its 24 KiB of arranged activations a token stream from L2; the row order reads 9.7 KiB).
struct Q8_0P {
  static constexpr size_t kChunkBytes = 4 * 4 * sizeof(block_q8_0);  // 544, as row order
  static constexpr size_t kQs = 32;
  static constexpr size_t kPairBytes = 256;  // eight 32-byte pieces
  template <int C>
  static inline void pair(__m256* acc, const uint8_t* cw, int p, const uint8_t* a, size_t as) {
    const uint8_t* q = cw + kQs + kPairBytes * p;
    // Even and odd pieces in two chains: with AVX-VNNI each step is one vpdpbusd that waits on the
    // last, and the GEMV (C = 1) has no other tokens to overlap them with.
    __m256i s[C], s_odd[C];
    for (int c = 0; c < C; ++c) s[c] = s_odd[c] = _mm256_setzero_si256();
    for (int m = 0; m < 8; m += 2) {
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * m));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * m + 32));
      const __m256i aw0 = _mm256_sign_epi8(w0, w0), aw1 = _mm256_sign_epi8(w1, w1);
      for (int c = 0; c < C; ++c) {
        const __m256i* y = act_vec(a + c * as) + m;
        s[c] = simd::dot_us8_add(s[c], aw0, _mm256_sign_epi8(_mm256_loadu_si256(y), w0));
        s_odd[c] = simd::dot_us8_add(s_odd[c], aw1, _mm256_sign_epi8(_mm256_loadu_si256(y + 1), w1));
      }
    }
    for (int c = 0; c < C; ++c) s[c] = _mm256_add_epi32(s[c], s_odd[c]);
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(cw + 16 * p)));
    for (int c = 0; c < C; ++c) {
      const __m256 sc = _mm256_mul_ps(d, _mm256_loadu_ps(reinterpret_cast<const float*>(a + c * as + 256)));
      acc[c] = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(s[c]), acc[c]);
    }
  }
};

// Q4_0 / Q5_0: a block pair's weights unpacked once (load_pair), then F::step per token.
template <class F>
struct Unpacked {
  static constexpr size_t kChunkBytes = F::kChunkBytes;
  template <int C>
  static inline void pair(__m256* acc, const uint8_t* cw, int p, const uint8_t* a, size_t as) {
    const PairW pw = F::load_pair(cw, p);
    for (int c = 0; c < C; ++c) acc[c] = F::step(acc[c], pw, a + c * as);
  }
};

// Lanes 4h + r summed over h: row r's output.
inline __m128 finish(__m256 acc) { return _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1)); }

// The drivers' kernel (tiles/gemm_tile_dispatch.h). The GEMV is the tile's one-token case (same
// F::pair<1> per block pair, same finish), so a token's outputs are the same bits alone and in a batch.
template <class F>
struct Kernel {
  static constexpr int64_t kChunkCols = quant::kChunkCols;
  static constexpr size_t kChunkBytes = F::kChunkBytes, kActChunkBytes = 2 * kActPairBytes;
  static constexpr int kGroupRows = 4;
  using Acc = __m256;
  static Acc zero() { return _mm256_setzero_ps(); }
  static void chunk(Acc& acc, const uint8_t* cw, const uint8_t* a) {
    for (int p = 0; p < 2; ++p) F::template pair<1>(&acc, cw, p, a + p * kActPairBytes, 0);
  }
  static void store(float* out, Acc acc) { _mm_storeu_ps(out, finish(acc)); }
  template <int C>
  static void tile(int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as) {
    const int64_t chunks = n / kChunkCols;
    const size_t group_bytes = static_cast<size_t>(chunks) * kChunkBytes;
    __m256 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t j = 0; j < chunks; ++j) {
      const uint8_t* cw = w + j * kChunkBytes;
      // The next row group's same chunk: the caller's next tile call reads it.
      for (size_t o = 0; o < kChunkBytes + 32; o += 64) _mm_prefetch(reinterpret_cast<const char*>(cw + group_bytes + o), _MM_HINT_T0);
      for (int p = 0; p < 2; ++p) F::template pair<C>(acc, cw, p, act + j * kActChunkBytes + p * kActPairBytes, as);
    }
    for (int c = 0; c < C; ++c) _mm_storeu_ps(out + c * os, finish(acc[c]));
  }
};

}  // namespace

void QUANT_FN(arrange_q8_0_bcast)(const void* q8, void* dst, int64_t n) {
  const uint8_t* y = static_cast<const uint8_t*>(q8);
  uint8_t* o = static_cast<uint8_t*>(dst);
  const __m256i eight = _mm256_set1_epi8(8), ones = _mm256_set1_epi16(1);
  for (int64_t p = 0; p < n / (2 * QK8_0); ++p, y += 2 * sizeof(block_q8_0), o += kActPairBytes) {
    const uint8_t* b0 = y;
    const uint8_t* b1 = y + sizeof(block_q8_0);
    // Quants 0..15 of each block in the halves' low lanes, 16..31 in their high lanes.
    const __m256i lo = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(b1 + 2), reinterpret_cast<const __m128i*>(b0 + 2));
    const __m256i hi = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(b1 + 18), reinterpret_cast<const __m128i*>(b0 + 18));
    // Piece s (quants 4s..4s+3 of each block) broadcast to its half's four lanes.
    const __m256i* src[2] = {&lo, &hi};
    for (int s = 0; s < 8; ++s) {
      const __m256i v = *src[s / 4];
      __m256i b;
      switch (s % 4) {
        case 0: b = _mm256_shuffle_epi32(v, 0x00); break;
        case 1: b = _mm256_shuffle_epi32(v, 0x55); break;
        case 2: b = _mm256_shuffle_epi32(v, 0xAA); break;
        default: b = _mm256_shuffle_epi32(v, 0xFF); break;
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 32 * s), b);
    }
    uint16_t d0, d1;
    std::memcpy(&d0, b0, 2);
    std::memcpy(&d1, b1, 2);
    const __m256 dy = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_set1_ps(simd::f16(d0))), _mm_set1_ps(simd::f16(d1)), 1);
    _mm256_storeu_ps(reinterpret_cast<float*>(o + 256), dy);
    // −8 · Σy per block, in each of its half's lanes: maddubs(8, y) pairs, madd to int32 (four
    // lanes per block), then the half's four lanes summed into all of them.
    __m256i s = _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(eight, lo), _mm256_maddubs_epi16(eight, hi)), ones);
    s = _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0x4E));
    s = _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0xB1));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 288), _mm256_sub_epi32(_mm256_setzero_si256(), s));
  }
}

void QUANT_FN(gemv_q4_0x4_pieces)(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) {
  packed_gemv_groups<Kernel<Unpacked<Q4_0P>>>(n, out, w, groups, act, kGemvPrefetchBytes);
}
void QUANT_FN(tile_q4_0x4_pieces)(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols) {
  packed_tile_any<Kernel<Unpacked<Q4_0P>>, kPackedTileColsPiecesAvx2>(cols, n, out, out_stride, w, act, act_stride);
}
void QUANT_FN(gemv_q5_0x4_pieces)(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) {
  packed_gemv_groups<Kernel<Unpacked<Q5_0P>>>(n, out, w, groups, act, kGemvPrefetchBytes);
}
void QUANT_FN(tile_q5_0x4_pieces)(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols) {
  packed_tile_any<Kernel<Unpacked<Q5_0P>>, kPackedTileColsPiecesAvx2>(cols, n, out, out_stride, w, act, act_stride);
}
void QUANT_FN(gemv_q8_0x4_pieces)(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) {
  packed_gemv_groups<Kernel<Q8_0P>>(n, out, w, groups, act, kGemvPrefetchBytes);
}
void QUANT_FN(tile_q8_0x4_pieces)(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols) {
  packed_tile_any<Kernel<Q8_0P>, kPackedTileColsPiecesAvx2>(cols, n, out, out_stride, w, act, act_stride);
}

}  // namespace quant
}  // namespace fulcrum
