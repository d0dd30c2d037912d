// Q6_K in groups of 4 rows (q6_kx4, repack.h) × Q8_K activations as they are, AVX-512 VNNI.
// As q4_kx4 (packed_q4_k_avx512.cc), a zmm's 128-bit lane r holds row r: per quarter of the
// super-block (64 elements of a row, four sub-blocks of 16) three 64-byte loads give the four
// rows' 16 low-nibble bytes of each ql half and their 16 qh bytes, which make four vectors of
// 6-bit values (unsigned, 0..63) for the four rows at once; the token's 16 matching activations
// are one 16-byte broadcast shared by the four rows, and each sub-block's int8 scale is spread
// as int16 over its row's lane by one vpshufb (into the high byte) and an arithmetic shift.
//   - per token and quarter: four broadcasts, four vpmaddubsw (6-bit × int8, pairs at most
//     2·63·128 in int16, no saturation), four vpdpwssd by the sub-block scales (exact int32);
//   - per token and super-block: the -32 offset as -32·Σ scale·bsum (two vpmaddwd of the rows'
//     scales by the token's 16 sums), one conversion and one fma by the lane vector d·dy.
// The weights are one linear stream per thread, left to the hardware prefetchers: software
// prefetch 512 B ahead measured the same (1.3B output matrix, one thread, 26-28 GB/s either way),
// 2 KiB ahead 40 % slower. The GEMV is the tile at one token: every (row, token) output is the same bits alone or in a
// batch. The integer sums are vec_dot_q6_k's; the float steps (per super-block and lane, then the
// four lanes of a row) are ordered differently from it (repack.test.ts bounds the difference).
#include "quant/blocks.h"
#include "quant/repack.h"
#define QUANT_ISA avx512
#include "quant/simd_avx512.h"

