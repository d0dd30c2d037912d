// Prefill tile kernels (GemmTileFn, see ggml_types.h): a tile of weight rows × activation rows
// per call, each weight block unpacked once and reused across the tile's tokens. One file per
// format and ISA (gemm_<fmt>_<isa>.cc); gemm_registry.cc puts them in the type-traits table.
#pragma once
#include "core/isa.h"
#include "ggml_types.h"

namespace fulcrum {
namespace quant {

// Tile shapes (rows × tokens). AVX-512 has 32 zmm: 4×4 accumulators + 4 tokens' activations
// and scales fit. AVX2 has 16 ymm: 4×2 accumulators + 2 tokens' operands fit without spills.
constexpr int kTileRowsAvx512 = 4, kTileColsAvx512 = 4;
constexpr int kTileRowsAvx2 = 4, kTileColsAvx2 = 2;
constexpr int kTileRowsQ8Avx2 = 3, kTileColsQ8Avx2 = 4;
// Q4_K keeps an int32 super-block sum per pair besides the float accumulator: 4×4 spills; 2×6
// (24 zmm) measured 2 % over 2×4 on the 1.3B shape (1.3B Q4_K prefill, 1 thread: 53.2 against
// 52.3 tok/s; 1×8 51.8, 3×4 50.7).
// AMX-INT8 (gemm_amx_avx512.cc): up to four 16-row tile groups × 16 tokens per call.
constexpr int kTileRowsAmx = 64, kTileColsAmx = 16;
constexpr int kTileRowsQ4kAvx512 = 2, kTileColsQ4kAvx512 = 6;
constexpr int kTileRowsQ6kAvx512 = 2, kTileColsQ6kAvx512 = 4;  // same register budget as Q4_K
// AVX2 K-quant tiles: per pair an int32 super-block sum plus float accumulators (two for Q4_K).
constexpr int kTileRowsQ4kAvx2 = 2, kTileColsQ4kAvx2 = 4;
constexpr int kTileRowsQ6kAvx2 = 2, kTileColsQ6kAvx2 = 2;

#define FULCRUM_GEMM_TILE_DECL(name)                                                                    \
  void name(int64_t n, float* out, int64_t out_stride, const void* w, size_t w_row_bytes, int rows, \
            const void* act, size_t act_row_bytes, int cols);
FULCRUM_GEMM_TILE_DECL(gemm_tile_q8_0_avx512)
FULCRUM_GEMM_TILE_DECL(gemm_tile_q8_0_avx2)
FULCRUM_GEMM_TILE_DECL(gemm_tile_q8_0_avxvnni)
FULCRUM_GEMM_TILE_DECL(gemm_tile_q4_0_avx512)
FULCRUM_GEMM_TILE_DECL(gemm_tile_q4_0_avx2)
FULCRUM_GEMM_TILE_DECL(gemm_tile_q4_0_avxvnni)
FULCRUM_GEMM_TILE_DECL(gemm_tile_q5_0_avx512)
FULCRUM_GEMM_TILE_DECL(gemm_tile_q5_0_avx2)
FULCRUM_GEMM_TILE_DECL(gemm_tile_q5_0_avxvnni)
FULCRUM_GEMM_TILE_DECL(gemm_tile_q4_k_avx512)
FULCRUM_GEMM_TILE_DECL(gemm_tile_q6_k_avx512)
FULCRUM_GEMM_TILE_DECL(gemm_tile_q4_k_avx2)
FULCRUM_GEMM_TILE_DECL(gemm_tile_q4_k_avxvnni)
FULCRUM_GEMM_TILE_DECL(gemm_tile_q6_k_avx2)
FULCRUM_GEMM_TILE_DECL(gemm_tile_q6_k_avxvnni)
FULCRUM_GEMM_TILE_DECL(gemm_tile_q8_0_amx)
FULCRUM_GEMM_TILE_DECL(gemm_tile_q4_0_amx)
FULCRUM_GEMM_TILE_DECL(gemm_tile_q5_0_amx)
FULCRUM_GEMM_TILE_DECL(gemm_tile_q4_k_amx)
#undef FULCRUM_GEMM_TILE_DECL

// How far ahead of each row the Q8_0 GEMVs prefetch (into L2). Measured on an AMD EPYC (0.5B
// Q8_0 decode, bench:cpu, 1 / 2 threads, % of the read-bandwidth limit): one pass of rows ahead
// (4-21 KiB, the earlier choice) 68-72 % / 86 %; 16 KiB 86 / 90; 24 KiB 96-98 / 82-88; 32 KiB
// 97-101 / 82; 1 KiB or none 31-36 / 48-53. AVX2 the same (24 KiB: 96 / 82 against 67 / 83).
constexpr size_t kGemvQ8PrefetchAhead = 24 << 10;

// Decode GEMV kernels (GemvFn): rows per pass.
constexpr int kGemvRowsAvx512 = 4;
constexpr int kGemvRowsAvx2 = 4;
void gemv_q4_0_avx2(int64_t n, float* out, const void* w, size_t w_row_bytes, int rows, const void* act);
void gemv_q8_0_avx2(int64_t n, float* out, const void* w, size_t w_row_bytes, int rows, const void* act);
void gemv_q4_0_avxvnni(int64_t n, float* out, const void* w, size_t w_row_bytes, int rows, const void* act);
void gemv_q8_0_avxvnni(int64_t n, float* out, const void* w, size_t w_row_bytes, int rows, const void* act);
void gemv_q4_0_avx512(int64_t n, float* out, const void* w, size_t w_row_bytes, int rows, const void* act);
void gemv_q8_0_avx512(int64_t n, float* out, const void* w, size_t w_row_bytes, int rows, const void* act);
// The AVX-512 K-quant GEMVs are their tile kernels at one token (gemm_q*_k_avx512.cc), four
// rows per pass, each row prefetched kGemvQ8PrefetchAhead ahead: 1.3B Q4_K decode 28.7-29.1 ->
// 30.5-30.8 tok/s (1 thread), 41.5 -> 43.6-44.0 (2 threads) against one vec_dot per row.
constexpr int kGemvRowsK = 4;
void gemv_q4_k_avx512(int64_t n, float* out, const void* w, size_t w_row_bytes, int rows, const void* act);
void gemv_q6_k_avx512(int64_t n, float* out, const void* w, size_t w_row_bytes, int rows, const void* act);

// register_gemm_tiles (declared in core/isa.h, called by select_kernels after the vec_dot kernels
// and the packed layouts) sets gemm_tile/tile_rows/tile_cols of the formats with a tile kernel.

}  // namespace quant
}  // namespace fulcrum
