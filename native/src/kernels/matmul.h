// Matrix multiplication over the type-traits table: y = x · Wᵀ for a weight matrix W of any
// supported format (rows × cols, row-major as GGUF stores it) and float activations x
// (n_tokens × cols). The activation rows are converted once to the weight format's
// vec_dot_type (F16, BF16, Q8_0, Q8_K…), then each output is one vec_dot of a weight row with an
// activation row. Weight rows are split across the pool's threads; with several activation rows
// (prefill) each thread walks its rows in cache-sized blocks so a block of weights is reused for
// a block of tokens before moving on.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ggml_types.h"
#include "core/thread_pool.h"
#include "quant/packed/repack.h"

namespace fulcrum {

// Holds converted activations between calls; grows on demand, never shrinks. Reserve up front
// (reserve_for) to keep allocation out of timed loops.
struct Scratch {
  std::vector<uint8_t> act;
  uint8_t* reserve(size_t bytes) {
    if (act.size() < bytes) act.resize(bytes);
    return act.data();
  }
};

// Bytes `convert_rows` writes for n_tokens rows of `cols` into format `t`.
size_t converted_bytes(GgmlType t, int64_t cols, int64_t n_tokens);

// dst[t] = x[t] converted to `t` (row stride = converted_bytes(t, cols, 1)); rows split across
// threads. For F32 it copies.
void convert_rows(ThreadPool& pool, GgmlType t, const float* x, int64_t n_tokens, int64_t cols, void* dst);

// y[t * y_stride + r] = vec_dot(W row r, act row t). `act` holds n_tokens rows already in
// type_traits(wtype).vec_dot_type. Preconditions (checked by callers at load time): wtype is
// supported and cols is a multiple of its block size. With several tokens and a format that has
// a tile kernel (TypeTraits::gemm_tile), outputs are computed a tile of rows × tokens at a time
// (same values up to float summation order); use_tiles = false forces one vec_dot per output
// (tests compare the two). rows_as_decode: each token as a one-token call computes it (the
// format's GEMV, else vec_dot), bit for bit — what a speculative verification step needs.
void matmul_prepared(ThreadPool& pool, GgmlType wtype, const void* w, int64_t rows, int64_t cols,
                     const void* act, int64_t n_tokens, float* y, int64_t y_stride, bool use_tiles = true, bool rows_as_decode = false);

// The same product for a weight repacked at load (quant/packed/repack.h: `w` points at the first row
// group; rows a multiple of pf.group_rows, cols of pf.chunk_cols). `act` holds n_tokens rows in
// the format's vec_dot_type as for matmul_prepared; they are arranged for the packed kernels here.
// Every token's outputs are bit for bit what it gives alone (the GEMV and the tile kernel share
// their arithmetic), so there is no rows_as_decode switch.
void matmul_packed(ThreadPool& pool, const quant::PackedFormat& pf, const void* w, int64_t rows, int64_t cols, const void* act,
                   int64_t n_tokens, float* y, int64_t y_stride);

// One matrix of a grouped decode GEMV: y[r] = W row r · the token's activations, for W repacked
// in `pf`'s layout (rows × cols as for matmul_packed; `act` one row in the format's vec_dot_type).
struct PackedGemv {
  const quant::PackedFormat* pf = nullptr;
  const void* w = nullptr;
  int64_t rows = 0, cols = 0;
  const void* act = nullptr;
  float* y = nullptr;
};
// The most ops of a layer compile groups into one pass (Q, K and V; gate and up).
constexpr int kMaxGemvGroup = 4;
// The most matrices one pass takes: a MoE decode step's gate and up of 16 experts (model/moe.cc
// runs more in several passes).
constexpr int kMaxGemvItems = 32;

// One token's products with up to kMaxGemvItems matrices in one pool run: the row groups of all
// of them are claimed from one counter. Matrices that read the same input (a layer's Q, K and V;
// its gate and up; a MoE token's experts) then cost one dispatch and one join instead of one each,
// and the small K and V projections are shared out with Q's rows instead of running on the caller
// alone. Each output is the bits matmul_packed gives it (the same GEMV over the same rows: only
// the split differs).
void gemv_packed_group(ThreadPool& pool, const PackedGemv* items, int n);

// Whether decode may group its GEMVs into such passes (compile's Q/K/V and gate/up, a MoE token's
// experts): FULCRUM_NO_GEMV_GROUPS=1 turns every grouping off, to compare against the ungrouped
// matmuls. Read when asked (at compile and at load), never per step.
bool gemv_groups_enabled();

// Convenience for one-off callers (profiler microbenchmarks, tests): converts x into
// scratch, then multiplies. y is n_tokens × rows. Throws std::invalid_argument when wtype is not
// supported or cols is not a multiple of the block size.
void matmul(ThreadPool& pool, GgmlType wtype, const void* w, int64_t rows, int64_t cols, const float* x,
            int64_t n_tokens, float* y, Scratch& scratch, bool use_tiles = true);

}  // namespace fulcrum
