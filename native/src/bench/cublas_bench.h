// GPU compute measurements through cuBLAS, loaded at run time (dlopen libcublas.so.13/12/11):
// FP16 GEMM (compute peak reached), FP16 GEMV (weight streaming), and the two batched
// products of one decode-attention step (q·Kᵀ and p·V per head; softmax omitted, it is a small
// share of the bytes). This project has no CUDA kernels of its own yet, so cuBLAS is what an
// engine on this GPU would run for these shapes. Times are host steady-clock time around
// enqueue + synchronise, median over runs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bench/cancel.h"
#include "bench/memory.h"

namespace fulcrum {
namespace bench {

struct CublasSamples {
  std::string library;  // which libcublas was loaded
  int64_t gemm_m = 0, gemm_n = 0, gemm_k = 0;
  std::vector<int64_t> gemm;        // ns per FP16 GEMM m×n×k
  int64_t gemv_rows = 0, gemv_cols = 0;
  std::vector<int64_t> gemv;        // ns per FP16 GEMV rows×cols
  int64_t attn_heads = 0, attn_kv = 0, attn_head_dim = 0;
  std::vector<int64_t> attention;   // ns per decode-attention step (both batched products)
};

// Throws std::runtime_error naming the missing library or the failing call.
CublasSamples bench_cublas(int device, const RunPlan& plan, const CancelToken& cancel);

}  // namespace bench
}  // namespace fulcrum
