// Q8_0, Q4_0 and Q5_0 (× Q8_0 activations) prefill tiles on AMX-INT8 (Sapphire Rapids and later): up
// to 64 weight rows × 16 tokens per call. Per 32-element block, tdpbssd multiplies a 16-row ×
// 32-byte weight tile (Q8_0: loaded straight from the weight rows with their row stride; Q4_0/Q5_0:
// unpacked to q − 8 / q − 16 first) by a 32 × 16-token activation tile (the block's activation bytes
// transposed into AMX's 4-byte-group layout once per block and call, shared by all row groups),
// giving the 16 × 16 exact int32 block sums; AVX-512 then scales them by d_w · d_a and
// accumulates in f32. The integer sums equal vec_dot's; only the float summation order differs.
// Rows beyond the last full group of 16 go to the VNNI 4×4 kernels. The process must have been
// granted the AMX tile state first (amx_request_permission in gemm_registry.cc).
#pragma GCC target("amx-tile,amx-int8")
#include "quant/tiles/amx_tiles.h"
#include "quant/formats/blocks.h"
#include "quant/tiles/gemm_tiles.h"
#define QUANT_ISA avx512
#include "quant/dot/simd_avx512.h"

namespace fulcrum {
namespace quant {
namespace {
using namespace simd;

constexpr int kGroupRows = 16;  // rows of one AMX weight/result tile
constexpr int kMaxGroups = kTileRowsAmx / kGroupRows;

// tmm0..3: the block sums of row groups 0..3 (16 rows × cols int32); tmm4: a weight group's block
// (16 rows × 32 bytes); tmm5: the tokens' block (8 rows of 4-byte groups × cols).
TileConfig config_for(int cols) {
  TileConfig cfg;
  for (int t = 0; t < 4; ++t) {
    cfg.rows[t] = kGroupRows;
    cfg.colsb[t] = static_cast<uint16_t>(cols * 4);
  }
  cfg.rows[4] = kGroupRows;
  cfg.colsb[4] = QK8_0;
  cfg.rows[5] = QK8_0 / 4;
  cfg.colsb[5] = static_cast<uint16_t>(cols * 4);
  return cfg;
}

// The weight formats: block size in bytes, and how a group's 16 rows of one block reach tile 4
// as int8 (Q8_0 straight from the rows; Q4_0 / Q5_0 unpacked to q − 8 / q − 16 through a
// 512-byte buffer).
struct Q8_0Amx {
  static constexpr size_t kBlockBytes = sizeof(block_q8_0);
  static void load_weights(const uint8_t* blk, size_t wrb, int8_t*) {
    _tile_loadd(4, blk + 2, static_cast<long>(wrb));
  }
};

struct Q4_0Amx {
  static constexpr size_t kBlockBytes = sizeof(block_q4_0);
  static void load_weights(const uint8_t* blk, size_t wrb, int8_t* buf) {
    const __m256i eight = _mm256_set1_epi8(8);
    for (int r = 0; r < kGroupRows; ++r) {
      const __m256i q = _mm256_sub_epi8(nibbles_32(blk + r * wrb + 2), eight);
      _mm256_store_si256(reinterpret_cast<__m256i*>(buf + r * QK8_0), q);
    }
    _tile_loadd(4, buf, QK8_0);
  }
};

struct Q5_0Amx {
  static constexpr size_t kBlockBytes = sizeof(block_q5_0);
  static void load_weights(const uint8_t* blk, size_t wrb, int8_t* buf) {
    const __m256i sixteen = _mm256_set1_epi8(16);
    for (int r = 0; r < kGroupRows; ++r) {
      const uint8_t* b = blk + r * wrb;  // d (2 bytes), qh (4), qs (16)
      const __m256i hi = _mm256_and_si256(bits_to_bytes_32(b + 2), sixteen);
      const __m256i q = _mm256_sub_epi8(_mm256_or_si256(nibbles_32(b + 6), hi), sixteen);
      _mm256_store_si256(reinterpret_cast<__m256i*>(buf + r * QK8_0), q);
    }
    _tile_loadd(4, buf, QK8_0);
  }
};

template <class F, int G>
void run_groups(int64_t nb, float* out, int64_t os, const uint8_t* w, size_t wrb, const uint8_t* a, size_t arb, int cols) {
  alignas(64) int8_t wbuf[kGroupRows * QK8_0];  // Q4_0's unpacked group block
  alignas(64) int32_t bt[QK8_0 / 4][16];        // the tokens' block, AMX B layout
  alignas(64) int32_t sums[kGroupRows][16] = {};  // one group's block sums (lanes >= cols stay 0)
  alignas(64) float dw[kMaxGroups * kGroupRows];
  __m512 acc[G * kGroupRows];
  for (int r = 0; r < G * kGroupRows; ++r) acc[r] = _mm512_setzero_ps();
  const __mmask16 live = static_cast<__mmask16>((1u << cols) - 1);
  // Byte offsets of each token's row, for the gathers (lanes >= cols masked off).
  alignas(64) int32_t tok_off[16] = {};
  for (int c = 0; c < cols; ++c) tok_off[c] = static_cast<int32_t>(c * arb);
  const __m512i toff = _mm512_load_si512(tok_off);
  alignas(64) int32_t row_off[16];
  for (int r = 0; r < kGroupRows; ++r) row_off[r] = static_cast<int32_t>(r * wrb);
  const __m512i roff = _mm512_load_si512(row_off);
  const __m512i f16mask = _mm512_set1_epi32(0xFFFF);
  const TileConfigScope tiles(config_for(cols));  // the thread's previous configuration returns on exit
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* ab = a + i * sizeof(block_q8_0);
    for (int k = 0; k < QK8_0 / 4; ++k) {
      _mm512_store_si512(bt[k], _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, toff, ab + 2 + 4 * k, 1));
    }
    // d is the block's first 2 bytes: gather 4 (d + 2 bytes of qs, inside the block), keep 16 bits.
    const __m512i da_bits = _mm512_and_si512(_mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, toff, ab, 1), f16mask);
    const __m512 da = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(da_bits));
    for (int g = 0; g < G; ++g) {
      const uint8_t* wb = w + g * kGroupRows * wrb + i * F::kBlockBytes;
      const __m512i dw_bits = _mm512_and_si512(_mm512_i32gather_epi32(roff, wb, 1), f16mask);
      _mm512_store_ps(dw + g * kGroupRows, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dw_bits)));
    }
    _tile_loadd(5, bt, 64);
    // tdpbssd names its tiles by immediates: one step per group, unrolled by G.
    _tile_zero(0);
    F::load_weights(w + i * F::kBlockBytes, wrb, wbuf);
    _tile_dpbssd(0, 4, 5);
    if constexpr (G > 1) {
      _tile_zero(1);
      F::load_weights(w + kGroupRows * wrb + i * F::kBlockBytes, wrb, wbuf);
      _tile_dpbssd(1, 4, 5);
    }
    if constexpr (G > 2) {
      _tile_zero(2);
      F::load_weights(w + 2 * kGroupRows * wrb + i * F::kBlockBytes, wrb, wbuf);
      _tile_dpbssd(2, 4, 5);
    }
    if constexpr (G > 3) {
      _tile_zero(3);
      F::load_weights(w + 3 * kGroupRows * wrb + i * F::kBlockBytes, wrb, wbuf);
      _tile_dpbssd(3, 4, 5);
    }
    for (int g = 0; g < G; ++g) {
      switch (g) {
        case 0: _tile_stored(0, sums, 64); break;
        case 1: _tile_stored(1, sums, 64); break;
        case 2: _tile_stored(2, sums, 64); break;
        default: _tile_stored(3, sums, 64); break;
      }
      for (int r = 0; r < kGroupRows; ++r) {
        const int row = g * kGroupRows + r;
        const __m512 s = _mm512_mul_ps(_mm512_set1_ps(dw[row]), da);
        acc[row] = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(_mm512_load_si512(sums[r])), acc[row]);
      }
    }
  }
  alignas(64) float lanes[16];
  for (int r = 0; r < G * kGroupRows; ++r) {
    _mm512_store_ps(lanes, acc[r]);
    for (int c = 0; c < cols; ++c) out[c * os + r] = lanes[c];
  }
}

