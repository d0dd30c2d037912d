// The packed 32-element formats q5_0x4 and q8_0x4 (repack.h) × Q8_0 activations arranged per
// matmul (q8_0 split), AVX-512 VNNI. (q4_0x4 ran here too; Q4_0 is in 16-row groups now,
// packed_q4_0x16_avx512.cc says why; the measurements below that name Q4_0 were of this kernel.)
// Per row and chunk of four blocks: one 64-byte load, two ANDs
// and a shift for the nibbles (Q5_0: two masked byte adds put in the fifth bits, whose masks the
// repacking laid out as two 64-bit words per row), two vpdpbusd seeded with the activations'
// −8·Σy lanes (Q5_0: doubled, for −16·Σy), one permute of the chunk's 16 converted scales, a
// multiply by the activation scales, a conversion and an fma — about half the instructions of
// the GGUF-layout kernels, which gather each row's blocks with four inserts and its scales with
// four 2-byte loads. Q8_0: see Q8_0x4 below. The GEMV and the tile share one step per (row,
// token), so their outputs are identical bit for bit.
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
constexpr size_t kActChunkBytes = 256;
constexpr size_t kGemvPrefetchBytes = 512;

// One (row, token) step of the nibble formats: the part the GEMV and the tile must share.
struct NibbleRow {
  __m512i lo, hi;
};
inline __m512 nibble_step(__m512 acc, const NibbleRow& w, __m512i seed, __m512 wd_row, const uint8_t* a) {
  const __m512i ylo = _mm512_loadu_si512(a), yhi = _mm512_loadu_si512(a + 64);
  __m512i s = _mm512_dpbusd_epi32(seed, w.lo, ylo);
  s = _mm512_dpbusd_epi32(s, w.hi, yhi);
  const __m512 sc = _mm512_mul_ps(wd_row, _mm512_loadu_ps(reinterpret_cast<const float*>(a + 128)));
  return _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(s), acc);
}

// Q5_0: x = d·(q − 16), q = nibble + 16·(bit of qh). Chunk: 32 B scales, 16 B of fifth-bit masks
// per row (elements 0..15 of the four blocks, then 16..31), each row's 64 B of nibbles.
struct Q5_0x4 {
  static constexpr size_t kChunkBytes = 4 * 4 * sizeof(block_q5_0);  // 352
  static constexpr size_t kQh = 32, kQs = 96;
  using Row = NibbleRow;
  static inline Row row(const uint8_t* cw, int r) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), sixteen = _mm512_set1_epi8(16);
    const __m512i q = _mm512_loadu_si512(cw + kQs + 64 * r);
    uint64_t mlo, mhi;
    std::memcpy(&mlo, cw + kQh + 16 * r, 8);
    std::memcpy(&mhi, cw + kQh + 16 * r + 8, 8);
    const __m512i l = _mm512_and_si512(q, m4), h = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
    return {_mm512_mask_add_epi8(l, _cvtu64_mask64(mlo), l, sixteen), _mm512_mask_add_epi8(h, _cvtu64_mask64(mhi), h, sixteen)};
  }
  static inline __m512 step(__m512 acc, const Row& w, __m512 wd_row, const uint8_t* a) {
    const __m512i n8 = _mm512_loadu_si512(a + 192);
    return nibble_step(acc, w, _mm512_add_epi32(n8, n8), wd_row, a);
  }
};

// Q8_0: signed quants, laid out as the activations are (each block's first 16, then each block's
// last 16). vpdpbusd multiplies unsigned by signed: |w| (once per row) times y negated where w
// is negative (one masked subtract per row and token; the masks once per row).
struct Q8_0x4 {
  static constexpr size_t kChunkBytes = 4 * 4 * sizeof(block_q8_0);  // 544
  static constexpr size_t kQs = 32;
  struct Row {
    __m512i alo, ahi;
    __mmask64 nlo, nhi;
  };
  static inline Row row(const uint8_t* cw, int r) {
    const __m512i lo = _mm512_loadu_si512(cw + kQs + 128 * r), hi = _mm512_loadu_si512(cw + kQs + 128 * r + 64);
    return {_mm512_abs_epi8(lo), _mm512_abs_epi8(hi), _mm512_movepi8_mask(lo), _mm512_movepi8_mask(hi)};
  }
  static inline __m512 step(__m512 acc, const Row& w, __m512 wd_row, const uint8_t* a) {
    const __m512i zero = _mm512_setzero_si512();
    const __m512i ylo = _mm512_loadu_si512(a), yhi = _mm512_loadu_si512(a + 64);
    __m512i s = _mm512_dpbusd_epi32(zero, w.alo, _mm512_mask_sub_epi8(ylo, w.nlo, zero, ylo));
    s = _mm512_dpbusd_epi32(s, w.ahi, _mm512_mask_sub_epi8(yhi, w.nhi, zero, yhi));
    const __m512 sc = _mm512_mul_ps(wd_row, _mm512_loadu_ps(reinterpret_cast<const float*>(a + 128)));
    return _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(s), acc);
  }
};

// Lanes 4k..4k+3 <- element 4·r + k of the chunk's scales: row r's block scales spread over
// the lanes its block sums occupy.
inline __m512i spread_row(int r) {
  return _mm512_add_epi32(_mm512_set1_epi32(4 * r), _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
}

// Bytes [off, off + 16) of four consecutive Q8_0 blocks, in one zmm.
inline __m512i gather_16x4(const uint8_t* q) {
  constexpr size_t s = sizeof(block_q8_0);
  __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
  v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + s)), 1);
  v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 2 * s)), 2);
  return _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 3 * s)), 3);
}

