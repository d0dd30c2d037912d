// The float primitives (float_fns.h) written once over an ISA's vector operations, compiled per
// ISA: float_avx2.cc and float_avx512.cc each define an operations struct `S` and include this
// header, so each instantiation is built with its own translation unit's flags. S provides:
//   V, L (lanes), zero/set1/load/store/add/mul/div/fmadd/max, load_h/load_bf (8 or 16 f16/bf16
//   values to f32), store_h (f32 to f16, round to nearest), round_f16 (through f16 and back),
//   hsum (the lane sum the dot products and softmax use; its tree fixes their rounding),
//   exp_nonpos (e^x for x <= 0), neg_abs (-|g|), mul_if_neg (g < 0 ? g·e : g);
//   kMaskedTail: whether remainders shorter than a vector run through masked loads (AVX-512) or
//   a scalar loop (AVX2), with load_tail/store_tail/max_tail/hmax for the masked form;
//   q8_scale / q8_values (a Q8_0 block's scale broadcast; L of its int8 values times it: exact);
//   kPvHeads (query heads per decode PV tile), kPvRows/kPvTileVectors (blocked PV tile): what
//   the register file holds (16 ymm or 32 zmm).
// The bits a primitive gives are fixed by the operation order written here and by S's trees;
// the ISA files keep what differs in algorithm (the K-side attention kernels: the K row held in
// registers or not, the blocked score tree over 8 or 16 lanes) and fill the table.
// Helpers stay in an anonymous namespace (ISA-file ODR rule).
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/fp16.h"
#include "kernels/float_fns.h"
#include "quant/formats/blocks.h"

