// Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 in the q4_0x8 / q4_1x8 / q5_0x8 / q5_1x8 / q8_0x8 layouts
// (repack.h: eight rows a group, block after block) × Q8_0 activations with their block sums
// ("q8_0 sums"; Q4_1's and Q5_1's Q8_1 ones with theirs, "q8_1 sums"; arranged here for every ISA level), AVX2; the avxvnni
// copy of this file (core/isa.h) takes the `#if defined(__AVXVNNI__)` branches, where one
// vpdpbusd does a vpmaddubsw, its widening vpmaddwd and the int32 add (same integers: the plain
// AVX2 sums never saturate, and integer sums do not depend on their order, so both copies give
// the same bits).
//
// The AVX-512 16-row layout (packed_x16_avx512.cc) at ymm width: a ymm's 8 int32 lanes are the
// group's 8 rows, each lane four quants of its row's block, and the activation operand is a
// 4-byte broadcast from the token's quants. It replaced a 4-row "piece order" whose lanes were
// (row, block) pairs over activations pre-broadcast in memory, 160 bytes a block and token
// against 40 here: about the same instructions per 256 multiply-adds, but a tile's tokens now
// stay in L1 on the 1.3B shape's 2048 and 5504 columns. Measured on an AMD EPYC (AVX-512 and AVX-VNNI: Zen 5, 2 vCPUs),
// benchModel (256-token prefill, 48 decoded tokens), 1 thread, alternating processes, tok/s,
// piece order -> this layout:
//   FULCRUM_ISA=avxvnni  0.5B Q4_0 prefill 185-186 -> 269-272, decode 112-116 -> 118
//                        1.3B Q4_0 prefill 51-55 -> 81, decode 29-30 -> 33-34
//                        0.5B Q8_0 prefill 185-188 -> 294-295, decode 57-58 -> 63-67
//                        1.3B Q8_0 prefill 47-50 -> 90-92, decode 16-17 -> 19
//   FULCRUM_ISA=avx2     0.5B Q4_0 prefill 155-162 -> 222-230, decode 97 -> 119-121
//                        1.3B Q4_0 prefill 47-51 -> 64-68, decode 25-26 -> 32-35
//                        0.5B Q8_0 prefill 146 -> 179-181, decode 55-56 -> 62-65
//                        1.3B Q8_0 prefill 37-41 -> 51-53, decode 15 -> 17-18
//
// The GEMV and the tile share `scale_block`'s float step per (row group, token, block) in block
// order; the integer sums are exact, so a token's outputs are the same bits alone and in a batch.
#include <cstring>

#include "quant/formats/blocks.h"
#include "quant/packed/repack.h"
#include "quant/tiles/gemm_tile_dispatch.h"
#define QUANT_ISA QUANT_AVX2_LEVEL
#include "quant/dot/simd_avx2.h"