using VnniTile = void (*)(int64_t, float*, int64_t, const void*, size_t, int, const void*, size_t, int);

template <class F>
void amx_tile(int64_t n, float* out, int64_t out_stride, const void* w, size_t w_row_bytes, int rows,
              const void* act, size_t act_row_bytes, int cols, VnniTile vnni) {
  if (rows <= 0 || cols <= 0 || cols > kTileColsAmx || rows > kTileRowsAmx) return;
  const int64_t nb = n / QK8_0;
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  const uint8_t* ab = static_cast<const uint8_t*>(act);
  // The gathers address the tile's rows by int32 byte offsets (16 rows or tokens apart at most).
  constexpr size_t kMaxRowBytes = 0x7FFFFFFF / 16;
  const int groups = w_row_bytes <= kMaxRowBytes && act_row_bytes <= kMaxRowBytes ? rows / kGroupRows : 0;
  switch (groups) {
    case 1: run_groups<F, 1>(nb, out, out_stride, wb, w_row_bytes, ab, act_row_bytes, cols); break;
    case 2: run_groups<F, 2>(nb, out, out_stride, wb, w_row_bytes, ab, act_row_bytes, cols); break;
    case 3: run_groups<F, 3>(nb, out, out_stride, wb, w_row_bytes, ab, act_row_bytes, cols); break;
    case 4: run_groups<F, 4>(nb, out, out_stride, wb, w_row_bytes, ab, act_row_bytes, cols); break;
    default: break;
  }
  // Rows past the last full group of 16, in the VNNI kernel's 4 × 4 tiles.
  for (int r = groups * kGroupRows; r < rows; r += kTileRowsAvx512) {
    const int nr = rows - r < kTileRowsAvx512 ? rows - r : kTileRowsAvx512;
    for (int c = 0; c < cols; c += kTileColsAvx512) {
      const int nc = cols - c < kTileColsAvx512 ? cols - c : kTileColsAvx512;
      vnni(n, out + c * out_stride + r, out_stride, wb + r * w_row_bytes, w_row_bytes, nr,
           ab + c * act_row_bytes, act_row_bytes, nc);
    }
  }
}

}  // namespace

void gemm_tile_q8_0_amx(int64_t n, float* out, int64_t out_stride, const void* w, size_t w_row_bytes, int rows,
                        const void* act, size_t act_row_bytes, int cols) {
  amx_tile<Q8_0Amx>(n, out, out_stride, w, w_row_bytes, rows, act, act_row_bytes, cols, gemm_tile_q8_0_avx512);
}

void gemm_tile_q4_0_amx(int64_t n, float* out, int64_t out_stride, const void* w, size_t w_row_bytes, int rows,
                        const void* act, size_t act_row_bytes, int cols) {
  amx_tile<Q4_0Amx>(n, out, out_stride, w, w_row_bytes, rows, act, act_row_bytes, cols, gemm_tile_q4_0_avx512);
}

void gemm_tile_q5_0_amx(int64_t n, float* out, int64_t out_stride, const void* w, size_t w_row_bytes, int rows,
                        const void* act, size_t act_row_bytes, int cols) {
  amx_tile<Q5_0Amx>(n, out, out_stride, w, w_row_bytes, rows, act, act_row_bytes, cols, gemm_tile_q5_0_avx512);
}

}  // namespace quant
}  // namespace fulcrum
