// Q4_K in groups of 4 rows (q4_kx4, repack.h) × Q8_K activations as they are, AVX2 (no VNNI).
// The AVX-512 kernel's scheme (packed_q4_k_avx512.cc) on half the width: a ymm holds a pair of
// rows (128-bit lane = row), so each step runs once per pair. Per pair and super-block the
// scales and mins are unpacked for both rows at once (two permutes, a variable shift, masks);
// per token and chunk of 64 elements: four broadcasts, four vpmaddubsw, two int16 adds, two
// vpmaddwd by the sub-blocks' scales and the int32 adds (exact: vec_dot_q4_k's integer sums).
// The lanes hold the same integer sums as the AVX-512 kernel's and the float steps are the same,
// so both ISAs give the same bits. The GEMV is the tile at one token.
#include "quant/blocks.h"
#include "quant/repack.h"
#define QUANT_ISA avx2
#include "quant/simd_avx2.h"

namespace fulcrum {
namespace quant {
namespace {

constexpr size_t kSbBytes = 4 * sizeof(block_q4_K);  // 576

// Each 32-byte half of the header (repack.h) holds a pair of rows: dwords 0-2 and 3-5 their
// scale words, 6-7 the four d (first half) or dmin (second half).
alignas(32) const int32_t kIdxA[8] = {0, 2, 1, 2, 3, 5, 4, 5};
alignas(32) const int32_t kIdxB[8] = {0, 0, 1, 1, 3, 3, 4, 4};
alignas(32) const int32_t kShiftA[8] = {0, 0, 0, 4, 0, 0, 0, 4};
alignas(32) const uint32_t kMaskA[8] = {0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f};
alignas(32) const uint32_t kMaskB[8] = {0, 0x30303030, 0, 0x30303030, 0, 0x30303030, 0, 0x30303030};

// Built at compile time (constexpr): no dynamic initializer in an ISA-specific file.
struct Controls {
  alignas(32) uint8_t scale[8][32] = {};
  alignas(32) uint8_t mins[32] = {};
  constexpr Controls() {
    for (int s = 0; s < 8; ++s)
      for (int b = 0; b < 32; ++b) scale[s][b] = b % 2 == 0 ? static_cast<uint8_t>(s) : 0x80;
    for (int b = 0; b < 32; ++b) mins[b] = b % 2 == 0 ? static_cast<uint8_t>(8 + (b % 16) / 2) : 0x80;
  }
};
constexpr Controls kCtl{};

inline __m256i bcast16(const int8_t* p) { return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

template <int C>
void q4_kx4(int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as) {
  const int64_t nsb = n / QK_K;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i idx_a = _mm256_load_si256(reinterpret_cast<const __m256i*>(kIdxA)), idx_b = _mm256_load_si256(reinterpret_cast<const __m256i*>(kIdxB));
  const __m256i shift_a = _mm256_load_si256(reinterpret_cast<const __m256i*>(kShiftA));
  const __m256i mask_a = _mm256_load_si256(reinterpret_cast<const __m256i*>(kMaskA)), mask_b = _mm256_load_si256(reinterpret_cast<const __m256i*>(kMaskB));
  __m256 acc[C][2];
  for (int c = 0; c < C; ++c) acc[c][0] = acc[c][1] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nsb; ++i) {
    const uint8_t* g = w + i * kSbBytes;
    const __m256i h0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g)), h1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 32));
    // [d0..d3, dmin0..dmin3]
    const __m256 dd = _mm256_cvtph_ps(_mm_unpackhi_epi64(_mm256_extracti128_si256(h0, 1), _mm256_extracti128_si256(h1, 1)));
    for (int p = 0; p < 2; ++p) {
      const __m256i hp = p == 0 ? h0 : h1;
      const __m256i a = _mm256_permutevar8x32_epi32(hp, idx_a), b = _mm256_permutevar8x32_epi32(hp, idx_b);
      const __m256i u = _mm256_or_si256(_mm256_and_si256(_mm256_srlv_epi32(a, shift_a), mask_a), _mm256_and_si256(_mm256_srli_epi32(b, 2), mask_b));
      __m256i sum[C];
      for (int c = 0; c < C; ++c) sum[c] = _mm256_setzero_si256();
      for (int ch = 0; ch < 4; ++ch) {
        const __m256i s_lo = _mm256_shuffle_epi8(u, _mm256_load_si256(reinterpret_cast<const __m256i*>(kCtl.scale[2 * ch])));
        const __m256i s_hi = _mm256_shuffle_epi8(u, _mm256_load_si256(reinterpret_cast<const __m256i*>(kCtl.scale[2 * ch + 1])));
        const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 64 + 128 * ch + 32 * p));
        const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 128 + 128 * ch + 32 * p));
        const __m256i lo0 = _mm256_and_si256(v0, m4), hi0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), m4);
        const __m256i lo1 = _mm256_and_si256(v1, m4), hi1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), m4);
        for (int c = 0; c < C; ++c) {
          const int8_t* y = reinterpret_cast<const block_q8_K*>(act + c * as)[i].qs + 64 * ch;
          const __m256i plo = _mm256_add_epi16(_mm256_maddubs_epi16(lo0, bcast16(y)), _mm256_maddubs_epi16(lo1, bcast16(y + 16)));
          const __m256i phi = _mm256_add_epi16(_mm256_maddubs_epi16(hi0, bcast16(y + 32)), _mm256_maddubs_epi16(hi1, bcast16(y + 48)));
          sum[c] = _mm256_add_epi32(sum[c], _mm256_add_epi32(_mm256_madd_epi16(plo, s_lo), _mm256_madd_epi16(phi, s_hi)));
        }
      }
      const __m256i mins16 = _mm256_shuffle_epi8(u, _mm256_load_si256(reinterpret_cast<const __m256i*>(kCtl.mins)));
      const __m256 dv = _mm256_permutevar8x32_ps(dd, _mm256_setr_epi32(2 * p, 2 * p, 2 * p, 2 * p, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1));
      const __m256 dmv = _mm256_permutevar8x32_ps(dd, _mm256_setr_epi32(4 + 2 * p, 4 + 2 * p, 4 + 2 * p, 4 + 2 * p, 5 + 2 * p, 5 + 2 * p, 5 + 2 * p, 5 + 2 * p));
      for (int c = 0; c < C; ++c) {
        const block_q8_K* yb = reinterpret_cast<const block_q8_K*>(act + c * as) + i;
        const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(yb->bsums)),
                                          _mm_loadu_si128(reinterpret_cast<const __m128i*>(yb->bsums + 8)));
        const __m256i mins = _mm256_madd_epi16(mins16, _mm256_broadcastsi128_si256(bs));
        const __m256 dy = _mm256_set1_ps(yb->d);
        acc[c][p] = _mm256_fmadd_ps(_mm256_mul_ps(dv, dy), _mm256_cvtepi32_ps(sum[c]), acc[c][p]);
        acc[c][p] = _mm256_fnmadd_ps(_mm256_mul_ps(dmv, dy), _mm256_cvtepi32_ps(mins), acc[c][p]);
      }
    }
  }
  // Row (2p + lane)'s four floats: (l0 + l2) + (l1 + l3), as the AVX-512 kernel.
  for (int c = 0; c < C; ++c)
    for (int p = 0; p < 2; ++p) {
      __m256 t = _mm256_add_ps(acc[c][p], _mm256_permute_ps(acc[c][p], 0x4E));
      t = _mm256_add_ps(t, _mm256_permute_ps(t, 0xB1));
      out[c * os + 2 * p] = _mm256_cvtss_f32(t);
      out[c * os + 2 * p + 1] = _mm_cvtss_f32(_mm256_extractf128_ps(t, 1));
    }
}

}  // namespace

void gemv_q4_kx4_avx2(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) {
  const size_t group_bytes = static_cast<size_t>(n / QK_K) * kSbBytes;
  for (int g = 0; g < groups; ++g) q4_kx4<1>(n, out + 4 * g, 0, w + g * group_bytes, act, 0);
}

void tile_q4_kx4_avx2(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols) {
  switch (cols) {
    case 2: q4_kx4<2>(n, out, out_stride, w, act, act_stride); break;
    case 1: q4_kx4<1>(n, out, out_stride, w, act, act_stride); break;
    default: break;
  }
}

}  // namespace quant
}  // namespace fulcrum