namespace fulcrum {
namespace quant {
namespace {

constexpr size_t kSbBytes = 4 * sizeof(block_q6_K);  // 840: one super-block of four rows
constexpr size_t kBodyAt = 64, kDAt = 832;            // repack.h: scales, quarters, d

// vpshufb controls (per 128-bit lane, the row's 16 scale bytes): scale j into the high byte of
// every int16 (low byte zero; an arithmetic shift right by 8 then sign-extends it), and the
// scales 0-7 / 8-15 as eight int16 each for the offset term.
// Built at compile time (constexpr): this file's code must not run on a CPU without AVX-512,
// and a dynamic initializer would run at load on every CPU.
struct Controls {
  alignas(64) uint8_t scale[16][64] = {};
  alignas(64) uint8_t scales_lo[64] = {};
  alignas(64) uint8_t scales_hi[64] = {};
  constexpr Controls() {
    for (int j = 0; j < 16; ++j)
      for (int b = 0; b < 64; ++b) scale[j][b] = b % 2 == 1 ? static_cast<uint8_t>(j) : 0x80;
    for (int b = 0; b < 64; ++b) {
      scales_lo[b] = b % 2 == 1 ? static_cast<uint8_t>((b % 16) / 2) : 0x80;
      scales_hi[b] = b % 2 == 1 ? static_cast<uint8_t>(8 + (b % 16) / 2) : 0x80;
    }
  }
};
constexpr Controls kCtl{};

inline __m512i bcast16(const int8_t* p) { return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m512i spread_scale(__m512i sc8, const uint8_t* ctl) { return _mm512_srai_epi16(_mm512_shuffle_epi8(sc8, _mm512_load_si512(ctl)), 8); }

template <int C>
void q6_kx4(int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as) {
  const int64_t nsb = n / QK_K;
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  const __m512i spread_d = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  __m512 acc[C];
  for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nsb; ++i) {
    const uint8_t* g = w + i * kSbBytes;
    const __m512i sc8 = _mm512_loadu_si512(g);
    const __m512 dv = _mm512_permutexvar_ps(spread_d, _mm512_castps128_ps512(_mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(g + kDAt)))));
    __m512i sum[C];
    for (int c = 0; c < C; ++c) sum[c] = _mm512_setzero_si512();
    for (int q = 0; q < 4; ++q) {
      // Quarter q = (half hf, piece p): elements 128·hf + 16·p + 32·k + (0..15), k = 0..3, are
      // sub-block 8·hf + p + 2·k.
      const int hf = q / 2, p = q % 2;
      const uint8_t* b = g + kBodyAt + 192 * q;
      const __m512i va = _mm512_loadu_si512(b), vb = _mm512_loadu_si512(b + 64), vh = _mm512_loadu_si512(b + 128);
      const __m512i q0 = _mm512_or_si512(_mm512_and_si512(va, m4), _mm512_and_si512(_mm512_slli_epi16(vh, 4), m30));
      const __m512i q1 = _mm512_or_si512(_mm512_and_si512(vb, m4), _mm512_and_si512(_mm512_slli_epi16(vh, 2), m30));
      const __m512i q2 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(va, 4), m4), _mm512_and_si512(vh, m30));
      const __m512i q3 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(vb, 4), m4), _mm512_and_si512(_mm512_srli_epi16(vh, 2), m30));
      const int j0 = 8 * hf + p;
      const __m512i s0 = spread_scale(sc8, kCtl.scale[j0]), s1 = spread_scale(sc8, kCtl.scale[j0 + 2]);
      const __m512i s2 = spread_scale(sc8, kCtl.scale[j0 + 4]), s3 = spread_scale(sc8, kCtl.scale[j0 + 6]);
      for (int c = 0; c < C; ++c) {
        const int8_t* y = reinterpret_cast<const block_q8_K*>(act + c * as)[i].qs + 128 * hf + 16 * p;
        sum[c] = _mm512_dpwssd_epi32(sum[c], _mm512_maddubs_epi16(q0, bcast16(y)), s0);
        sum[c] = _mm512_dpwssd_epi32(sum[c], _mm512_maddubs_epi16(q1, bcast16(y + 32)), s1);
        sum[c] = _mm512_dpwssd_epi32(sum[c], _mm512_maddubs_epi16(q2, bcast16(y + 64)), s2);
        sum[c] = _mm512_dpwssd_epi32(sum[c], _mm512_maddubs_epi16(q3, bcast16(y + 96)), s3);
      }
    }
    const __m512i sc_lo = spread_scale(sc8, kCtl.scales_lo), sc_hi = spread_scale(sc8, kCtl.scales_hi);
    for (int c = 0; c < C; ++c) {
      const block_q8_K* yb = reinterpret_cast<const block_q8_K*>(act + c * as) + i;
      const __m512i bs_lo = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(yb->bsums)));
      const __m512i bs_hi = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(yb->bsums + 8)));
      const __m512i offset = _mm512_add_epi32(_mm512_madd_epi16(sc_lo, bs_lo), _mm512_madd_epi16(sc_hi, bs_hi));
      const __m512i total = _mm512_sub_epi32(sum[c], _mm512_slli_epi32(offset, 5));
      acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(dv, _mm512_set1_ps(yb->d)), _mm512_cvtepi32_ps(total), acc[c]);
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

void gemv_q6_kx4_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) {
  const size_t group_bytes = static_cast<size_t>(n / QK_K) * kSbBytes;
  for (int g = 0; g < groups; ++g) q6_kx4<1>(n, out + 4 * g, 0, w + g * group_bytes, act, 0);
}

void tile_q6_kx4_avx512(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols) {
  switch (cols) {
    case 4: q6_kx4<4>(n, out, out_stride, w, act, act_stride); break;
    case 3: q6_kx4<3>(n, out, out_stride, w, act, act_stride); break;
    case 2: q6_kx4<2>(n, out, out_stride, w, act, act_stride); break;
    case 1: q6_kx4<1>(n, out, out_stride, w, act, act_stride); break;
    default: break;
  }
}

}  // namespace quant
}  // namespace fulcrum