namespace fulcrum {
namespace quant {
namespace {

constexpr size_t kActBytes = kQ8SumsBlockBytes;  // 40
// How far ahead of each of its streams the GEMV prefetches (prefetchnta, where the CPU's choice
// has software prefetch): 2 KiB; at 1 KiB the walks fell behind DRAM. AMD EPYC Zen 5, 1 thread,
// 1 KiB -> 2 KiB: bench.matmul 4864 x 896 from a 256 MiB ring, medians of 100, three alternating
// rounds, GB/s: FULCRUM_ISA=avx2 Q4_0 34.1-34.7 -> 39.8-41.6, Q5_0 35.1-35.4 -> 39.5-40.0, Q8_0
// level (39.7-40.6); avxvnni Q4_0 36.6-37.2 -> 35.9-40.8, Q5_0 35.5-36.4 -> 39.8-40.5, Q8_0 38.4-40.0
// -> 34.5-40.6. Decode (alternating processes, 64 tokens after 256), tok/s: avx2 0.5B Q4_0
// 128-138 -> 162-169, 0.5B Q8_0 86-88 -> 90-92; avxvnni 0.5B Q4_0 144-147 -> 161-168, 0.5B Q4_K
// (its 896-column matrices Q5_0) 120-127 -> 133-135, 0.5B Q8_0 88-90 -> 87-94. 3 KiB no better
// than 2; one stream 4.5 KiB ahead (the K-quants' form) and two 2.25 KiB ahead in between.
constexpr size_t kGemvPrefetchBytes = 2048;
// Q8_0's GEMV reads one stream 4.5 KiB ahead instead (as the AVX-512 kernels, packed_x16_avx512.cc):
// decode, 1 thread, alternating processes, tok/s, four streams 2 KiB ahead -> this: avxvnni 0.5B
// Q8_0 92-95 -> 90-99, 1.3B Q8_0 26.2-26.5 -> 27.1-28.0; avx2 level (0.5B 89-92 / 90-91, 1.3B
// 26.9-27.5 / 27.4-27.9). The 4- and 5-bit formats lost with one stream (avx2 0.5B Q4_0 147-168 ->
// 151-163, 0.5B Q4_K 135-138 -> 122-139).
constexpr size_t kGemvPrefetchQ8_0Bytes = kOneStreamPrefetchBytes;

// One block of the group's 8 rows as eight unsigned vectors: u[m] lane r = row r's quants
// 4m..4m+3; d the rows' scales.
struct BlockW {
  __m256i u[8];
  __m256 d;
};

inline __m256 load_scales(const uint8_t* cw) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(cw))); }

inline __m256i bcast4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// A block's scales at cw and its 4 × 32 nibble bytes at qs: vector k's low nibbles are quants
// 4k.., its high nibbles 16+4k.. (q4_0x8, and q5_0x8's low four bits).
inline BlockW load_nibbles(const uint8_t* cw, const uint8_t* qs) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  BlockW b;
  b.d = load_scales(cw);
  for (int k = 0; k < 4; ++k) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * k));
    b.u[k] = _mm256_and_si256(v, m4);
    b.u[k + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
  }
  return b;
}

// Whether this copy's Q4_0 / Q4_1 GEMVs take the in-place high nibbles below (AVX-VNNI only).
#if defined(__AVXVNNI__)
constexpr bool kVnniHi16 = true;
#else
constexpr bool kVnniHi16 = false;
#endif

#if defined(__AVXVNNI__)
// Q4_0 / Q4_1 GEMVs with AVX-VNNI: the high nibbles stay in place (u[k + 4] = v & 0xF0, 16 × the
// quants), summed apart from the low ones and shifted down by 4 once a block (exact: each product
// is a multiple of 16; a lane's sum at most 4 · 16 · 15 · 127), in place of four shifts a block:
// the GEMV is bound by its vector arithmetic, not by memory, even from L2. AMD EPYC (Zen 5, 2
// vCPUs), FULCRUM_ISA=avxvnni, 1 thread, alternating processes: bench.matmul 1024 × 896 from
// L2/L3, best of 400, Q4_0 57-58 -> 65-66 GB/s, Q4_1 63-65 -> 77-80; 4864 × 896 Q4_0 from DRAM
// 34.7-35.7 -> 36.7-37.4 GB/s; 0.5B Q4_0 decode (96 tokens after 256) 133-136 -> 137-142 tok/s.
// The prefill tile keeps the shifted form (Unpacked): there the shift per token would cost more
// than the four per block it saves (with it, 0.5B Q4_0 prefill 368-377 -> 344-367 tok/s).
inline BlockW load_nibbles_hi16(const uint8_t* cw, const uint8_t* qs) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), h4 = _mm256_set1_epi8(static_cast<char>(0xF0));
  BlockW b;
  b.d = load_scales(cw);
  for (int k = 0; k < 4; ++k) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * k));
    b.u[k] = _mm256_and_si256(v, m4);
    b.u[k + 4] = _mm256_and_si256(v, h4);
  }
  return b;
}
template <bool kSeed>
inline __m256i vnni_sum_hi16(const BlockW& w, const uint8_t* a) {
  __m256i lo = kSeed ? bcast4(a + 36) : _mm256_setzero_si256(), hi = _mm256_setzero_si256();
  for (int m = 0; m < 4; ++m) {
    lo = _mm256_dpbusd_avx_epi32(lo, w.u[m], bcast4(a + 4 * m));
    hi = _mm256_dpbusd_avx_epi32(hi, w.u[m + 4], bcast4(a + 16 + 4 * m));
  }
  return _mm256_add_epi32(lo, _mm256_srai_epi32(hi, 4));
}
// The block's integer sum per row with AVX-VNNI, from the token's −o·Σy: two chains of four so
// consecutive vpdpbusd do not wait on each other (the GEMV has no other tokens to overlap).
template <bool kSeed = true>
inline __m256i vnni_sum(const BlockW& w, const uint8_t* a) {
  __m256i s0 = kSeed ? bcast4(a + 36) : _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
  for (int m = 0; m < 8; m += 2) {
    s0 = _mm256_dpbusd_avx_epi32(s0, w.u[m], bcast4(a + 4 * m));
    s1 = _mm256_dpbusd_avx_epi32(s1, w.u[m + 1], bcast4(a + 4 * m + 4));
  }
  return _mm256_add_epi32(s0, s1);
}
#endif

