// Q4_K in groups of 4 rows (q4_kx4, repack.h) × Q8_K activations as they are, AVX-512 VNNI.
// Rows are interleaved by 16-byte pieces, so a zmm's 128-bit lane r holds row r: one 64-byte
// load gives four rows' 32 nibbles each (two sub-blocks × 16 elements), the token's matching
// 16 activations are one 16-byte broadcast shared by the four rows, and every per-row factor
// (scale, min, d, dmin) is a lane pattern built once per super-block for the four rows:
//   - the four rows' 6-bit scales and mins (48 bytes) and d/dmin (16 bytes) are one 64-byte
//     load; two permutes, a variable shift and three masks unpack all 64 values at once (lane r:
//     8 scale bytes, 8 min bytes), one vpshufb per sub-block spreads its scale as int16 pairs;
//   - per token and chunk of 64 elements: four broadcasts, four vpmaddubsw (nibble × int8, pairs
//     in int16: at most 2·15·128 each, 7680 for two, no saturation), two int16 adds, two
//     vpdpwssd by the sub-blocks' scales into int32 super-block sums (exact);
//   - per token and super-block: the mins term as one vpmaddwd of the rows' mins by the token's
//     sub-block sums, two conversions and two fmas by lane vectors of d·dy and dmin·dy.
// About a third of the instructions of the GGUF-layout tile, which unpacks each row's scales in
// scalar code and gathers its nibbles per row. The GEMV is the tile at one token: every (row,
// token) output is the same bits alone or in a batch. The integer sums are vec_dot_q4_k's; the
// float steps (per super-block and lane, then the four lanes of a row) are ordered differently
// from it, within the rounding of its own float sums (repack.test.ts bounds the difference).
#include "quant/blocks.h"
#include "quant/repack.h"
#define QUANT_ISA avx512
#include "quant/simd_avx512.h"

