// Q6_K in groups of 4 rows (q6_kx4, repack.h) × Q8_K activations as they are, AVX2 (no VNNI).
// The AVX-512 kernel's scheme (packed_q6_k_avx512.cc) on half the width: a ymm holds a pair of
// rows (128-bit lane = row), so each step runs once per pair. The 6-bit values and scales of one
// sub-block are built just before the tokens use them (one at a time, not four), which keeps a
// 2-token tile within the 16 ymm registers. vpmaddwd by the scales and int32 adds give the same
// integer sums as vpdpwssd, and the float steps are the AVX-512 kernel's: both ISAs give the
// same bits. The GEMV is the tile at one token.
#include "quant/blocks.h"
#include "quant/repack.h"
#define QUANT_ISA avx2
#include "quant/simd_avx2.h"

namespace fulcrum {
namespace quant {
namespace {

constexpr size_t kSbBytes = 4 * sizeof(block_q6_K);  // 840
constexpr size_t kBodyAt = 64, kDAt = 832;

// Built at compile time (constexpr): no dynamic initializer in an ISA-specific file.
struct Controls {
  alignas(32) uint8_t scale[16][32] = {};
  alignas(32) uint8_t scales_lo[32] = {};
  alignas(32) uint8_t scales_hi[32] = {};
  constexpr Controls() {
    for (int j = 0; j < 16; ++j)
      for (int b = 0; b < 32; ++b) scale[j][b] = b % 2 == 1 ? static_cast<uint8_t>(j) : 0x80;
    for (int b = 0; b < 32; ++b) {
      scales_lo[b] = b % 2 == 1 ? static_cast<uint8_t>((b % 16) / 2) : 0x80;
      scales_hi[b] = b % 2 == 1 ? static_cast<uint8_t>(8 + (b % 16) / 2) : 0x80;
    }
  }
};
constexpr Controls kCtl{};

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m256i bcast16(const int8_t* p) { return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256i spread_scale(__m256i sc8, const uint8_t* ctl) { return _mm256_srai_epi16(_mm256_shuffle_epi8(sc8, load32(ctl)), 8); }

template <int C>
void q6_kx4(int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as) {
  const int64_t nsb = n / QK_K;
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  __m256 acc[C][2];
  for (int c = 0; c < C; ++c) acc[c][0] = acc[c][1] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nsb; ++i) {
    const uint8_t* g = w + i * kSbBytes;
    const __m128 d4 = _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(g + kDAt)));
    for (int pr = 0; pr < 2; ++pr) {
      const __m256i sc8 = load32(g + 32 * pr);
      __m256i sum[C];
      for (int c = 0; c < C; ++c) sum[c] = _mm256_setzero_si256();
      for (int q = 0; q < 4; ++q) {
        const int hf = q / 2, p = q % 2, j0 = 8 * hf + p;
        const uint8_t* b = g + kBodyAt + 192 * q + 32 * pr;
        const __m256i va = load32(b), vb = load32(b + 64), vh = load32(b + 128);
        for (int k = 0; k < 4; ++k) {
          // Sub-block j0 + 2k: k = 0, 1 the low nibbles of the quarter's two ql pieces, k = 2, 3
          // their high nibbles; the top two bits are qh's bit pair k.
          const __m256i lo = k == 0 ? va : k == 1 ? vb : k == 2 ? _mm256_srli_epi16(va, 4) : _mm256_srli_epi16(vb, 4);
          const __m256i hi = k == 0 ? _mm256_slli_epi16(vh, 4) : k == 1 ? _mm256_slli_epi16(vh, 2) : k == 2 ? vh : _mm256_srli_epi16(vh, 2);
          const __m256i qk = _mm256_or_si256(_mm256_and_si256(lo, m4), _mm256_and_si256(hi, m30));
          const __m256i sk = spread_scale(sc8, kCtl.scale[j0 + 2 * k]);
          for (int c = 0; c < C; ++c) {
            const int8_t* y = reinterpret_cast<const block_q8_K*>(act + c * as)[i].qs + 128 * hf + 16 * p + 32 * k;
            sum[c] = _mm256_add_epi32(sum[c], _mm256_madd_epi16(_mm256_maddubs_epi16(qk, bcast16(y)), sk));
          }
        }
      }
      const __m256i sc_lo = spread_scale(sc8, kCtl.scales_lo), sc_hi = spread_scale(sc8, kCtl.scales_hi);
      // Lane 0: row 2·pr's d, lane 1: row 2·pr + 1's.
      const __m256 dv = _mm256_set_m128(_mm_set1_ps(d4[2 * pr + 1]), _mm_set1_ps(d4[2 * pr]));
      for (int c = 0; c < C; ++c) {
        const block_q8_K* yb = reinterpret_cast<const block_q8_K*>(act + c * as) + i;
        const __m256i bs_lo = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(yb->bsums)));
        const __m256i bs_hi = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(yb->bsums + 8)));
        const __m256i offset = _mm256_add_epi32(_mm256_madd_epi16(sc_lo, bs_lo), _mm256_madd_epi16(sc_hi, bs_hi));
        const __m256i total = _mm256_sub_epi32(sum[c], _mm256_slli_epi32(offset, 5));
        acc[c][pr] = _mm256_fmadd_ps(_mm256_mul_ps(dv, _mm256_set1_ps(yb->d)), _mm256_cvtepi32_ps(total), acc[c][pr]);
      }
    }
  }
  // Row (2·pr + lane)'s four floats: (l0 + l2) + (l1 + l3), as the AVX-512 kernel.
  for (int c = 0; c < C; ++c)
    for (int pr = 0; pr < 2; ++pr) {
      __m256 t = _mm256_add_ps(acc[c][pr], _mm256_permute_ps(acc[c][pr], 0x4E));
      t = _mm256_add_ps(t, _mm256_permute_ps(t, 0xB1));
      out[c * os + 2 * pr] = _mm256_cvtss_f32(t);
      out[c * os + 2 * pr + 1] = _mm_cvtss_f32(_mm256_extractf128_ps(t, 1));
    }
}

}  // namespace

void gemv_q6_kx4_avx2(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) {
  const size_t group_bytes = static_cast<size_t>(n / QK_K) * kSbBytes;
  for (int g = 0; g < groups; ++g) q6_kx4<1>(n, out + 4 * g, 0, w + g * group_bytes, act, 0);
}

void tile_q6_kx4_avx2(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols) {
  switch (cols) {
    case 2: q6_kx4<2>(n, out, out_stride, w, act, act_stride); break;
    case 1: q6_kx4<1>(n, out, out_stride, w, act, act_stride); break;
    default: break;
  }
}

}  // namespace quant
}  // namespace fulcrum