// Formats whose value is d·q + m (Q4_1, Q5_1) have kMin: their blocks carry the rows' m and their
// activations the token's s = dy·Σy (Q8_1's, "q8_1 sums") in place of a seed, and a block adds
// m·s after the scaled integer sum (vec_dot_q5_1's terms).
// q4_0x8: 144 bytes a block, the nibbles at 16.
struct Q4_0x8 {
  static constexpr size_t kBlockBytes = 8 * sizeof(block_q4_0);
  static constexpr bool kMin = false;
  // kHi16: the GEMV's form with AVX-VNNI (load_hi16, sum_hi16; Unpacked). kSumGemv: whether the
  // GEMV has a sum of its own (sum_gemv; Q5_0x8 says why).
  static constexpr bool kHi16 = kVnniHi16, kSumGemv = false;
  static inline BlockW load(const uint8_t* cw) { return load_nibbles(cw, cw + 16); }
#if defined(__AVXVNNI__)
  static inline BlockW load_hi16(const uint8_t* cw) { return load_nibbles_hi16(cw, cw + 16); }
  static inline __m256i sum_hi16(const BlockW& w, const uint8_t* a) { return vnni_sum_hi16<true>(w, a); }
#endif
  // Quants ≤ 15: the eight vpmaddubsw's pair sums add in int16 (8 · 2 · 15 · 127 = 30480).
  // kSeed: from the token's −8·Σy (Q4_0), or from zero (Q4_1).
  template <bool kSeed = true>
  static inline __m256i sum(const BlockW& w, const uint8_t* a) {
#if defined(__AVXVNNI__)
    return vnni_sum<kSeed>(w, a);
#else
    __m256i p0 = _mm256_maddubs_epi16(w.u[0], bcast4(a));
    __m256i p1 = _mm256_maddubs_epi16(w.u[1], bcast4(a + 4));
    for (int m = 2; m < 8; m += 2) {
      p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(w.u[m], bcast4(a + 4 * m)));
      p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(w.u[m + 1], bcast4(a + 4 * m + 4)));
    }
    const __m256i s = _mm256_madd_epi16(_mm256_add_epi16(p0, p1), _mm256_set1_epi16(1));
    return kSeed ? _mm256_add_epi32(s, bcast4(a + 36)) : s;
#endif
  }
};

// q4_1x8: 160 bytes a block: the rows' d at 0 and m at 16 (f16), then q4_0x8's nibbles (at 32).
struct Q4_1x8 {
  static constexpr size_t kBlockBytes = 8 * sizeof(block_q4_1);
  static constexpr bool kMin = true, kHi16 = kVnniHi16, kSumGemv = false;
  static inline BlockW load(const uint8_t* cw) { return load_nibbles(cw, cw + 32); }
#if defined(__AVXVNNI__)
  static inline BlockW load_hi16(const uint8_t* cw) { return load_nibbles_hi16(cw, cw + 32); }
  static inline __m256i sum_hi16(const BlockW& w, const uint8_t* a) { return vnni_sum_hi16<false>(w, a); }
#endif
  static inline __m256 mins(const uint8_t* cw) { return load_scales(cw + 16); }
  static inline __m256i sum(const BlockW& w, const uint8_t* a) { return Q4_0x8::sum<false>(w, a); }
};