namespace fulcrum {
namespace kernels {
namespace {

// Decode attention's prefetch (float_fns.h: kq_f16's `ahead`): the `bytes` bytes of a row at
// `row`, `ahead` bytes on, into L1. With ahead 0 it prefetches the row about to be read, which
// costs an instruction a line: a branch on ahead == 0 here made GCC 12 (-O2 and -O3) drop every
// prefetch of the kernels, taken or not. A prefetch does not fault, so the address needs no check;
// it is formed as an integer, never as a pointer past an object.
inline void prefetch_ahead(const uint8_t* row, int64_t ahead, int64_t bytes) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(row) + static_cast<uintptr_t>(ahead);
  for (int64_t o = 0; o < bytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(at + static_cast<uintptr_t>(o)), _MM_HINT_T0);
}

// How the attention kernels read a KV cache row, by the cache's element format (KvFormat): rows
// are addressed in bytes. load<S>(row, d) gives values [d, d + L) as f32 (d a multiple of L);
// loads<S>(row, d, out) gives the vecs<S>() vectors from d (d a multiple of L · vecs<S>()), the
// unit a loop over a row steps by.
struct F16Rows {
  static constexpr int64_t row_bytes(int64_t hd) { return hd * static_cast<int64_t>(sizeof(uint16_t)); }
  // Where value d of a row starts (d a multiple of L · vecs()).
  static constexpr int64_t offset(int64_t d) { return row_bytes(d); }
  template <class S>
  static constexpr int vecs() { return 1; }
  template <class S>
  static typename S::V load(const uint8_t* row, int64_t d) { return S::load_h(reinterpret_cast<const uint16_t*>(row) + d); }
  template <class S>
  static void loads(const uint8_t* row, int64_t d, typename S::V* out) { out[0] = load<S>(row, d); }
};
// Q8_0 blocks (quant/formats/blocks.h): a block's f16 scale as a broadcast f32 (S::q8_scale), its
// int8 values L at a time times the scale (S::q8_values): d·q, exact in f32. A whole block per
// loads(), so its scale is converted once, not once per vector.
struct Q8Rows {
  static constexpr int64_t kBlockBytes = static_cast<int64_t>(sizeof(quant::block_q8_0));
  static constexpr int64_t row_bytes(int64_t hd) { return hd / quant::QK8_0 * kBlockBytes; }
  static constexpr int64_t offset(int64_t d) { return row_bytes(d); }
  template <class S>
  static constexpr int vecs() { return static_cast<int>(quant::QK8_0 / S::L); }
  template <class S>
  static typename S::V load(const uint8_t* row, int64_t d) {
    const uint8_t* b = row + (d / quant::QK8_0) * kBlockBytes;
    return S::q8_values(b + 2 + d % quant::QK8_0, S::q8_scale(b));
  }
  template <class S>
  static void loads(const uint8_t* row, int64_t d, typename S::V* out) {
    const uint8_t* b = row + (d / quant::QK8_0) * kBlockBytes;
    const typename S::V scale = S::q8_scale(b);
    for (int v = 0; v < vecs<S>(); ++v) out[v] = S::q8_values(b + 2 + v * S::L, scale);
  }
};

// Float weights (F32, F16, BF16) against activations in the same format (their vec_dot_type, as
// llama.cpp rounds them): how a format's row is read and multiplied. A chunk is `chunk` values,
// loaded into a Reg; `madd` adds the products of a weight and an activation chunk into L f32
// lanes; `value` converts one value (the scalar tail). These formats convert a chunk of L values
// to f32 and multiply with fmadd.
struct ConvertedChunks {
  template <class S>
  using Reg = typename S::V;
  template <class S>
  static constexpr int64_t chunk() { return S::L; }
  template <class S>
  static typename S::V madd(typename S::V acc, typename S::V w, typename S::V x) { return S::fmadd(w, x, acc); }
};
struct F32Elems : ConvertedChunks {
  using E = float;
  template <class S>
  static typename S::V load(const E* p) { return S::load(p); }
  static float value(E x) { return x; }
};
struct F16Elems : ConvertedChunks {
  using E = uint16_t;
  template <class S>
  static typename S::V load(const E* p) { return S::load_h(p); }
  static float value(E x) { return fp16_to_fp32(x); }
};
struct Bf16Elems : ConvertedChunks {
  using E = uint16_t;
  template <class S>
  static typename S::V load(const E* p) { return S::load_bf(p); }
  static float value(E x) { return bf16_to_fp32(x); }
};

// The float formats' dot product, in one order for every kernel that computes it, llama.cpp's
// vec_dot order where we had it (F16 and F32 single tokens agree with its logits to ~1e-7; another
// order flips activations that sit at an f16 rounding tie, 3e-4 on the qwen3 F16 parity case):
// each (weight row, token) sums in K vectors of L lanes, chunk j of L elements of the first
// K·L·⌊n / KL⌋ into vector j mod K and the rest of the whole chunks into vector 0 (lane l of a
// vector: one FMA chain over its chunks in increasing order), the vectors added pairwise
// ((v0 + v1) + (v2 + v3) for K = 4), S::hsum, then the last n % L elements in order.
// F16 and F32 take K = 4, BF16 K = 2. vec_dot is the tile at one row and one token: decode reads
// the rows one after another in address order (one stream the hardware prefetchers follow; 8 rows
// side by side read 14 GB/s from DRAM against 30, F16 4864 x 1024). The prefill tile (GemmTileFn)
// takes R weight rows × C tokens a call: each weight vector is converted once for the C tokens and
// each activation vector once for the R rows, R + C conversions per R·C FMAs, where one vec_dot
// per output converts both operands of every FMA and re-reads the weight rows per token. Both
// give the same bits, so a token's outputs do not depend on the batch it is in
// (tile_matches_decode). Rows and tokens past `rows` / `cols` (a matrix's last tile) compute on
// the last valid ones and are not stored.
template <class S, class Fmt, int K, int R, int C>
void gemm_tile_float(int64_t n, float* out, int64_t out_stride, const void* w, size_t w_row_bytes, int rows, const void* act,
                     size_t act_row_bytes, int cols) {
  static_assert(K == 2 || K == 4, "pairwise reduction of 2 or 4 chains");
  using E = typename Fmt::E;
  using V = typename S::V;
  using W = typename Fmt::template Reg<S>;
  constexpr int64_t L = Fmt::template chunk<S>();
  const E* wr[R];
  const E* xr[C];
  for (int r = 0; r < R; ++r) wr[r] = reinterpret_cast<const E*>(static_cast<const uint8_t*>(w) + static_cast<size_t>(r < rows ? r : rows - 1) * w_row_bytes);
  for (int c = 0; c < C; ++c) xr[c] = reinterpret_cast<const E*>(static_cast<const uint8_t*>(act) + static_cast<size_t>(c < cols ? c : cols - 1) * act_row_bytes);
  // Chunk i's products into one chain's accumulators.
  auto step = [&](int64_t i, V(&a)[R][C]) {
    W wv[R];
    for (int r = 0; r < R; ++r) wv[r] = Fmt::template load<S>(wr[r] + i);
    for (int c = 0; c < C; ++c) {
      const W x = Fmt::template load<S>(xr[c] + i);
      for (int r = 0; r < R; ++r) a[r][c] = Fmt::template madd<S>(a[r][c], wv[r], x);
    }
  };
  const int64_t blocks_end = n / (K * L) * (K * L);
  V sums[K][R][C];
  for (int k = 0; k < K; ++k)
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) sums[k][r][c] = S::zero();
  if constexpr (R * C == 1) {
    // One output (vec_dot): the K chains side by side, so their FMAs overlap.
    for (int64_t i = 0; i < blocks_end; i += K * L)
      for (int k = 0; k < K; ++k) step(i + k * L, sums[k]);
  } else {
    // A tile: the chains one pass each over a span of the row (pass k: chunks k, k + K, ... of
    // the span's K-chunk blocks), R·C accumulators a pass instead of K·R·C, so the tile is K times
    // as large in the same registers; the span's part of the tile's rows and tokens (kSpan values
    // each) stays in L1 between the passes.
    constexpr int64_t kSpan = 32 * K * L;
    for (int64_t b0 = 0; b0 < blocks_end; b0 += kSpan) {
      const int64_t b1 = b0 + kSpan < blocks_end ? b0 + kSpan : blocks_end;
      for (int k = 0; k < K; ++k) {
        V a[R][C];
        for (int r = 0; r < R; ++r)
          for (int c = 0; c < C; ++c) a[r][c] = sums[k][r][c];
        for (int64_t i = b0 + k * L; i < b1; i += K * L) step(i, a);
        for (int r = 0; r < R; ++r)
          for (int c = 0; c < C; ++c) sums[k][r][c] = a[r][c];
      }
    }
  }
  for (int64_t i = blocks_end; i + L <= n; i += L) step(i, sums[0]);  // the whole chunks past the blocks
  const int64_t tail = n / L * L;
  for (int r = 0; r < rows && r < R; ++r)
    for (int c = 0; c < cols && c < C; ++c) {
      const V v = K == 4 ? S::add(S::add(sums[0][r][c], sums[1][r][c]), S::add(sums[2 % K][r][c], sums[3 % K][r][c])) : S::add(sums[0][r][c], sums[1][r][c]);
      float s = S::hsum(v);
      for (int64_t j = tail; j < n; ++j) s += Fmt::value(wr[r][j]) * Fmt::value(xr[c][j]);
      out[c * out_stride + r] = s;
    }
}

// vec_dot of the float formats: the tile at one row and one token.
template <class S, class Fmt, int K>
void dot_float(int64_t n, float* out, const void* w, const void* x) {
  gemm_tile_float<S, Fmt, K, 1, 1>(n, out, 1, w, 0, 1, x, 0, 1);
}

template <class S>
void f32_to_f16(const float* src, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + S::L <= n; i += S::L) S::store_h(d + i, S::load(src + i));
  for (; i < n; ++i) d[i] = fp32_to_fp16(src[i]);
}