namespace fulcrum {
namespace quant {
namespace {

constexpr size_t kSbBytes = 4 * sizeof(block_q4_K);  // 576: one super-block of four rows

// The 64-byte header (repack.h): dwords 0-2 row 0's scale words W0 W1 W2, 3-5 row 1's, 6-7 the
// four d (f16), 8-10 row 2's, 11-13 row 3's, 14-15 the four dmin. Lane r of the permuted
// vectors: A = [W0, W2, W1, W2], B = [W0, W0, W1, W1] of row r.
alignas(64) const int32_t kIdxA[16] = {0, 2, 1, 2, 3, 5, 4, 5, 8, 10, 9, 10, 11, 13, 12, 13};
alignas(64) const int32_t kIdxB[16] = {0, 0, 1, 1, 3, 3, 4, 4, 8, 8, 9, 9, 11, 11, 12, 12};
// Lane r after unpacking: [scales 0-3, scales 4-7, mins 0-3, mins 4-7] (as unpack_k4_words):
// scales 0-3 = W0 & 0x3f; scales 4-7 = (W2 & 0x0f) | ((W0 >> 2) & 0x30); mins 0-3 = W1 & 0x3f;
// mins 4-7 = ((W2 >> 4) & 0x0f) | ((W1 >> 2) & 0x30).
alignas(64) const int32_t kShiftA[16] = {0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4};
alignas(64) const uint32_t kMaskA[16] = {0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f,
                                         0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f};
alignas(64) const uint32_t kMaskB[16] = {0, 0x30303030, 0, 0x30303030, 0, 0x30303030, 0, 0x30303030,
                                         0, 0x30303030, 0, 0x30303030, 0, 0x30303030, 0, 0x30303030};
alignas(64) const int32_t kIdxD[16] = {6, 7, 14, 15, 6, 7, 14, 15, 6, 7, 14, 15, 6, 7, 14, 15};

// vpshufb controls (per 128-bit lane): sub-block s's scale byte into every int16 (zero high
// byte); the eight min bytes as eight int16.
// Built at compile time (constexpr): this file's code must not run on a CPU without AVX-512,
// and a dynamic initializer would run at load on every CPU.
struct Controls {
  alignas(64) uint8_t scale[8][64] = {};
  alignas(64) uint8_t mins[64] = {};
  constexpr Controls() {
    for (int s = 0; s < 8; ++s)
      for (int b = 0; b < 64; ++b) scale[s][b] = b % 2 == 0 ? static_cast<uint8_t>(s) : 0x80;
    for (int b = 0; b < 64; ++b) mins[b] = b % 2 == 0 ? static_cast<uint8_t>(8 + (b % 16) / 2) : 0x80;
  }
};
constexpr Controls kCtl{};

inline __m512i bcast16(const int8_t* p) { return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

template <int C>
void q4_kx4(int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as) {
  const int64_t nsb = n / QK_K;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i idx_a = _mm512_load_si512(kIdxA), idx_b = _mm512_load_si512(kIdxB), idx_d = _mm512_load_si512(kIdxD);
  const __m512i shift_a = _mm512_load_si512(kShiftA), mask_a = _mm512_load_si512(kMaskA), mask_b = _mm512_load_si512(kMaskB);
  const __m512i spread_d = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  const __m512i spread_dmin = _mm512_add_epi32(spread_d, _mm512_set1_epi32(4));
  __m512 acc[C];
  for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nsb; ++i) {
    const uint8_t* g = w + i * kSbBytes;
    const __m512i hdr = _mm512_loadu_si512(g);
    const __m512i a = _mm512_permutexvar_epi32(idx_a, hdr), b = _mm512_permutexvar_epi32(idx_b, hdr);
    const __m512i u = _mm512_or_si512(_mm512_and_si512(_mm512_srlv_epi32(a, shift_a), mask_a), _mm512_and_si512(_mm512_srli_epi32(b, 2), mask_b));
    const __m512 dd = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_permutexvar_epi32(idx_d, hdr))));
    const __m512 dv = _mm512_permutexvar_ps(spread_d, dd), dmv = _mm512_permutexvar_ps(spread_dmin, dd);
    __m512i sum_lo[C], sum_hi[C];
    for (int c = 0; c < C; ++c) sum_lo[c] = sum_hi[c] = _mm512_setzero_si512();
    for (int ch = 0; ch < 4; ++ch) {
      const __m512i s_lo = _mm512_shuffle_epi8(u, _mm512_load_si512(kCtl.scale[2 * ch]));
      const __m512i s_hi = _mm512_shuffle_epi8(u, _mm512_load_si512(kCtl.scale[2 * ch + 1]));
      const __m512i v0 = _mm512_loadu_si512(g + 64 + 128 * ch), v1 = _mm512_loadu_si512(g + 128 + 128 * ch);
      const __m512i lo0 = _mm512_and_si512(v0, m4), hi0 = _mm512_and_si512(_mm512_srli_epi16(v0, 4), m4);
      const __m512i lo1 = _mm512_and_si512(v1, m4), hi1 = _mm512_and_si512(_mm512_srli_epi16(v1, 4), m4);
      for (int c = 0; c < C; ++c) {
        const int8_t* y = reinterpret_cast<const block_q8_K*>(act + c * as)[i].qs + 64 * ch;
        const __m512i plo = _mm512_add_epi16(_mm512_maddubs_epi16(lo0, bcast16(y)), _mm512_maddubs_epi16(lo1, bcast16(y + 16)));
        const __m512i phi = _mm512_add_epi16(_mm512_maddubs_epi16(hi0, bcast16(y + 32)), _mm512_maddubs_epi16(hi1, bcast16(y + 48)));
        sum_lo[c] = _mm512_dpwssd_epi32(sum_lo[c], plo, s_lo);
        sum_hi[c] = _mm512_dpwssd_epi32(sum_hi[c], phi, s_hi);
      }
    }
    const __m512i mins16 = _mm512_shuffle_epi8(u, _mm512_load_si512(kCtl.mins));
    for (int c = 0; c < C; ++c) {
      const block_q8_K* yb = reinterpret_cast<const block_q8_K*>(act + c * as) + i;
      // The token's eight sub-block sums (pairs of its 16-element sums), in every lane.
      const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(yb->bsums)),
                                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(yb->bsums + 8)));
      const __m512i mins = _mm512_madd_epi16(mins16, _mm512_broadcast_i32x4(bs));
      const __m512 dy = _mm512_set1_ps(yb->d);
      acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(dv, dy), _mm512_cvtepi32_ps(_mm512_add_epi32(sum_lo[c], sum_hi[c])), acc[c]);
      acc[c] = _mm512_fnmadd_ps(_mm512_mul_ps(dmv, dy), _mm512_cvtepi32_ps(mins), acc[c]);
    }
  }
  // Row r's four lanes: (l0 + l2) + (l1 + l3), into out[c·os + r].
  for (int c = 0; c < C; ++c) {
    __m512 t = _mm512_add_ps(acc[c], _mm512_permute_ps(acc[c], 0x4E));
    t = _mm512_add_ps(t, _mm512_permute_ps(t, 0xB1));
    _mm_storeu_ps(out + c * os, _mm512_castps512_ps128(_mm512_maskz_compress_ps(0x1111, t)));
  }
}

}  // namespace

void gemv_q4_kx4_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) {
  const size_t group_bytes = static_cast<size_t>(n / QK_K) * kSbBytes;
  for (int g = 0; g < groups; ++g) q4_kx4<1>(n, out + 4 * g, 0, w + g * group_bytes, act, 0);
}

void tile_q4_kx4_avx512(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols) {
  switch (cols) {
    case 4: q4_kx4<4>(n, out, out_stride, w, act, act_stride); break;
    case 3: q4_kx4<3>(n, out, out_stride, w, act, act_stride); break;
    case 2: q4_kx4<2>(n, out, out_stride, w, act, act_stride); break;
    case 1: q4_kx4<1>(n, out, out_stride, w, act, act_stride); break;
    default: break;
  }
}

}  // namespace quant
}  // namespace fulcrum