// q5_0x8: 176 bytes a block; at 16 a 32-byte plane of the high half's top bits, at 48 four
// vectors of the low half's five bits and the high half's low three (repack.h). Vector k of the
// low half is one AND; vector k + 4 is its three bits shifted down and masked, ORed with its two
// from the plane (shifted to bits 3-4, masked): 24 operations a block where the nibbles and a
// plane of fifth bits took 35 (a shift and an AND per vector for the fifth bit, an OR, and the
// nibbles' shifts and ANDs). The GEMV is bound by its vector arithmetic at this width. AMD EPYC
// (Zen 5), 1 thread, alternating builds: bench.matmul 4864 × 896 from L2/L3, medians of 300,
// FULCRUM_ISA=avx2 Q5_0 44.1-44.3 -> 53.1-54.8 GB/s, Q5_1 45.9-47.6 -> 56.6-57.2; in the model
// (0.5B Q4_K_M's ffn_gate, per-weight GB/s of the decode trace, three rounds, with sum_gemv
// below) avx2 37.0-39.8 -> 40.2-41.7, avxvnni 37.9-38.8 -> 39.9-41.3.
struct Q5_0x8 {
  static constexpr size_t kBlockBytes = 8 * sizeof(block_q5_0);
  static constexpr bool kMin = false, kHi16 = false;  // five bits: no in-place high half
  // The scales at cw, the plane at plane_at, the four vectors at qs.
  static inline BlockW load_at(const uint8_t* cw, const uint8_t* plane_at, const uint8_t* qs) {
    const __m256i m5 = _mm256_set1_epi8(0x1F), m3 = _mm256_set1_epi8(0x07), m18 = _mm256_set1_epi8(0x18);
    const __m256i plane = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(plane_at));
    // The plane's bits 2k, 2k + 1 at bits 3-4 (16-bit shifts: what crosses bytes is masked off).
    const __m256i top[4] = {_mm256_slli_epi16(plane, 3), _mm256_slli_epi16(plane, 1), _mm256_srli_epi16(plane, 1), _mm256_srli_epi16(plane, 3)};
    BlockW b;
    b.d = load_scales(cw);
    for (int k = 0; k < 4; ++k) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * k));
      b.u[k] = _mm256_and_si256(v, m5);
      b.u[k + 4] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 5), m3), _mm256_and_si256(top[k], m18));
    }
    return b;
  }
  static inline BlockW load(const uint8_t* cw) { return load_at(cw, cw + 16, cw + 48); }
  // kSeed: from the token's −16·Σy (Q5_0), or from zero (Q5_1). With AVX-VNNI the tile takes
  // vpdpbusd and the GEMV sum_gemv (below).
  template <bool kSeed = true>
  static inline __m256i sum(const BlockW& w, const uint8_t* a) {
#if defined(__AVXVNNI__)
    return vnni_sum<kSeed>(w, a);
#else
    return sum_gemv<kSeed>(w, a);
#endif
  }
  // The GEMV's sum at both levels: vpmaddubsw, int16 adds, two vpmaddwd. Quants ≤ 31: four
  // vpmaddubsw's pair sums fit int16 (4 · 2 · 31 · 127 = 31496). With AVX-VNNI it is faster than
  // vnni_sum's two chains of four vpdpbusd for one token, and slower for a tile (the same
  // integers either way). AMD EPYC (Zen 5), FULCRUM_ISA=avxvnni, bench.matmul 4864 × 896 from
  // L2/L3, 1 thread, medians of 300, two alternating rounds: GEMV Q5_0 50.1-50.6 -> 53.3-55.0
  // GB/s, Q5_1 51.6-52.8 -> 56.3-56.8; 64 tokens Q5_0 1895-1930 -> 2191-2201 us (so not there).
  static constexpr bool kSumGemv = true;
  template <bool kSeed = true>
  static inline __m256i sum_gemv(const BlockW& w, const uint8_t* a) {
    __m256i p0 = _mm256_maddubs_epi16(w.u[0], bcast4(a));
    __m256i p1 = _mm256_maddubs_epi16(w.u[4], bcast4(a + 16));
    for (int m = 1; m < 4; ++m) {
      p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(w.u[m], bcast4(a + 4 * m)));
      p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(w.u[m + 4], bcast4(a + 16 + 4 * m)));
    }
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i s = _mm256_add_epi32(_mm256_madd_epi16(p0, ones), _mm256_madd_epi16(p1, ones));
    return kSeed ? _mm256_add_epi32(s, bcast4(a + 36)) : s;
  }
};