template <class S>
void f16_to_f32(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + S::L <= n; i += S::L) S::store(dst + i, S::load_h(s + i));
  for (; i < n; ++i) dst[i] = fp16_to_fp32(s[i]);
}

// Scalar on every ISA (both ISA files had the same loop before the template).
void f32_to_bf16(const float* src, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_bf16(src[i]);
}

template <class S>
void bf16_to_f32(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + S::L <= n; i += S::L) S::store(dst + i, S::load_bf(s + i));
  for (; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
}

template <class S>
void axpy_f16(int64_t n, float a, const uint16_t* x, float* y) {
  const typename S::V va = S::set1(a);
  int64_t i = 0;
  for (; i + S::L <= n; i += S::L) S::store(y + i, S::fmadd(va, S::load_h(x + i), S::load(y + i)));
  for (; i < n; ++i) y[i] += a * fp16_to_fp32(x[i]);
}

// Rows [0, JN) of out (JN query heads, stride hd) at dims [L·c0, L·(c0 + CN)) += Σ_t p[j][t] ·
// v[t], the JN × CN accumulators in registers across the whole run of positions (up to kPvHeads
// × 4, V's 4 and the broadcast: what the ISA's register file holds), each element accumulated over
// t in increasing order.
template <class S, int JN, int CN>
inline void pv_regs(int64_t n, const uint16_t* v, int64_t vstride, const float* p, int64_t ld, float* out, int64_t hd, int64_t c0,
                    int64_t ahead) {
  constexpr int64_t L = S::L;
  typename S::V acc[JN][CN];
  for (int j = 0; j < JN; ++j)
    for (int c = 0; c < CN; ++c) acc[j][c] = S::load(out + j * hd + L * (c0 + c));
  for (int64_t t = 0; t < n; ++t) {
    const uint16_t* vr = v + t * vstride + L * c0;
    prefetch_ahead(reinterpret_cast<const uint8_t*>(vr), ahead, CN * L * static_cast<int64_t>(sizeof(uint16_t)));
    typename S::V vv[CN];
    for (int c = 0; c < CN; ++c) vv[c] = S::load_h(vr + L * c);
    for (int j = 0; j < JN; ++j) {
      const typename S::V a = S::set1(p[j * ld + t]);
      for (int c = 0; c < CN; ++c) acc[j][c] = S::fmadd(a, vv[c], acc[j][c]);
    }
  }
  for (int j = 0; j < JN; ++j)
    for (int c = 0; c < CN; ++c) S::store(out + j * hd + L * (c0 + c), acc[j][c]);
}

template <class S, int JN>
inline void pv_heads(int64_t n, const uint16_t* v, int64_t vstride, const float* p, int64_t ld, float* out, int64_t hd, int64_t c0, int64_t cn,
                     int64_t ahead) {
  switch (cn) {
    case 4: pv_regs<S, JN, 4>(n, v, vstride, p, ld, out, hd, c0, ahead); break;
    case 3: pv_regs<S, JN, 3>(n, v, vstride, p, ld, out, hd, c0, ahead); break;
    case 2: pv_regs<S, JN, 2>(n, v, vstride, p, ld, out, hd, c0, ahead); break;
    case 1: pv_regs<S, JN, 1>(n, v, vstride, p, ld, out, hd, c0, ahead); break;
    default: break;
  }
}

// One query head's out[L·c0, L·(c0 + 8)) += Σ_t p[t] · v[t], pv_regs' chain per element: 8
// accumulators a pass and no V registers held (each conversion feeds its FMA), so a head of 128
// values takes two passes over its V rows, not four (pv_regs: 4 vectors) nor a staged f32 block
// and a reload per tile (pv_block_f16, which pays where several query heads share the block).
// 16 heads over 16 KV heads, 1024 positions, 2-vCPU Zen 3, bench.attention medians of 5
// alternating rounds: cache cold 920 -> 899 µs at 1 thread, 551 -> 539 at 2; from L2/L3 470 ->
// 290 and 230 -> 187. Converting K the same way (no staged block) was faster from cache but
// slower from DRAM (1040 and 618 µs cold): the staged conversion keeps more loads in flight.
// 1.3B Q4_0 decode at 1024 positions, same-process A/B: 13.9 -> 14.0 tok/s at 1 thread,
// 21.0 -> 21.8 at 2.
// A run's rows are contiguous (head-major pages) and decode walks whole pages (attention.cc), so
// the hardware prefetchers stream them; a later pass over the same run (a head of 128 values at
// AVX2) finds it in L1/L2.
// Rows: the cache's element format; v and vstride in bytes.
template <class S, class Rows = F16Rows>
inline void pv_one(int64_t n, const uint8_t* v, int64_t vstride, const float* p, float* out, int64_t c0, int64_t ahead) {
  constexpr int64_t L = S::L;
  constexpr int VL = Rows::template vecs<S>();
  typename S::V acc[8];
  for (int c = 0; c < 8; ++c) acc[c] = S::load(out + L * (c0 + c));
  // The pass's part of each row starts here; its vectors are then at fixed offsets (with c0 in
  // each load's offset, GCC kept eight run-time offsets in registers and on the stack).
  const uint8_t* v0 = v + Rows::offset(L * c0);
  for (int64_t t = 0; t < n; ++t) {
    const uint8_t* vr = v0 + t * vstride;
    prefetch_ahead(vr, ahead, Rows::offset(8 * L));
    const typename S::V a = S::set1(p[t]);
    // One vector a load (F16) as a plain expression: with the one-element array of the block
    // form, GCC kept the accumulators in memory and copied them every position.
    if constexpr (VL == 1) {
      for (int c = 0; c < 8; ++c) acc[c] = S::fmadd(a, Rows::template load<S>(vr, L * c), acc[c]);
    } else {
      for (int c = 0; c < 8; c += VL) {
        typename S::V x[VL];
        Rows::template loads<S>(vr, L * c, x);
        for (int u = 0; u < VL; ++u) acc[c + u] = S::fmadd(a, x[u], acc[c + u]);
      }
    }
  }
  for (int c = 0; c < 8; ++c) S::store(out + L * (c0 + c), acc[c]);
}