template <class F, int C>
void tile_cols(int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as) {
  const int64_t chunks = n / kChunkCols;
  const size_t group_bytes = static_cast<size_t>(chunks) * F::kChunkBytes;
  __m512 acc[4][C];
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  for (int64_t j = 0; j < chunks; ++j) {
    const uint8_t* cw = w + j * F::kChunkBytes;
    // The next group's chunk (measured on Q4_0: better at 2 threads than none or 512 B ahead).
    for (size_t o = 0; o < F::kChunkBytes + 32; o += 64) _mm_prefetch(reinterpret_cast<const char*>(cw + group_bytes + o), _MM_HINT_T0);
    const __m512 wd = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(cw)));
    for (int r = 0; r < 4; ++r) {
      const typename F::Row wr = F::row(cw, r);
      const __m512 wd_row = _mm512_permutexvar_ps(spread_row(r), wd);
      for (int c = 0; c < C; ++c) acc[r][c] = F::step(acc[r][c], wr, wd_row, act + c * as + j * kActChunkBytes);
    }
  }
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < C; ++c) out[c * os + r] = _mm512_reduce_add_ps(acc[r][c]);
}

template <class F>
void tile_any(int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as, int cols) {
  switch (cols) {
    case 4: tile_cols<F, 4>(n, out, os, w, act, as); break;
    case 3: tile_cols<F, 3>(n, out, os, w, act, as); break;
    case 2: tile_cols<F, 2>(n, out, os, w, act, as); break;
    case 1: tile_cols<F, 1>(n, out, os, w, act, as); break;
    default: break;
  }
}

// Decode: the tile's step per group at one token, as the multi-stream driver's kernel
// (packed_gemv_groups): several segments of the walk read side by side (Q8_0: 2, Q5_0: 3), the
// token's arranged row staying in L1. Same sums in the same order per group as the tile, so the
// same bits. Against one group at a time over one stream, on an AMD EPYC (Zen 4), 0.5B Q8_0, 48
// tokens after 256, alternating processes: 2 threads 76-82 -> 83-88 tok/s; 1 thread the same
// (40-50 either way). Software prefetch only a little ahead (kGemvPrefetchBytes), measured with
// one stream on an AMD EPYC (0.5B Q4_0, one thread, bench:cpu): 512 B ahead 126-131 tok/s, none
// 126-129, one group ahead (2-11 KiB) 72, 2 KiB 66, 8 KiB 111: prefetching far ahead hurts here.
template <class F>
struct RowGemv {
  static constexpr int64_t kChunkCols = quant::kChunkCols;
  static constexpr size_t kChunkBytes = F::kChunkBytes, kActChunkBytes = quant::kActChunkBytes;
  static constexpr int kGroupRows = 4;
  struct Acc {
    __m512 r[4];
  };
  static Acc zero() {
    Acc a;
    for (int r = 0; r < 4; ++r) a.r[r] = _mm512_setzero_ps();
    return a;
  }
  static void chunk(Acc& acc, const uint8_t* cw, const uint8_t* a) {
    const __m512 wd = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(cw)));
    for (int r = 0; r < 4; ++r) acc.r[r] = F::step(acc.r[r], F::row(cw, r), _mm512_permutexvar_ps(spread_row(r), wd), a);
  }
  static void store(float* out, const Acc& acc) {
    for (int r = 0; r < 4; ++r) out[r] = _mm512_reduce_add_ps(acc.r[r]);
  }
};

template <class F>
void gemv_rows(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) {
  packed_gemv_groups<RowGemv<F>>(n, out, w, groups, act, kGemvPrefetchBytes);
}

}  // namespace

void arrange_q8_0_split_avx512(const void* q8, void* dst, int64_t n) {
  const uint8_t* y = static_cast<const uint8_t*>(q8);
  uint8_t* o = static_cast<uint8_t*>(dst);
  const __m512i eight = _mm512_set1_epi8(8);
  const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  for (int64_t j = 0; j < n / kChunkCols; ++j, y += 4 * sizeof(block_q8_0), o += kActChunkBytes) {
    const __m512i ylo = gather_16x4(y + 2), yhi = gather_16x4(y + 18);
    const __m512i sum8 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, ylo), eight, yhi);
    uint16_t d[4];
    for (int k = 0; k < 4; ++k) std::memcpy(&d[k], y + k * sizeof(block_q8_0), 2);
    uint64_t h;
    std::memcpy(&h, d, 8);
    const __m512 dy = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(h)))));
    _mm512_storeu_si512(o, ylo);
    _mm512_storeu_si512(o + 64, yhi);
    _mm512_storeu_ps(reinterpret_cast<float*>(o + 128), dy);
    _mm512_storeu_si512(o + 192, _mm512_sub_epi32(_mm512_setzero_si512(), sum8));
  }
}

void gemv_q5_0x4_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) { gemv_rows<Q5_0x4>(n, out, w, groups, act); }
void tile_q5_0x4_avx512(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols) {
  tile_any<Q5_0x4>(n, out, out_stride, w, act, act_stride, cols);
}
void gemv_q8_0x4_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) { gemv_rows<Q8_0x4>(n, out, w, groups, act); }
void tile_q8_0x4_avx512(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols) {
  tile_any<Q8_0x4>(n, out, out_stride, w, act, act_stride, cols);
}

}  // namespace quant
}  // namespace fulcrum