// q5_1x8: 192 bytes a block: the rows' d at 0 and m at 16 (f16), then q5_0x8's plane (at 32) and
// vectors (at 64).
struct Q5_1x8 {
  static constexpr size_t kBlockBytes = 8 * sizeof(block_q5_1);
  static constexpr bool kMin = true, kHi16 = false;
  static constexpr bool kSumGemv = true;
  static inline BlockW load(const uint8_t* cw) { return Q5_0x8::load_at(cw, cw + 32, cw + 64); }
  static inline __m256 mins(const uint8_t* cw) { return load_scales(cw + 16); }
  static inline __m256i sum(const BlockW& w, const uint8_t* a) { return Q5_0x8::sum<false>(w, a); }
  static inline __m256i sum_gemv(const BlockW& w, const uint8_t* a) { return Q5_0x8::sum_gemv<false>(w, a); }
};

inline __m256 scale_block(__m256 acc, __m256 d, __m256i s, const uint8_t* a) {
  float dy;
  std::memcpy(&dy, a + 32, 4);
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(d, _mm256_set1_ps(dy)), acc);
}

// Q4_0 / Q4_1 / Q5_0 / Q5_1: a block's weights unpacked once, then F::sum per token (and the
// kMin formats' m·s).
template <class F>
struct Unpacked {
  static constexpr size_t kBlockBytes = F::kBlockBytes;
  // The GEMV's walk: gemm_tile_dispatch.h's rule (four streams for these), kGemvPrefetchBytes ahead.
  static constexpr int kGemvStreams = gemv_streams_for(kBlockBytes);
  template <int C>
  static inline void block(__m256* acc, const uint8_t* cw, const uint8_t* a, size_t as) {
    // The GEMV (one token) of a format with the in-place high nibbles (load_nibbles_hi16) takes
    // that form: the same integer sums, so the same bits as the tile's, which keeps the shifted
    // nibbles because its extra shift per token would outweigh the four it saves per block.
    constexpr bool kHi16 = C == 1 && F::kHi16;
    const BlockW w = load<kHi16>(cw);
    __m256 mw;
    if constexpr (F::kMin) mw = F::mins(cw);
    for (int c = 0; c < C; ++c) {
      const uint8_t* ac = a + c * as;
      acc[c] = scale_block(acc[c], w.d, sum<kHi16, C == 1>(w, ac), ac);
      if constexpr (F::kMin) {
        float sy;
        std::memcpy(&sy, ac + 36, 4);
        acc[c] = _mm256_fmadd_ps(mw, _mm256_set1_ps(sy), acc[c]);
      }
    }
  }

 private:
  template <bool kHi16>
  static inline BlockW load(const uint8_t* cw) {
    if constexpr (kHi16) return F::load_hi16(cw);
    else return F::load(cw);
  }
  template <bool kHi16, bool kGemv>
  static inline __m256i sum(const BlockW& w, const uint8_t* a) {
    if constexpr (kHi16) return F::sum_hi16(w, a);
    else if constexpr (kGemv && F::kSumGemv) return F::sum_gemv(w, a);
    else return F::sum(w, a);
  }
};