// out[j] += Σ_t p[j][t] · v[t], each output element accumulated over t in increasing order (the
// same fma per element and position as the multi-token path: decode and verification rows agree
// bit for bit). Tiles of up to kPvHeads heads × 4 vectors keep their outputs in registers across
// the run of positions; V is re-read once per tile, from L1/L2. (Before, several heads' outputs
// were loaded and stored at every position.) Head sizes that are not whole vectors, or above 16
// vectors, take the scalar loop.
template <class S>
void pv_f16(int64_t n, int64_t hd, const uint16_t* v, int64_t vstride, const float* p, int64_t nq, int64_t ld, float* out, int64_t ahead) {
  constexpr int64_t L = S::L;
  constexpr int H = S::kPvHeads;
  if (hd % L != 0 || hd > 16 * L) {
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < nq; ++j)
        for (int64_t d = 0; d < hd; ++d) out[j * hd + d] += p[j * ld + t] * fp16_to_fp32(v[t * vstride + d]);
    return;
  }
  const int64_t nc = hd / L;
  if (nq == 1 && nc % 8 == 0) {
    // One query head: 8 accumulators a pass, each V vector converted where its FMA takes it.
    for (int64_t c0 = 0; c0 < nc; c0 += 8)
      pv_one<S>(n, reinterpret_cast<const uint8_t*>(v), vstride * static_cast<int64_t>(sizeof(uint16_t)), p, out, c0, ahead);
    return;
  }
  // The heads in as few tiles as fit the registers, as even as can be (7 heads at up to 7 a
  // tile: one tile; 8: 4 + 4), so each V vector is converted once per tile.
  const int64_t tiles = (nq + H - 1) / H;
  for (int64_t c0 = 0; c0 < nc; c0 += 4) {
    const int64_t cn = nc - c0 < 4 ? nc - c0 : 4;
    for (int64_t i = 0, j = 0; i < tiles; ++i) {
      const int64_t jn = (nq - j) / (tiles - i);
      const float* pj = p + j * ld;
      float* oj = out + j * hd;
      switch (jn) {
        case 7: if constexpr (H >= 7) pv_heads<S, 7>(n, v, vstride, pj, ld, oj, hd, c0, cn, ahead); break;
        case 6: if constexpr (H >= 6) pv_heads<S, 6>(n, v, vstride, pj, ld, oj, hd, c0, cn, ahead); break;
        case 5: if constexpr (H >= 5) pv_heads<S, 5>(n, v, vstride, pj, ld, oj, hd, c0, cn, ahead); break;
        case 4: if constexpr (H >= 4) pv_heads<S, 4>(n, v, vstride, pj, ld, oj, hd, c0, cn, ahead); break;
        case 3: if constexpr (H >= 3) pv_heads<S, 3>(n, v, vstride, pj, ld, oj, hd, c0, cn, ahead); break;
        case 2: if constexpr (H >= 2) pv_heads<S, 2>(n, v, vstride, pj, ld, oj, hd, c0, cn, ahead); break;
        case 1: pv_heads<S, 1>(n, v, vstride, pj, ld, oj, hd, c0, cn, ahead); break;
        default: break;
      }
      j += jn;
    }
  }
}

