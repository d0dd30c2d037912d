// Turns a tile kernel with compile-time shape (K::run<R, C>) into a GemmTileFn body that takes
// any rows <= RMAX and cols <= CMAX, so partial tiles at the matrix edges keep the register
// blocking instead of falling back to one vec_dot per output; gemv_any does the same for the
// decode GEMV kernels. Include only from the gemm_* / gemv_* ISA files; everything here has
// internal linkage (ODR rule: no shared inline ISA code).
#pragma once
#include <cstddef>
#include <cstdint>

namespace fulcrum {
namespace quant {
namespace {

template <class K, int R, int C>
void gemm_tile_cols(int cols, int64_t n, float* out, int64_t os, const uint8_t* w, size_t wrb, const uint8_t* a, size_t arb) {
  if (cols == C) {
    K::template run<R, C>(n, out, os, w, wrb, a, arb);
  } else if constexpr (C > 1) {
    gemm_tile_cols<K, R, C - 1>(cols, n, out, os, w, wrb, a, arb);
  }
}

template <class K, int R, int CMAX>
void gemm_tile_rows(int rows, int cols, int64_t n, float* out, int64_t os, const uint8_t* w, size_t wrb, const uint8_t* a, size_t arb) {
  if (rows == R) {
    gemm_tile_cols<K, R, CMAX>(cols, n, out, os, w, wrb, a, arb);
  } else if constexpr (R > 1) {
    gemm_tile_rows<K, R - 1, CMAX>(rows, cols, n, out, os, w, wrb, a, arb);
  }
}

// The GemmTileFn body: rows in [1, RMAX], cols in [1, CMAX] (others write nothing).
template <class K, int RMAX, int CMAX>
void gemm_tile_any(int64_t n, float* out, int64_t out_stride, const void* w, size_t w_row_bytes, int rows,
                   const void* act, size_t act_row_bytes, int cols) {
  gemm_tile_rows<K, RMAX, CMAX>(rows, cols, n, out, out_stride, static_cast<const uint8_t*>(w), w_row_bytes,
                                static_cast<const uint8_t*>(act), act_row_bytes);
}

// The GemvFn body: K::run<R>(n, out, w, w_row_bytes, act) for rows = R in [1, RMAX] (others
// write nothing), so partial passes at a matrix's end keep the register blocking.
template <class K, int R>
void gemv_any(int64_t n, float* out, const void* w, size_t w_row_bytes, int rows, const void* act) {
  if (rows == R) {
    K::template run<R>(n, out, static_cast<const uint8_t*>(w), w_row_bytes, act);
  } else if constexpr (R > 1) {
    gemv_any<K, R - 1>(n, out, w, w_row_bytes, rows, act);
  }
}

}  // namespace
}  // namespace quant
}  // namespace fulcrum
