// Q4_K × Q8_K prefill tile on AMX-INT8: up to 64 weight rows (four groups of 16) × 16 tokens per
// call. Q4_K scales every 32-element sub-block separately (6-bit sc_j, min m_j), so the AMX unit
// computes one sub-block at a time: per super-block and group, the 16 rows' nibbles are unpacked
// to bytes 0..15 (one 16 × 32 weight tile per sub-block), tdpbusd multiplies each by the
// sub-block's 32 × 16-token activation tile (transposed into AMX's 4-byte-group layout once per
// super-block and call, shared by the groups), and AVX-512 folds the 16 × 16 exact int32 sums
// into the super-block sum Σ_j sc_j · dot_j with integer multiplies, as vec_dot does. The mins
// term Σ_j m_j · bsum_j takes four vpdpwssd per row (m_j and the tokens' 32-element activation
// sums packed as int16 pairs). Integer sums equal vec_dot_q4_k's; only the float summation order
// differs. Rows beyond the last full group go to the VNNI 2 × 4 kernel. The process must have
// been granted the AMX tile state (gemm_registry.cc).
#pragma GCC target("amx-tile,amx-int8")
#include "quant/tiles/amx_tiles.h"
#include "quant/formats/blocks.h"
#include "quant/tiles/gemm_tiles.h"
#include "quant/formats/k_scales.h"
#define QUANT_ISA avx512
#include "quant/dot/simd_avx512.h"

namespace fulcrum {
namespace quant {
namespace {
using namespace simd;

constexpr int kGroupRows = 16;
constexpr int kSub = QK_K / 32;  // sub-blocks per super-block
constexpr size_t kQsOffset = offsetof(block_q8_K, qs), kBsumsOffset = offsetof(block_q8_K, bsums);

// tmm0: a group's sums for one sub-block (16 rows × cols int32); tmm4: the group's weights of
// that sub-block (16 rows × 32 bytes); tmm5: the tokens' sub-block (8 rows of 4-byte groups ×
// cols).
TileConfig config_for(int cols) {
  TileConfig cfg;
  cfg.rows[0] = kGroupRows;
  cfg.colsb[0] = static_cast<uint16_t>(cols * 4);
  cfg.rows[4] = kGroupRows;
  cfg.colsb[4] = 32;
  cfg.rows[5] = 32 / 4;
  cfg.colsb[5] = static_cast<uint16_t>(cols * 4);
  return cfg;
}

void run_groups(int64_t nsb, float* out, int64_t os, const uint8_t* w, size_t wrb, const uint8_t* a, size_t arb,
                int groups, int cols) {
  alignas(64) int32_t bt[kSub][8][16];             // the tokens' sub-blocks, AMX B layout
  alignas(64) int8_t wq[kSub][kGroupRows][32];     // one group's nibbles as bytes, per sub-block
  alignas(64) int32_t sums[kGroupRows][16];        // one sub-block's tile of sums
  alignas(64) int32_t sc32[kSub][kGroupRows];      // sc_j per row
  alignas(64) int32_t mn_pairs[kSub / 2][kGroupRows];  // (m_2k | m_2k+1 << 16) per row
  alignas(64) float acc[kTileRowsAmx][16] = {};
  float dx[kGroupRows], dmx[kGroupRows];
  const __mmask16 live = static_cast<__mmask16>((1u << cols) - 1);
  alignas(64) int32_t tok_off[16] = {};
  for (int c = 0; c < cols; ++c) tok_off[c] = static_cast<int32_t>(c * arb);
  const __m512i toff = _mm512_load_si512(tok_off);
  const __m512i ones16 = _mm512_set1_epi16(1), low16 = _mm512_set1_epi32(0xFFFF);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const TileConfigScope tiles(config_for(cols));  // the thread's previous configuration returns on exit
  for (int64_t i = 0; i < nsb; ++i) {
    const uint8_t* ab = a + i * sizeof(block_q8_K);
    for (int k = 0; k < QK_K / 4; ++k) {
      _mm512_store_si512(bt[k / 8][k % 8],
                         _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, toff, ab + kQsOffset + 4 * k, 1));
    }
    const __m512 da = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, toff, ab, 1);
    // Per token, sub-block sums bsum_j = bsums[2j] + bsums[2j+1]; pairs (bsum_2k, bsum_2k+1) as int16.
    __m512i bsum_pairs[kSub / 2];
    for (int k = 0; k < kSub / 2; ++k) {
      const __m512i lo = _mm512_madd_epi16(
          _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, toff, ab + kBsumsOffset + 8 * k, 1), ones16);
      const __m512i hi = _mm512_madd_epi16(
          _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, toff, ab + kBsumsOffset + 8 * k + 4, 1), ones16);
      bsum_pairs[k] = _mm512_or_si512(_mm512_and_si512(lo, low16), _mm512_slli_epi32(hi, 16));
    }
    for (int g = 0; g < groups; ++g) {
      for (int r = 0; r < kGroupRows; ++r) {
        const block_q4_K* x = reinterpret_cast<const block_q4_K*>(w + (g * kGroupRows + r) * wrb) + i;
        uint8_t sc[kSub], mn[kSub];
        for (int j = 0; j < kSub; ++j) get_scale_min_k4(j, x->scales, &sc[j], &mn[j]);
        for (int j = 0; j < kSub; ++j) sc32[j][r] = sc[j];
        for (int k = 0; k < kSub / 2; ++k) mn_pairs[k][r] = static_cast<int32_t>(mn[2 * k] | (mn[2 * k + 1] << 16));
        dx[r] = f16(x->d);
        dmx[r] = f16(x->dmin);
        for (int ch = 0; ch < kSub / 2; ++ch) {
          const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->qs + 32 * ch));
          _mm256_store_si256(reinterpret_cast<__m256i*>(wq[2 * ch][r]), _mm256_and_si256(q, m4));
          _mm256_store_si256(reinterpret_cast<__m256i*>(wq[2 * ch + 1][r]), _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
        }
      }
      __m512i isum[kGroupRows];
      for (int r = 0; r < kGroupRows; ++r) isum[r] = _mm512_setzero_si512();
      for (int j = 0; j < kSub; ++j) {
        _tile_loadd(5, bt[j], 64);
        _tile_loadd(4, wq[j], 32);
        _tile_zero(0);
        _tile_dpbusd(0, 4, 5);
        _tile_stored(0, sums, 64);
        for (int r = 0; r < kGroupRows; ++r)
          isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(_mm512_load_si512(sums[r]), _mm512_set1_epi32(sc32[j][r])));
      }
      for (int r = 0; r < kGroupRows; ++r) {
        __m512i mins = _mm512_setzero_si512();
        for (int k = 0; k < kSub / 2; ++k) mins = _mm512_dpwssd_epi32(mins, bsum_pairs[k], _mm512_set1_epi32(mn_pairs[k][r]));
        float* accr = acc[g * kGroupRows + r];
        __m512 s = _mm512_load_ps(accr);
        s = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(dx[r]), da), _mm512_cvtepi32_ps(isum[r]), s);
        s = _mm512_fnmadd_ps(_mm512_mul_ps(_mm512_set1_ps(dmx[r]), da), _mm512_cvtepi32_ps(mins), s);
        _mm512_store_ps(accr, s);
      }
    }
  }
  for (int r = 0; r < groups * kGroupRows; ++r)
    for (int c = 0; c < cols; ++c) out[c * os + r] = acc[r][c];
}

}  // namespace

