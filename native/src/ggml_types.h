// Type traits for ggml tensor formats: the one table every kernel looks types up in
// (ggml's style). Numbering is ggml's, as stored in GGUF files.
#pragma once
#include <cstdint>
#include <cstddef>

namespace fulcrum {

enum class GgmlType : int32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, BF16 = 30,
  COUNT = 40,
};

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512dq = false, avx512bw = false, avx512vl = false, avx512vnni = false, avx512bf16 = false;
  bool avx_vnni = false, amx_int8 = false, amx_bf16 = false;
  // AMD family 19h with AVX-512: Zen 4 (Zen 3, the same family, has no AVX-512); family 1Ah
  // with AVX-512: Zen 5.
  bool amd_zen4 = false, amd_zen5 = false;
  bool intel = false;  // "GenuineIntel"
};

// What the CPU and OS support, detected once (cpuid + OS XSAVE support). Kernels do not read it:
// they run at the one choice made from it (core/isa.h kernel_choice(), capped by FULCRUM_ISA).
const CpuFeatures& cpu_features();
// The ISA level kernels were chosen for: "scalar", "avx2", "avxvnni" or "avx512".
const char* isa_level();

// Dot product of one weight row (n elements of the row's type) with one activation row that
// was converted to this type's vec_dot_type. Writes the result to *out.
using VecDotFn = void (*)(int64_t n, float* out, const void* weight_row, const void* act_row);
using DequantizeRowFn = void (*)(const void* src, float* dst, int64_t n);
using QuantizeRowFn = void (*)(const float* src, void* dst, int64_t n);
// Prefill tile: out[c * out_stride + r] = vec_dot(weight row r, activation row c) for r < rows
// (<= tile_rows) and c < cols (<= tile_cols); each weight block is unpacked once per tile and
// reused across the activation rows. Same preconditions as VecDotFn.
using GemmTileFn = void (*)(int64_t n, float* out, int64_t out_stride, const void* w, size_t w_row_bytes, int rows,
                            const void* act, size_t act_row_bytes, int cols);
// Decode GEMV: out[r] = vec_dot(weight row r, act) for r < rows (<= gemv_rows), bit for bit
// except Q4_0 on AVX-512 (within float rounding: its sums are grouped by block, vec_dot's by
// block pair); several rows per pass share the activation loads and per-block activation terms.
using GemvFn = void (*)(int64_t n, float* out, const void* w, size_t w_row_bytes, int rows, const void* act);

struct TypeTraits {
  const char* name = nullptr;
  int64_t block_size = 0;   // elements per block
  size_t type_size = 0;     // bytes per block
  bool supported = false;   // has dequantize + vec_dot
  GgmlType vec_dot_type = GgmlType::F32;  // the activation format vec_dot expects
  DequantizeRowFn dequantize_row = nullptr;
  QuantizeRowFn quantize_row = nullptr;    // float -> this format (reference quality)
  VecDotFn vec_dot = nullptr;
  GemmTileFn gemm_tile = nullptr;  // optional (quant/tiles/gemm_registry.cc); matmul falls back to vec_dot
  int tile_rows = 0, tile_cols = 0;
  bool tile_matches_decode = false;  // gemm_tile's outputs are bit for bit the decode kernel's
  GemvFn gemv = nullptr;  // optional (quant/tiles/gemm_registry.cc); decode falls back to vec_dot per row
  int gemv_rows = 0;
};

// The table, filled for the chosen ISA (core/isa.h select_kernels) on first use.
const TypeTraits& type_traits(GgmlType t);
inline size_t row_bytes(GgmlType t, int64_t n) {
  const TypeTraits& tt = type_traits(t);
  return static_cast<size_t>(n / tt.block_size) * tt.type_size;
}

}  // namespace fulcrum