// q8_0x8: 272 bytes a block; vector m (at 16 + 32·m) holds quants 4m..4m+3 of each row. With
// AVX-VNNI they are stored + 128 (the repacking flips their sign bits, PackedFormat::quant_xor)
// and run through vpdpbusd from the −128·Σy seed, as the other formats. Plain AVX2's vpmaddubsw
// would saturate on those sums (2 · 255 · 127), so there they stay signed and each piece runs as
// |w| · (y with w's sign): a pair sum (≤ 2 · 127 · 127) fits int16 but two would not, so every
// piece is widened by vpmaddwd. Vector by vector (m outer), so that two weight vectors and the
// tokens' sums fit the 16 ymm registers.
struct Q8_0x8 {
  static constexpr size_t kBlockBytes = 8 * sizeof(block_q8_0);
  // The GEMV's walk: one stream kGemvPrefetchQ8_0Bytes ahead (that constant says why).
  static constexpr int kGemvStreams = 1;
  template <int C>
  static inline void block(__m256* acc, const uint8_t* cw, const uint8_t* a, size_t as) {
    const __m256i* q = reinterpret_cast<const __m256i*>(cw + 16);
    __m256i s[C];
#if defined(__AVXVNNI__)
    for (int c = 0; c < C; ++c) s[c] = bcast4(a + c * as + 36);
    for (int m = 0; m < 8; ++m) {
      const __m256i u = _mm256_loadu_si256(q + m);
      for (int c = 0; c < C; ++c) s[c] = _mm256_dpbusd_avx_epi32(s[c], u, bcast4(a + c * as + 4 * m));
    }
#else
    const __m256i ones = _mm256_set1_epi16(1);
    for (int c = 0; c < C; ++c) s[c] = _mm256_setzero_si256();
    for (int m = 0; m < 8; ++m) {
      const __m256i w = _mm256_loadu_si256(q + m), aw = _mm256_sign_epi8(w, w);
      for (int c = 0; c < C; ++c)
        s[c] = _mm256_add_epi32(s[c], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(bcast4(a + c * as + 4 * m), w)), ones));
    }
#endif
    const __m256 d = load_scales(cw);
    for (int c = 0; c < C; ++c) acc[c] = scale_block(acc[c], d, s[c], a + c * as);
  }
};

// The drivers' kernel (tiles/gemm_tile_dispatch.h): a chunk is one block. The GEMV is the
// tile's one-token case.
template <class F>
struct Kernel {
  static constexpr int64_t kChunkCols = QK8_0;
  static constexpr size_t kChunkBytes = F::kBlockBytes, kActChunkBytes = kActBytes;
  static constexpr int kGroupRows = 8;
  static constexpr int kGemvStreams = F::kGemvStreams;
  // Without software prefetch (the Zen 4, KernelChoice::gemv_prefetch) the walk reads one stream
  // (gemm_tile_dispatch.h), not the four of gemv_streams_for (every 8-row 32-element format) it
  // read before, measured on a 2-vCPU Zen 3. 2-vCPU Zen 4 at
  // FULCRUM_ISA=avx2, decode after 512 tokens in one process, the walk switched every other step
  // (packed_x16_avx512.cc has the AVX-512 side), median step time one stream / four: 0.5B Q4_0
  // 1 thread 0.82 / 0.84 / 0.94, 2 threads 1.02 / 0.93 / 0.97; 0.5B Q8_0 1T 0.93 / 0.74 / 0.98, 2T
  // 0.91 / 0.96 / 1.01; 1.3B Q4_0 1T 0.86 / 0.96, 2T 0.89 / 0.96; 0.5B Q4_K (its Q5_0) 0.96 / 0.94.
  using Acc = __m256;
  static Acc zero() { return _mm256_setzero_ps(); }
  static void chunk(Acc& acc, const uint8_t* cw, const uint8_t* a) { chunk_tile<1>(&acc, cw, a, 0); }
  static void store(float* out, Acc acc) { _mm256_storeu_ps(out, acc); }
  // The walk's prefetch: four blocks ahead in this group.
  static constexpr int kTileAhead = 4;
  // One block of the 8 rows × C tokens (token c's activations at a + c·as): the block's weights
  // serve the C tokens from registers.
  template <int C>
  [[gnu::always_inline]] static inline void chunk_tile(Acc* acc, const uint8_t* cw, const uint8_t* a, size_t as) { F::template block<C>(acc, cw, a, as); }
};