void gemm_tile_q4_k_amx(int64_t n, float* out, int64_t out_stride, const void* w, size_t w_row_bytes, int rows,
                        const void* act, size_t act_row_bytes, int cols) {
  if (rows <= 0 || cols <= 0 || cols > kTileColsAmx || rows > kTileRowsAmx) return;
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  const uint8_t* ab = static_cast<const uint8_t*>(act);
  // The gathers address tokens by int32 byte offsets (16 tokens apart at most).
  constexpr size_t kMaxRowBytes = 0x7FFFFFFF / 16;
  const int groups = act_row_bytes <= kMaxRowBytes ? rows / kGroupRows : 0;
  if (groups > 0) run_groups(n / QK_K, out, out_stride, wb, w_row_bytes, ab, act_row_bytes, groups, cols);
  // Rows past the last full group of 16, in the VNNI kernel's tiles.
  for (int r = groups * kGroupRows; r < rows; r += kTileRowsQ4kAvx512) {
    const int nr = rows - r < kTileRowsQ4kAvx512 ? rows - r : kTileRowsQ4kAvx512;
    for (int c = 0; c < cols; c += kTileColsQ4kAvx512) {
      const int nc = cols - c < kTileColsQ4kAvx512 ? cols - c : kTileColsQ4kAvx512;
      gemm_tile_q4_k_avx512(n, out + c * out_stride + r, out_stride, wb + r * w_row_bytes, w_row_bytes, nr,
                            ab + c * act_row_bytes, act_row_bytes, nc);
    }
  }
}

}  // namespace quant
}  // namespace fulcrum
