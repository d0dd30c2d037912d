// The float-format primitives (F32/F16/BF16 dot products, row conversions, f16 axpy) with one
// implementation per ISA. Each ISA file fills the table through a plain extern function;
// select_kernels (core/isa.h) installs the one for the process's choice and float_fns() returns
// it; the rest of the code calls through it.
#pragma once
#include <cstdint>

#include "core/isa.h"
#include "ggml_types.h"

namespace fulcrum {
namespace kernels {

struct FloatFns {
  // out = sum w[i]*x[i]; the weight and activation rows have the same format.
  void (*dot_f32)(int64_t n, float* out, const void* w, const void* x);
  void (*dot_f16)(int64_t n, float* out, const void* w, const void* x);
  void (*dot_bf16)(int64_t n, float* out, const void* w, const void* x);
  // Their prefill tiles (GemmTileFn, float_simd.h gemm_tile_float: float_tile_rows weight rows ×
  // float_tile_cols tokens a call), the same bits as the dots above (which decode calls row by
  // row); nullptr on the scalar table (matmul then calls the dots).
  GemmTileFn gemm_tile_f32, gemm_tile_f16, gemm_tile_bf16;
  int float_tile_rows, float_tile_cols;
  void (*f32_to_f16)(const float* src, void* dst, int64_t n);
  void (*f16_to_f32)(const void* src, float* dst, int64_t n);
  void (*f32_to_bf16)(const float* src, void* dst, int64_t n);
  void (*bf16_to_f32)(const void* src, float* dst, int64_t n);
  // y[i] += a * x[i], x in f16 (the V rows of the KV cache).
  void (*axpy_f16)(int64_t n, float a, const uint16_t* x, float* y);
  // Attention against f16 cache rows, for the nq query heads that share one KV head:
  // scores[j*ld + t] = scale * Σ_d q[j*hd + d] · k[t*kstride + d] for t in [0, n), j in [0, nq).
  // Each K row is loaded once for all nq heads.
  // ahead: while a row is read, the bytes `ahead` bytes on from it are prefetched (0: the row
  // itself, nothing gained). Decode passes the distance to the same rows of the next page, which
  // its walk reads next (kernels/attention.cc says why); the results do not depend on it.
  void (*kq_f16)(int64_t n, int64_t hd, const uint16_t* k, int64_t kstride, const float* q, int64_t nq, float scale,
                 float* scores, int64_t ld, int64_t ahead);
  // out[j*hd + d] += Σ_t p[j*ld + t] · v[t*vstride + d]; each V row is loaded once for all nq heads.
  // ahead: as kq_f16's.
  void (*pv_f16)(int64_t n, int64_t hd, const uint16_t* v, int64_t vstride, const float* p, int64_t nq, int64_t ld,
                 float* out, int64_t ahead);
  // Softmax pieces: max x[i] (-inf for n = 0); x[i] = exp(x[i] - m), returning Σ x[i]; and
  // x[i] = f16-rounded(x[i] · a).
  float (*max_f32)(const float* x, int64_t n);
  float (*exp_sub_sum)(float* x, int64_t n, float m);
  void (*scale_round_f16)(float* x, int64_t n, float a);
  // out[i] = silu(gate[i]) · up[i], silu(g) = g / (1 + e^−g) evaluated through e = exp(−|g|) so
  // the exponential never overflows: g / (1 + e) for g ≥ 0, g·e / (1 + e) for g < 0 (the SIMD
  // versions use the softmax exp above; relative error a few float ulps).
  void (*swiglu)(const float* gate, const float* up, float* out, int64_t n);
  // y[i] = x[i] / sqrt(mean(x²) + eps) · w[i] (w null: no weight). The SIMD versions sum the
  // squares as dot_f32(x, x) does (the scalar one in double, in order): a serial double sum is a
  // chain of dependent adds, ~1 µs for a 896-wide row, 49 rows a token.
  void (*rmsnorm)(const float* x, const float* w, float* y, int64_t n, float eps);
  // Greedy sampling: the index of the largest of x[0..n), n ≥ 1, the first on ties; -1 when any
  // value is NaN or ±Inf (the caller then names the fault).
  int64_t (*argmax_finite)(const float* x, int64_t n);