// One token's Q8_0 row -> its "q8_0 sums" row, seeds −o·Σy.
template <int O>
void arrange_sums(const void* q8, void* dst, int64_t n) {
  const block_q8_0* y = static_cast<const block_q8_0*>(q8);
  uint8_t* o = static_cast<uint8_t*>(dst);
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < n / QK8_0; ++b, o += kActBytes) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), q);
    // Σy exactly: 1·y in int16 pairs, then int32 (|Σy| ≤ 32·127).
    const int32_t sum = simd::hsum_i32(_mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q), ones16));
    const float dy = simd::f16(y[b].d);
    const int32_t seed = -O * sum;
    std::memcpy(o + 32, &dy, 4);
    std::memcpy(o + 36, &seed, 4);
  }
}

}  // namespace

void QUANT_FN(arrange_q8_0_sums8)(const void* q8, void* dst, int64_t n) { arrange_sums<8>(q8, dst, n); }
void QUANT_FN(arrange_q8_0_sums16)(const void* q8, void* dst, int64_t n) { arrange_sums<16>(q8, dst, n); }
void QUANT_FN(arrange_q8_0_sums128)(const void* q8, void* dst, int64_t n) { arrange_sums<128>(q8, dst, n); }

// One token's Q8_1 row -> its "q8_1 sums" row: per block the 32 quants, dy and s = dy·Σy as
// Q8_1 stores them (f16, in f32), the terms vec_dot_q5_1 multiplies.
void QUANT_FN(arrange_q8_1_sums)(const void* q8, void* dst, int64_t n) {
  const block_q8_1* y = static_cast<const block_q8_1*>(q8);
  uint8_t* o = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / QK8_1; ++b, o += kActBytes) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs)));
    const float dy = simd::f16(y[b].d), sy = simd::f16(y[b].s);
    std::memcpy(o + 32, &dy, 4);
    std::memcpy(o + 36, &sy, 4);
  }
}

// Each layout's entry points (tiles/gemm_tile_dispatch.h).
FULCRUM_PACKED_ENTRY_POINTS(q4_0x8, QUANT_AVX2_LEVEL, Kernel<Unpacked<Q4_0x8>>, kGemvPrefetchBytes, kPackedTileColsX8Avx2)
FULCRUM_PACKED_ENTRY_POINTS(q5_0x8, QUANT_AVX2_LEVEL, Kernel<Unpacked<Q5_0x8>>, kGemvPrefetchBytes, kPackedTileColsX8Avx2)
FULCRUM_PACKED_ENTRY_POINTS(q4_1x8, QUANT_AVX2_LEVEL, Kernel<Unpacked<Q4_1x8>>, kGemvPrefetchBytes, kPackedTileColsX8Avx2)
FULCRUM_PACKED_ENTRY_POINTS(q5_1x8, QUANT_AVX2_LEVEL, Kernel<Unpacked<Q5_1x8>>, kGemvPrefetchBytes, kPackedTileColsX8Avx2)
FULCRUM_PACKED_ENTRY_POINTS(q8_0x8, QUANT_AVX2_LEVEL, Kernel<Q8_0x8>, kGemvPrefetchQ8_0Bytes, kPackedTileColsX8Avx2)
FULCRUM_PACKED_STREAMS4_ENTRY_POINT(q4_0x8, QUANT_AVX2_LEVEL, Kernel<Unpacked<Q4_0x8>>)
FULCRUM_PACKED_STREAMS4_ENTRY_POINT(q5_0x8, QUANT_AVX2_LEVEL, Kernel<Unpacked<Q5_0x8>>)
FULCRUM_PACKED_STREAMS4_ENTRY_POINT(q4_1x8, QUANT_AVX2_LEVEL, Kernel<Unpacked<Q4_1x8>>)
FULCRUM_PACKED_STREAMS4_ENTRY_POINT(q5_1x8, QUANT_AVX2_LEVEL, Kernel<Unpacked<Q5_1x8>>)
FULCRUM_PACKED_STREAMS4_ENTRY_POINT(q8_0x8, QUANT_AVX2_LEVEL, Kernel<Q8_0x8>)

}  // namespace quant
}  // namespace fulcrum
