// The per-format, per-ISA kernel tables of the block formats. register_quant_types (in
// registry.cc) picks one ISA per format for the global type-traits table; quant_impl lets a
// caller (the addon's tests, the benchmarks) pick an ISA explicitly to compare paths.
#pragma once
#include "core/isa.h"
#include "ggml_types.h"

namespace fulcrum {
namespace quant {

// The ISA levels are core's (core/isa.h), as is the choice among them.
using ::fulcrum::Isa;
using ::fulcrum::kIsaCount;
using ::fulcrum::isa_name;

struct Kernels {
  DequantizeRowFn dequantize_row = nullptr;
  QuantizeRowFn quantize_row = nullptr;
  VecDotFn vec_dot = nullptr;  // weight row of this type x activation row of vec_dot_type
};

struct FormatInfo {
  GgmlType type;
  const char* name;
  int64_t block_size;
  size_t type_size;
  GgmlType vec_dot_type;  // == type for activation-only formats (no vec_dot)
  bool has_vec_dot;
};

// Formats this part implements, or nullptr.
const FormatInfo* format_info(GgmlType t);
// Kernels of `t` compiled for `isa`. An ISA without its own version of one kernel falls back to
// the next lower ISA's (e.g. dequantize_row is scalar everywhere); never null fields for a
// format format_info knows. Returns nullptr for unknown formats.
const Kernels* quant_impl(GgmlType t, Isa isa);

// ---- the kernels, one group per file (name_isa) ----
// Scalar: every kernel of every weight format.
#define FULCRUM_QUANT_DECL_SCALAR(fmt)                                            \
  void dequantize_row_##fmt##_scalar(const void* src, float* dst, int64_t n);    \
  void quantize_row_##fmt##_scalar(const float* src, void* dst, int64_t n);      \
  void vec_dot_##fmt##_scalar(int64_t n, float* out, const void* w, const void* a);
// SIMD: vec_dot only (dequantize and weight quantize stay scalar; they are not per token).
#define FULCRUM_QUANT_DECL_SIMD(fmt)                                                \
  void vec_dot_##fmt##_avx2(int64_t n, float* out, const void* w, const void* a); \
  void vec_dot_##fmt##_avxvnni(int64_t n, float* out, const void* w, const void* a); \
  void vec_dot_##fmt##_avx512(int64_t n, float* out, const void* w, const void* a);

FULCRUM_QUANT_DECL_SCALAR(q4_0) FULCRUM_QUANT_DECL_SIMD(q4_0)
FULCRUM_QUANT_DECL_SCALAR(q4_1) FULCRUM_QUANT_DECL_SIMD(q4_1)
FULCRUM_QUANT_DECL_SCALAR(q5_0) FULCRUM_QUANT_DECL_SIMD(q5_0)
FULCRUM_QUANT_DECL_SCALAR(q5_1) FULCRUM_QUANT_DECL_SIMD(q5_1)
FULCRUM_QUANT_DECL_SCALAR(q8_0) FULCRUM_QUANT_DECL_SIMD(q8_0)
FULCRUM_QUANT_DECL_SCALAR(q4_k) FULCRUM_QUANT_DECL_SIMD(q4_k)
FULCRUM_QUANT_DECL_SCALAR(q5_k) FULCRUM_QUANT_DECL_SIMD(q5_k)
FULCRUM_QUANT_DECL_SCALAR(q6_k) FULCRUM_QUANT_DECL_SIMD(q6_k)
#undef FULCRUM_QUANT_DECL_SCALAR
#undef FULCRUM_QUANT_DECL_SIMD

// Activation formats (per token): SIMD quantize, bit-identical to scalar.
void quantize_row_q8_0_avx2(const float* src, void* dst, int64_t n);
void quantize_row_q8_0_avxvnni(const float* src, void* dst, int64_t n);
void quantize_row_q8_0_avx512(const float* src, void* dst, int64_t n);
void dequantize_row_q8_1_scalar(const void* src, float* dst, int64_t n);
void quantize_row_q8_1_scalar(const float* src, void* dst, int64_t n);
void quantize_row_q8_1_avx2(const float* src, void* dst, int64_t n);
void quantize_row_q8_1_avxvnni(const float* src, void* dst, int64_t n);
void quantize_row_q8_1_avx512(const float* src, void* dst, int64_t n);
void dequantize_row_q8_k_scalar(const void* src, float* dst, int64_t n);
void quantize_row_q8_k_scalar(const float* src, void* dst, int64_t n);
void quantize_row_q8_k_avx2(const float* src, void* dst, int64_t n);
void quantize_row_q8_k_avxvnni(const float* src, void* dst, int64_t n);
void quantize_row_q8_k_avx512(const float* src, void* dst, int64_t n);

}  // namespace quant
}  // namespace fulcrum