template <class S>
void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  const typename S::V one = S::set1(1.0f);
  int64_t i = 0;
  for (; i + S::L <= n; i += S::L) {
    const typename S::V g = S::load(gate + i);
    const typename S::V e = S::exp_nonpos(S::neg_abs(g));  // exp(−|g|)
    const typename S::V num = S::mul_if_neg(g, e);
    S::store(out + i, S::mul(S::div(num, S::add(one, e)), S::load(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

// Σ x² in four vectors of lanes (chunk j of L values into vector j mod 4), S's hsum tree of
// their sum, the masked (AVX-512) or scalar (AVX2) tail: rmsnorm's order.
template <class S>
float sum_squares(const float* x, int64_t n) {
  constexpr int64_t L = S::L;
  typename S::V s0 = S::zero(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    s0 = S::fmadd(S::load(x + i), S::load(x + i), s0);
    s1 = S::fmadd(S::load(x + i + L), S::load(x + i + L), s1);
    s2 = S::fmadd(S::load(x + i + 2 * L), S::load(x + i + 2 * L), s2);
    s3 = S::fmadd(S::load(x + i + 3 * L), S::load(x + i + 3 * L), s3);
  }
  for (; i + L <= n; i += L) s0 = S::fmadd(S::load(x + i), S::load(x + i), s0);
  if constexpr (S::kMaskedTail) {
    if (i < n) s1 = S::fmadd(S::load_tail(x + i, n - i), S::load_tail(x + i, n - i), s1);
    return S::hsum(S::add(S::add(s0, s1), S::add(s2, s3)));
  } else {
    float sum = S::hsum(S::add(S::add(s0, s1), S::add(s2, s3)));
    for (; i < n; ++i) sum += x[i] * x[i];
    return sum;
  }
}

template <class S>
void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps) {
  constexpr int64_t L = S::L;
  const float sum = sum_squares<S>(x, n);
  const float scale = 1.0f / std::sqrt(sum / static_cast<float>(n) + eps);
  const typename S::V sc = S::set1(scale);
  int64_t i = 0;
  if (w) {
    for (; i + L <= n; i += L) S::store(y + i, S::mul(S::mul(S::load(x + i), sc), S::load(w + i)));
    for (; i < n; ++i) y[i] = (x[i] * scale) * w[i];
  } else {
    for (; i + L <= n; i += L) S::store(y + i, S::mul(S::load(x + i), sc));
    for (; i < n; ++i) y[i] = x[i] * scale;
  }
}

template <class S>
float max_f32(const float* x, int64_t n) {
  constexpr int64_t L = S::L;
  typename S::V m0 = S::set1(-__builtin_inff()), m1 = m0;
  int64_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    m0 = S::max(m0, S::load(x + i));
    m1 = S::max(m1, S::load(x + i + L));
  }
  if constexpr (S::kMaskedTail) {
    if (i + L <= n) m0 = S::max(m0, S::load(x + i)), i += L;
    if (i < n) m1 = S::max_tail(m1, x + i, n - i);
    return S::hmax(S::max(m0, m1));
  } else {
    float mx = S::hmax(S::max(m0, m1));
    for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
    return mx;
  }
}

// Decode's K side for a head size of NC vectors (kq_f16 of the ISA files, head sizes whose NC
// is known at compile time, so a block's rows are fixed offsets): L positions at a time. Their K
// rows are converted to f32 once into an L1 block; then per query head, L accumulators take the
// same products and FMA chain as a one-position dot (lane l sums q[d]·k[d] over d ≡ l mod L, a
// product then FMAs in increasing d), and S::hsum_lanes adds all L in S::hsum's tree, so every
// score keeps its bits (float_fns.h: decode equals prefill). A horizontal sum per (head,
// position), as before, cost four shuffles on Zen 4's one 512-bit shuffle pipe: on the 0.5B shape
// (7 heads a KV head, 1 thread, 256-856 positions) this kernel took 7.1 % of decode's perf
// samples that way and 4.7 % this way at AVX-512; 1.10 → 0.84 of pv_f16's time at AVX2.
// Rows: the cache's element format (F16Rows, Q8Rows); k and kstride in bytes.
template <class S, int NC, class Rows = F16Rows>
void kq_lanes(int64_t n, const uint8_t* k, int64_t kstride, const float* q, int64_t nq, float scale, float* scores, int64_t ld,
              int64_t ahead) {
  constexpr int64_t L = S::L;
  constexpr int64_t hd = L * NC;
  alignas(64) float kf[L * hd];
  const typename S::V vs = S::set1(scale);
  constexpr int VL = Rows::template vecs<S>();
  int64_t t_staged = 0;
  if (nq == 1 && std::is_same_v<Rows, F16Rows>) {
    // One query head (MHA): no other head shares a converted block, so each K vector is converted
    // where its FMA takes it, row after row in address order (the same product and FMA chain per
    // lane, c increasing). The order matters more than the staging: 16 heads of 128 over 16 KV
    // heads, 1 thread, bench.attention medians of 400, 2-vCPU Zen 4 (AVX-512): staged 150 / 507 µs
    // at 280 / 1024 positions from DRAM, 61 / 216 from L3; converted in place walking a vector
    // of every row before the next vector (a 256-byte stride) 194 / 666 and 52 / 182; row by row
    // 98 / 298 and 50 / 173. AVX2: 129 / 414, 60 / 216 staged; 124 / 390, 54 / 194 row by row.
    // Q8_0 rows stay staged: at AVX2 row by row was slower (92 -> 96 / 280 -> 310 µs from DRAM,
    // 73 -> 79 from L3), at AVX-512 5 % faster.
    for (; t_staged + L <= n; t_staged += L) {
      const uint8_t* kb = k + t_staged * kstride;
      typename S::V acc[L];
      for (int i = 0; i < L; ++i) {
        prefetch_ahead(kb + i * kstride, ahead, Rows::offset(hd));
        for (int c = 0; c < NC; c += VL) {
          typename S::V x[VL];
          Rows::template loads<S>(kb + i * kstride, L * c, x);
          for (int u = 0; u < VL; ++u) acc[i] = c + u == 0 ? S::mul(S::load(q), x[0]) : S::fmadd(S::load(q + L * (c + u)), x[u], acc[i]);
        }
      }
      S::store_first(scores + t_staged, S::mul(S::hsum_lanes(acc), vs), L);
    }
  }
  for (int64_t t0 = t_staged; t0 < n; t0 += L) {
    const int64_t m = n - t0 < L ? n - t0 : L;
    for (int64_t i = 0; i < L; ++i) {
      const uint8_t* kr = k + (t0 + i) * kstride;
      if (i < m) prefetch_ahead(kr, ahead, Rows::offset(hd));
      if constexpr (VL == 1) {
        for (int c = 0; c < NC; ++c) S::store(kf + i * hd + L * c, i < m ? Rows::template load<S>(kr, L * c) : S::zero());
      } else {
        for (int c = 0; c < NC; c += VL) {
          typename S::V v[VL];
          if (i < m) Rows::template loads<S>(kr, L * c, v);
          for (int u = 0; u < VL; ++u) S::store(kf + i * hd + L * (c + u), i < m ? v[u] : S::zero());
        }
      }
    }
    // The heads read the block through a pointer the compiler cannot equate with kf. Otherwise,
    // seeing the block unchanged across the heads, it loads its L·NC vectors once for all of
    // them, cannot keep 64 vectors in registers, and copies the whole block to spill slots every
    // block (the AVX-512 build did the same: 185 vector moves in kq_f16 against 39 now). 2-vCPU
    // Zen 3, 7 heads over one KV head of 1536 positions at a head size of 64, hot, medians of
    // 400: 31.7 -> 29.1 µs (24.5 with full blocks stored plainly, store_first).
    const float* kb = kf;
    __asm__("" : "+r"(kb));
    for (int64_t j = 0; j < nq; ++j) {
      const float* qj = q + j * hd;
      typename S::V acc[L];
      const typename S::V q0 = S::load(qj);
      for (int i = 0; i < L; ++i) acc[i] = S::mul(q0, S::load(kb + i * hd));
      for (int c = 1; c < NC; ++c) {
        const typename S::V qc = S::load(qj + L * c);
        for (int i = 0; i < L; ++i) acc[i] = S::fmadd(qc, S::load(kb + i * hd + L * c), acc[i]);
      }
      S::store_first(scores + j * ld + t0, S::mul(S::hsum_lanes(acc), vs), m);
    }
  }
}

// Greedy sampling's pick: the index of the largest of n ≥ 1 values, the first on ties (as a scalar
// loop with a strict >), or -1 when any value is NaN or ±Inf. Two passes over the row: the max
// (with v·0 summed alongside, 0 for finite v and NaN otherwise), then the first lane equal to it.
template <class S>
int64_t argmax_finite(const float* x, int64_t n) {
  constexpr int64_t L = S::L;
  typename S::V m0 = S::set1(-__builtin_inff()), m1 = m0, z = S::zero();
  const typename S::V zero = S::zero();
  int64_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    const typename S::V a = S::load(x + i), b = S::load(x + i + L);
    m0 = S::max(m0, a);
    m1 = S::max(m1, b);
    z = S::fmadd(a, zero, S::fmadd(b, zero, z));
  }
  for (; i + L <= n; i += L) {
    const typename S::V a = S::load(x + i);
    m0 = S::max(m0, a);
    z = S::fmadd(a, zero, z);
  }
  float mx = S::hmax(S::max(m0, m1));
  float tail_z = 0;
  for (; i < n; ++i) {
    mx = x[i] > mx ? x[i] : mx;
    tail_z += x[i] * 0.0f;
  }
  if (!(S::hsum(z) + tail_z == 0.0f)) return -1;
  const typename S::V vm = S::set1(mx);
  for (i = 0; i + L <= n; i += L) {
    const int k = S::first_eq(S::load(x + i), vm);
    if (k >= 0) return i + k;
  }
  for (; i < n; ++i)
    if (x[i] == mx) return i;
  return -1;  // not reached: mx is one of the values
}

template <class S>
float exp_sub_sum(float* x, int64_t n, float m) {
  const typename S::V vm = S::set1(m);
  typename S::V acc = S::zero();
  int64_t i = 0;
  for (; i + S::L <= n; i += S::L) {
    const typename S::V e = S::exp_nonpos(S::sub(S::load(x + i), vm));
    S::store(x + i, e);
    acc = S::add(acc, e);
  }
  if constexpr (S::kMaskedTail) {
    if (i < n) acc = S::add(acc, S::exp_sub_tail(x + i, n - i, vm));
    return S::hsum(acc);
  } else {
    float sum = S::hsum(acc);
    for (; i < n; ++i) {
      x[i] = std::exp(x[i] - m);
      sum += x[i];
    }
    return sum;
  }
}

template <class S>
void scale_round_f16(float* x, int64_t n, float a) {
  const typename S::V va = S::set1(a);
  int64_t i = 0;
  for (; i + S::L <= n; i += S::L) S::store(x + i, S::round_f16(S::mul(S::load(x + i), va)));
  for (; i < n; ++i) x[i] = fp16_to_fp32(fp32_to_fp16(x[i] * a));
}

// ---- Blocked prefill attention, V side (see float_fns.h) ----

// R output rows × W vectors of L columns in registers; every row runs an FMA chain in position
// order (pv_f16's), over [0, lim[r]) of the converted V block vf (rows hd apart). lim is
// nondecreasing in r (rows are ordered by token), so [0, lim[0]) is common to all rows.
template <class S, int R, int W>
inline void pv_tile(const float* vf, int64_t hd, int64_t col, const float* const* pr, float* const* orow, const int64_t* lim) {
  constexpr int64_t L = S::L;
  typename S::V acc[R][W];
  for (int r = 0; r < R; ++r)
    for (int w = 0; w < W; ++w) acc[r][w] = S::load(orow[r] + col + L * w);
  const int64_t lo = lim[0];
  for (int64_t t = 0; t < lo; ++t) {
    const float* vt = vf + t * hd + col;
    typename S::V vv[W];
    for (int w = 0; w < W; ++w) vv[w] = S::load(vt + L * w);
    for (int r = 0; r < R; ++r) {
      const typename S::V a = S::set1(pr[r][t]);
      for (int w = 0; w < W; ++w) acc[r][w] = S::fmadd(a, vv[w], acc[r][w]);
    }
  }
  for (int r = 1; r < R; ++r)
    for (int64_t t = lo; t < lim[r]; ++t) {
      const typename S::V a = S::set1(pr[r][t]);
      for (int w = 0; w < W; ++w) acc[r][w] = S::fmadd(a, S::load(vf + t * hd + col + L * w), acc[r][w]);
    }
  for (int r = 0; r < R; ++r)
    for (int w = 0; w < W; ++w) S::store(orow[r] + col + L * w, acc[r][w]);
}

template <class S, int R>
inline void pv_rows(const float* vf, int64_t hd, const float* p, int64_t r0, int64_t rpt, int64_t ld, int64_t first, int64_t m, float* out,
                    int64_t ostride) {
  constexpr int64_t L = S::L;
  const float* pr[R];
  float* orow[R];
  int64_t lim[R];
  for (int r = 0; r < R; ++r) {
    const int64_t row = r0 + r;
    pr[r] = p + row * ld;
    orow[r] = out + (row / rpt) * ostride + (row % rpt) * hd;
    const int64_t l = first + row / rpt;
    lim[r] = l < 0 ? 0 : (l > m ? m : l);
  }
  if (lim[R - 1] == 0) return;
  int64_t col = 0;
  if constexpr (S::kPvTileVectors == 4) {
    for (; col + 4 * L <= hd; col += 4 * L) pv_tile<S, R, 4>(vf, hd, col, pr, orow, lim);
    if (col + 2 * L <= hd) pv_tile<S, R, 2>(vf, hd, col, pr, orow, lim), col += 2 * L;
  } else {
    static_assert(S::kPvTileVectors == 2, "V tiles are 2 or 4 vectors wide");
    for (; col + 2 * L <= hd; col += 2 * L) pv_tile<S, R, 2>(vf, hd, col, pr, orow, lim);
  }
  if (col < hd) pv_tile<S, R, 1>(vf, hd, col, pr, orow, lim);
}

// Rows: the cache's element format; v and vstride in bytes; hd a multiple of L, at most 256 or
// 16 vectors (the converted block holds at least 16 rows). kAhead: decode's pv_q8_0, which
// prefetches each row `ahead` bytes on (float_fns.h); prefill's blocks do not.
template <class S, class Rows, bool kAhead = false>
void pv_block_rows(int64_t n, int64_t hd, const uint8_t* v, int64_t vstride, const float* p, int64_t rows, int64_t rpt, int64_t ld,
                   int64_t n_first, float* out, int64_t ostride, float* work, int64_t ahead) {
  constexpr int64_t L = S::L;
  constexpr int R = S::kPvRows;
  const int64_t block = kAttnVBlockFloats / hd;  // V rows converted to f32 at a time (≥ 16)
  const int64_t last_token = (rows - 1) / rpt;
  for (int64_t b = 0; b < n; b += block) {
    const int64_t first = n_first - b;            // positions of this block the first token sees
    int64_t m = n - b < block ? n - b : block;
    if (first + last_token < m) m = first + last_token;  // no row reads past the last token's limit
    if (m <= 0) break;
    constexpr int VL = Rows::template vecs<S>();
    for (int64_t i = 0; i < m; ++i) {
      const uint8_t* vr = v + (b + i) * vstride;
      if constexpr (kAhead) prefetch_ahead(vr, ahead, Rows::offset(hd));
      if constexpr (VL == 1) {
        for (int64_t d = 0; d < hd; d += L) S::store(work + i * hd + d, Rows::template load<S>(vr, d));
      } else {
        for (int64_t d = 0; d < hd; d += L * VL) {
          typename S::V x[VL];
          Rows::template loads<S>(vr, d, x);
          for (int u = 0; u < VL; ++u) S::store(work + i * hd + d + L * u, x[u]);
        }
      }
    }
    const float* pb = p + b;
    int64_t r = 0;
    for (; r + R <= rows; r += R) pv_rows<S, R>(work, hd, pb, r, rpt, ld, first, m, out, ostride);
    switch (rows - r) {
      case 5: if constexpr (R > 5) pv_rows<S, 5>(work, hd, pb, r, rpt, ld, first, m, out, ostride); break;
      case 4: if constexpr (R > 4) pv_rows<S, 4>(work, hd, pb, r, rpt, ld, first, m, out, ostride); break;
      case 3: if constexpr (R > 3) pv_rows<S, 3>(work, hd, pb, r, rpt, ld, first, m, out, ostride); break;
      case 2: pv_rows<S, 2>(work, hd, pb, r, rpt, ld, first, m, out, ostride); break;
      case 1: pv_rows<S, 1>(work, hd, pb, r, rpt, ld, first, m, out, ostride); break;
      default: break;
    }
  }
}

template <class S>
bool pv_block_f16(int64_t n, int64_t hd, const uint16_t* v, int64_t vstride, const float* p, int64_t rows, int64_t rpt, int64_t ld,
                  int64_t n_first, float* out, int64_t ostride, float* work) {
  if (hd % S::L != 0 || hd > 16 * S::L) return false;  // pv_f16's own fallback order applies
  pv_block_rows<S, F16Rows>(n, hd, reinterpret_cast<const uint8_t*>(v), vstride * static_cast<int64_t>(sizeof(uint16_t)), p, rows, rpt, ld,
                            n_first, out, ostride, work, 0);
  return true;
}

// ---- Attention against a Q8_0 cache (float_fns.h) ----

// Head sizes are multiples of 32 up to 256 (the cache's check), so every one has a kq_lanes and
// the blocked V kernel: no per-ISA fallback order to match.
template <class S>
void kq_q8_0(int64_t n, int64_t hd, const uint8_t* k, int64_t kstride, const float* q, int64_t nq, float scale, float* scores, int64_t ld,
             int64_t ahead) {
  constexpr int P = static_cast<int>(32 / S::L);  // vectors per 32 values
  switch (hd / 32) {
    case 1: return kq_lanes<S, P, Q8Rows>(n, k, kstride, q, nq, scale, scores, ld, ahead);
    case 2: return kq_lanes<S, 2 * P, Q8Rows>(n, k, kstride, q, nq, scale, scores, ld, ahead);
    case 3: return kq_lanes<S, 3 * P, Q8Rows>(n, k, kstride, q, nq, scale, scores, ld, ahead);
    case 4: return kq_lanes<S, 4 * P, Q8Rows>(n, k, kstride, q, nq, scale, scores, ld, ahead);
    case 5: return kq_lanes<S, 5 * P, Q8Rows>(n, k, kstride, q, nq, scale, scores, ld, ahead);
    case 6: return kq_lanes<S, 6 * P, Q8Rows>(n, k, kstride, q, nq, scale, scores, ld, ahead);
    case 7: return kq_lanes<S, 7 * P, Q8Rows>(n, k, kstride, q, nq, scale, scores, ld, ahead);
    case 8: return kq_lanes<S, 8 * P, Q8Rows>(n, k, kstride, q, nq, scale, scores, ld, ahead);
    default: break;
  }
}

template <class S>
bool pv_block_q8_0(int64_t n, int64_t hd, const uint8_t* v, int64_t vstride, const float* p, int64_t rows, int64_t rpt, int64_t ld,
                   int64_t n_first, float* out, int64_t ostride, float* work) {
  if (hd % 32 != 0 || hd > 256) return false;
  pv_block_rows<S, Q8Rows>(n, hd, v, vstride, p, rows, rpt, ld, n_first, out, ostride, work, 0);
  return true;
}

// One token: its query heads are the blocked kernel's rows (each V row converted once for all of
// them), every output element the same chain as in prefill.
// One query head (MHA) takes pv_one, as pv_f16 does: no staged block to share, each block of V
// converted where its FMAs take it (the same chain per element as the blocked kernel's).
template <class S>
void pv_q8_0(int64_t n, int64_t hd, const uint8_t* v, int64_t vstride, const float* p, int64_t nq, int64_t ld, float* out, float* work,
             int64_t ahead) {
  const int64_t nc = hd / S::L;
  if (nq == 1 && nc % 8 == 0 && hd % 32 == 0 && hd <= 256) {
    for (int64_t c0 = 0; c0 < nc; c0 += 8) pv_one<S, Q8Rows>(n, v, vstride, p, out, c0, ahead);
    return;
  }
  if (hd % 32 != 0 || hd > 256) return;  // the cache refuses these (kv_format_refusal)
  pv_block_rows<S, Q8Rows, true>(n, hd, v, vstride, p, nq, nq, ld, n, out, nq * hd, work, ahead);
}

// The table entries common to every SIMD ISA; the ISA file adds kq_f16, kq_block_f16 and
// kq_block_q8_0.
template <class S>
void fill_float_fns_simd(FloatFns* f) {
  f->dot_f32 = dot_float<S, F32Elems, 4>;
  f->dot_f16 = dot_float<S, F16Elems, 4>;
  f->dot_bf16 = dot_float<S, Bf16Elems, 2>;
  f->gemm_tile_f32 = gemm_tile_float<S, F32Elems, 4, S::kFloatTileRows, S::kFloatTileCols>;
  f->gemm_tile_f16 = gemm_tile_float<S, F16Elems, 4, S::kFloatTileRows, S::kFloatTileCols>;
  f->gemm_tile_bf16 = gemm_tile_float<S, Bf16Elems, 2, S::kFloatTileRows, S::kFloatTileCols>;
  f->float_tile_rows = S::kFloatTileRows;
  f->float_tile_cols = S::kFloatTileCols;
  f->f32_to_f16 = f32_to_f16<S>;
  f->f16_to_f32 = f16_to_f32<S>;
  f->f32_to_bf16 = f32_to_bf16;
  f->bf16_to_f32 = bf16_to_f32<S>;
  f->axpy_f16 = axpy_f16<S>;
  f->pv_f16 = pv_f16<S>;
  f->max_f32 = max_f32<S>;
  f->exp_sub_sum = exp_sub_sum<S>;
  f->swiglu = swiglu<S>;
  f->rmsnorm = rmsnorm<S>;
  f->argmax_finite = argmax_finite<S>;
  f->scale_round_f16 = scale_round_f16<S>;
  f->pv_block_f16 = pv_block_f16<S>;
  f->kq_q8_0 = kq_q8_0<S>;
  f->pv_q8_0 = pv_q8_0<S>;
  f->pv_block_q8_0 = pv_block_q8_0<S>;
}

}  // namespace
}  // namespace kernels
}  // namespace fulcrum