  // Blocked attention: `rows` query rows at once (the query heads of one KV head for a block of
  // tokens in prefills longer than page-major evaluations; pv_q8_0 also gives pv_block_q8_0 one
  // token's query heads as the rows).
  // Row r is q + (r / rpt) * qstride + (r % rpt) * hd (rpt rows per token, the tokens qstride
  // apart); its scores are scores[r*ld + t] and its output row is laid out like q
  // (out + (r / rpt) * ostride + (r % rpt) * hd). work: kAttnWorkFloats floats of scratch.
  // Both return false, doing nothing, when hd does not fit their register layout (the caller then
  // falls back to kq_f16 / pv_f16 per token).
  //
  // Each score is rounded exactly as kq_f16 rounds it (the same per-lane partial sums, the same
  // reduction tree, then × scale), and each output value is the same chain of f32 FMAs in position
  // order as pv_f16's, so prefill, decode and any split of a prompt give identical bits.
  // scores[r*ld + t] = scale · q_r · k_t for t in [0, n).
  bool (*kq_block_f16)(int64_t n, int64_t hd, const uint16_t* k, int64_t kstride, const float* q, int64_t rows, int64_t rpt,
                       int64_t qstride, float scale, float* scores, int64_t ld, float* work);
  // out_r[d] += Σ_t p[r*ld + t] · v[t*vstride + d] for t in [0, min(n, n_first + r / rpt)): the
  // token of row r sees n_first + (its index) positions of this run (the causal limit).
  bool (*pv_block_f16)(int64_t n, int64_t hd, const uint16_t* v, int64_t vstride, const float* p, int64_t rows, int64_t rpt,
                       int64_t ld, int64_t n_first, float* out, int64_t ostride, float* work);

  // The same four against Q8_0 cache rows (KvFormat::Q8_0, kernels/attention.h): each row is
  // hd / 32 blocks of an f16 scale d and 32 int8 q, rows kstride / vstride bytes apart, value
  // d·q, which f32 holds exactly (11 + 8 significant bits). Each value enters the same FMA chains
  // and trees as an f16 value does in the functions above, so the Q8_0 kernels agree with each
  // other bit for bit as the f16 ones do (decode equals prefill). hd: a multiple of 32 up to 256
  // (the cache refuses others). The SIMD tables always take the blocked V kernel (pv_q8_0 is it
  // with a token's query heads as the rows); kq_block_q8_0 and pv_block_q8_0 return false on the
  // scalar table, as the f16 ones do.
  void (*kq_q8_0)(int64_t n, int64_t hd, const uint8_t* k, int64_t kstride, const float* q, int64_t nq, float scale,
                  float* scores, int64_t ld, int64_t ahead);
  void (*pv_q8_0)(int64_t n, int64_t hd, const uint8_t* v, int64_t vstride, const float* p, int64_t nq, int64_t ld, float* out,
                  float* work, int64_t ahead);
  bool (*kq_block_q8_0)(int64_t n, int64_t hd, const uint8_t* k, int64_t kstride, const float* q, int64_t rows, int64_t rpt,
                        int64_t qstride, float scale, float* scores, int64_t ld, float* work);
  bool (*pv_block_q8_0)(int64_t n, int64_t hd, const uint8_t* v, int64_t vstride, const float* p, int64_t rows, int64_t rpt,
                        int64_t ld, int64_t n_first, float* out, int64_t ostride, float* work);
};

// Scratch floats the blocked attention kernels need: a transposed block of up to 32 K rows of up
// to 256 values (AVX-512), a run of transposed 8-row K blocks (AVX2: kKqRunFloats, 16 KiB), or a
// block of V rows converted to f32 (kAttnVBlockFloats, 16 KiB: stays in L1 while every output row
// of the unit reads it).
constexpr int64_t kAttnWorkFloats = 8192;
constexpr int64_t kAttnVBlockFloats = 4096;

void fill_float_fns_scalar(FloatFns* f);
void fill_float_fns_avx2(FloatFns* f);
void fill_float_fns_avx512(FloatFns* f);

// The table for the process's ISA choice (core/isa.h kernel_choice()).
const FloatFns& float_fns();

// Called by select_kernels only: installs `isa`'s primitives and returns them, then puts the F32,
// F16 and BF16 rows (conversions and dot products from `fns`) into the type-traits table.
const FloatFns& select_float_fns(Isa isa);
void register_float_types(TypeTraits* table, const FloatFns& fns);

}  // namespace kernels
}  // namespace fulcrum
