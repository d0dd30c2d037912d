// q8_0x4 (repack.h) × arranged Q8_0 activations ("q8_0 split"), AVX2 (no VNNI); Q4_0 and Q5_0
// run in their AVX2 piece order (packed_pieces_avx2.cc). The GEMV and the tile share one step
// per (row, token): identical outputs. Q8_0: see Q8_0x4 below (about 5 instructions per
// (row, token, block) against 7 for the GGUF-layout tile, which also converts and broadcasts
// each block's scale product).
#include <cstring>

#include "quant/formats/blocks.h"
#include "quant/packed/repack.h"
#define QUANT_ISA avx2
#include "quant/dot/simd_avx2.h"

namespace fulcrum {
namespace quant {
namespace {

constexpr int64_t kChunkCols = 4 * QK8_0;
constexpr size_t kActChunkBytes = 256;
constexpr size_t kGemvPrefetchBytes = 512;  // see packed_avx512.cc

// Q8_0: signed quants, laid out as the activations are (each block's first 16 in the low-lanes
// half, its last 16 in the high-lanes half). maddubs multiplies unsigned by signed, so the
// product runs as |w| · (y with w's sign), |w| once per row; a pair of products stays within
// int16 (2·127·127) but two pairs would not, so each half-product is widened by vpmaddwd.
struct Q8_0x4 {
  static constexpr size_t kChunkBytes = 4 * 4 * sizeof(block_q8_0);  // 544
  static constexpr size_t kQs = 32;
  struct Row {
    __m256i lo, hi, alo, ahi;
  };
  static inline Row row(const uint8_t* cw, int r, int h) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cw + kQs + 128 * r + 32 * h));
    const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cw + kQs + 128 * r + 64 + 32 * h));
    return {lo, hi, _mm256_sign_epi8(lo, lo), _mm256_sign_epi8(hi, hi)};
  }
  static inline __m256 step(__m256 acc, const Row& w, __m256 wd_half, const uint8_t* a, int h) {
    const __m256i ylo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 32 * h));
    const __m256i yhi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 64 + 32 * h));
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i s = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(w.alo, _mm256_sign_epi8(ylo, w.lo)), ones),
                                       _mm256_madd_epi16(_mm256_maddubs_epi16(w.ahi, _mm256_sign_epi8(yhi, w.hi)), ones));
    const __m256 sc = _mm256_mul_ps(wd_half, _mm256_loadu_ps(reinterpret_cast<const float*>(a + 128 + 32 * h)));
    return _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(s), acc);
  }
};

// Row r's four block scales (f16 at chunk + 8r) spread as [k0 ×4, k1 ×4] (half 0) and [k2 ×4,
// k3 ×4] (half 1).
inline void row_scales(const uint8_t* cw, int r, __m256* h0, __m256* h1) {
  const __m256 wd = _mm256_castps128_ps256(_mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(cw + 8 * r))));
  *h0 = _mm256_permutevar8x32_ps(wd, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
  *h1 = _mm256_permutevar8x32_ps(wd, _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3));
}

template <class F, int C>
void tile_cols(int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as) {
  const int64_t chunks = n / kChunkCols;
  const size_t group_bytes = static_cast<size_t>(chunks) * F::kChunkBytes;
  __m256 acc[4][C];
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  for (int64_t j = 0; j < chunks; ++j) {
    const uint8_t* cw = w + j * F::kChunkBytes;
    for (size_t o = 0; o < F::kChunkBytes + 32; o += 64) _mm_prefetch(reinterpret_cast<const char*>(cw + group_bytes + o), _MM_HINT_T0);
    for (int r = 0; r < 4; ++r) {
      __m256 wdh[2];
      row_scales(cw, r, &wdh[0], &wdh[1]);
      for (int h = 0; h < 2; ++h) {
        const typename F::Row wr = F::row(cw, r, h);
        for (int c = 0; c < C; ++c) acc[r][c] = F::step(acc[r][c], wr, wdh[h], act + c * as + j * kActChunkBytes, h);
      }
    }
  }
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < C; ++c) out[c * os + r] = simd::hsum(acc[r][c]);
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

template <class F>
void gemv(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) {
  const int64_t chunks = n / kChunkCols;
  const size_t group_bytes = static_cast<size_t>(chunks) * F::kChunkBytes;
  for (int g = 0; g < groups; ++g, w += group_bytes, out += 4) {
    __m256 acc[4];
    for (int r = 0; r < 4; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t j = 0; j < chunks; ++j) {
      const uint8_t* cw = w + j * F::kChunkBytes;
      for (size_t o = 0; o < F::kChunkBytes + 32; o += 64) _mm_prefetch(reinterpret_cast<const char*>(cw + kGemvPrefetchBytes + o), _MM_HINT_T1);
      const uint8_t* a = act + j * kActChunkBytes;
      for (int r = 0; r < 4; ++r) {
        __m256 wdh[2];
        row_scales(cw, r, &wdh[0], &wdh[1]);
        for (int h = 0; h < 2; ++h) acc[r] = F::step(acc[r], F::row(cw, r, h), wdh[h], a, h);
      }
    }
    for (int r = 0; r < 4; ++r) out[r] = simd::hsum(acc[r]);
  }
}

}  // namespace

void arrange_q8_0_split_avx2(const void* q8, void* dst, int64_t n) {
  const uint8_t* y = static_cast<const uint8_t*>(q8);
  uint8_t* o = static_cast<uint8_t*>(dst);
  const __m256i eight = _mm256_set1_epi8(8), ones = _mm256_set1_epi16(1);
  for (int64_t j = 0; j < n / kChunkCols; ++j, y += 4 * sizeof(block_q8_0), o += kActChunkBytes) {
    for (int h = 0; h < 2; ++h) {  // blocks 2h and 2h + 1
      const uint8_t* b0 = y + 2 * h * sizeof(block_q8_0);
      const uint8_t* b1 = b0 + sizeof(block_q8_0);
      const __m256i ylo = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(b1 + 2), reinterpret_cast<const __m128i*>(b0 + 2));
      const __m256i yhi = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(b1 + 18), reinterpret_cast<const __m128i*>(b0 + 18));
      // 8·Σ of each lane's 4 quants in both halves: maddubs(8, y) pairs (≤ 2·8·128), summed in int16.
      const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(eight, ylo), _mm256_maddubs_epi16(eight, yhi));
      const __m256i neg8 = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_madd_epi16(p, ones));
      uint16_t d0, d1;
      std::memcpy(&d0, b0, 2);
      std::memcpy(&d1, b1, 2);
      const __m256 dy = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_set1_ps(simd::f16(d0))), _mm_set1_ps(simd::f16(d1)), 1);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 32 * h), ylo);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 64 + 32 * h), yhi);
      _mm256_storeu_ps(reinterpret_cast<float*>(o + 128 + 32 * h), dy);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 192 + 32 * h), neg8);
    }
  }
}

void gemv_q8_0x4_avx2(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) { gemv<Q8_0x4>(n, out, w, groups, act); }
void tile_q8_0x4_avx2(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols) {
  tile_any<Q8_0x4>(n, out, out_stride, w, act, act_stride, cols);
}

}  // namespace quant
}  // namespace fulcrum
