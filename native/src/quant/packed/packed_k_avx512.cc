// Q6_K in groups of 4 rows (q6_kx4: repack.h) × Q8_K activations as they are, AVX-512 VNNI: a
// zmm's 128-bit lane r holds row r, the GEMV is the tile at one token (every (row, token) output
// is the same bits alone or in a batch), and a row's four lanes are added (l0 + l2) + (l1 + l3)
// at the end. (Q4_K and Q5_K on AVX-512 are in 16-row groups, packed_k16_avx512.cc; this file's
// q4_kx4 kernel, which Q5_K ran last, went with them; on AVX2 they are in 8-row groups,
// packed_k8_avx2.cc. Q6_K in 16 rows was measured and not kept: see packed_k16_avx512.cc.)
//
// Per quarter of the super-block (64 elements of a row, four sub-blocks of 16) three 64-byte
// loads give the four rows' three pieces (repack.h), which make four vectors of 6-bit values
// (unsigned, 0..63) for the four rows at once; the token's 16 matching activations are one
// 16-byte broadcast shared by the four rows; the rows' int8 scales are widened to int16 once per
// super-block and each sub-block's spread over its row's lane by one vpshufb.
//   - per token and quarter: four broadcasts, four vpmaddubsw (6-bit × int8, pairs at most
//     2·63·128 in int16, no saturation), four vpdpwssd by the sub-block scales (exact int32);
//   - per token and super-block: the -32 offset as -32·Σ scale·bsum (two vpmaddwd of the rows'
//     scales by the token's 16 sums), one conversion and one fma by the lane vector d·dy.
// The GEMV reads one stream (gemv below), or two on Intel CPUs (gemv_two_streams). Whether the one stream also prefetches ahead of it
// (prefetchnta), and how far (1.5 KiB on Zen 4, 3 KiB on Zen 5), is
// KernelChoice::q6_k_gemv_prefetch_bytes (core/isa.h): both gain, the host the kernel was first
// measured on did not (there 512 B ahead measured the same as none, 2 KiB 40 % slower).
// The integer sums are vec_dot_q6_k's; the float steps (per super-block and lane, then the four
// lanes of a row) are ordered differently from it, within the rounding of its own float sums
// (repack.test.ts bounds the difference).
#include "quant/formats/blocks.h"
#include "quant/packed/repack.h"
#define QUANT_ISA avx512
#include "quant/dot/simd_avx512.h"

namespace fulcrum {
namespace quant {
namespace {

inline __m512i bcast16(const int8_t* p) { return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// Row r's four lanes: (l0 + l2) + (l1 + l3), into out[r].
inline void store_rows(__m512 acc, float* out) {
  __m512 t = _mm512_add_ps(acc, _mm512_permute_ps(acc, 0x4E));
  t = _mm512_add_ps(t, _mm512_permute_ps(t, 0xB1));
  _mm_storeu_ps(out, _mm512_castps512_ps128(_mm512_maskz_compress_ps(0x1111, t)));
}

namespace q6k {

constexpr size_t kBodyAt = 64, kDAt = 832;  // repack.h: scales, quarters, d

// vpshufb controls (per 128-bit lane, the row's 16 scale bytes): the scales 0-7 / 8-15 as eight
// int16 each (each into the high byte of an int16, low byte zero, then an arithmetic shift right
// by 8 sign-extends it), once per super-block; then int16 k of those spread over its lane
// (word[k]), one vpshufb per sub-block.
// Built at compile time (constexpr): this file's code must not run on a CPU without AVX-512,
// and a dynamic initializer would run at load on every CPU.
struct Controls {
  alignas(64) uint8_t word[8][64] = {};
  alignas(64) uint8_t scales_lo[64] = {};
  alignas(64) uint8_t scales_hi[64] = {};
  constexpr Controls() {
    for (int k = 0; k < 8; ++k)
      for (int b = 0; b < 64; ++b) word[k][b] = static_cast<uint8_t>(2 * k + b % 2);
    for (int b = 0; b < 64; ++b) {
      scales_lo[b] = b % 2 == 1 ? static_cast<uint8_t>((b % 16) / 2) : 0x80;
      scales_hi[b] = b % 2 == 1 ? static_cast<uint8_t>(8 + (b % 16) / 2) : 0x80;
    }
  }
};
constexpr Controls kCtl{};

inline __m512i spread_scale(__m512i sc8, const uint8_t* ctl) { return _mm512_srai_epi16(_mm512_shuffle_epi8(sc8, _mm512_load_si512(ctl)), 8); }

// kAhead: bytes ahead of each stream's super-block the walk prefetches (with kHint: prefetchnta,
// or prefetcht0 on Intel, KernelChoice::q6_k_gemv_prefetch_l1), 0 for none.
// On the Zen 4 (AVX-512, 2 vCPUs), bench.matmul 896 x 4864 Q6_K from a 256 MiB ring, 1 thread,
// alternating processes, 5 rounds: none 19.8-25.2 GB/s, 512 B 24.9-25.7, 1 KiB 26.2-27.6,
// 1.5 KiB 27.7-29.7 (one slow round 19.2), 2 KiB 26.3-29.2 (read probe 27-30); from L3 37.7
// against 37.4 (the prefetches' own cost). On a Zen 5 3 KiB (core/isa.h has the sweep).
template <size_t kAhead, int kHint = _MM_HINT_NTA>
struct KernelT {
  static constexpr size_t kSbBytes = 4 * sizeof(block_q6_K);  // 840: one super-block of four rows

  // One row group (four rows) × C tokens (token c's Q8_K row at act + c·as, its outputs at out + c·os).
  template <int C>
  static void run(int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as) {
    const uint8_t* const ws[1] = {w};
    float* const outs[1] = {out};
    runs<C, 1>(n, outs, os, ws, act, as);
  }

  // S row groups side by side (group s at ws[s], its outputs at outs[s]), super-block by
  // super-block: S weight streams in flight. Each group keeps its own accumulators and the
  // order of its sums, so its outputs are the bits it has alone.
  template <int C, int S>
  static void runs(int64_t n, float* const* outs, int64_t os, const uint8_t* const* ws, const uint8_t* act, size_t as) {
    const int64_t nsb = n / QK_K;
    const __m512i m3f = _mm512_set1_epi8(0x3F), m03 = _mm512_set1_epi8(0x03), m0f = _mm512_set1_epi8(0x0F);
    const __m512i spread_d = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    __m512 acc_of[S][C];
    for (int s = 0; s < S; ++s)
      for (int c = 0; c < C; ++c) acc_of[s][c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nsb; ++i)
      for (int s = 0; s < S; ++s) {
        __m512* acc = acc_of[s];
        const uint8_t* g = ws[s] + i * kSbBytes;
        if constexpr (kAhead > 0) {
          for (size_t line = 0; line < kSbBytes; line += 64) _mm_prefetch(reinterpret_cast<const char*>(g + kAhead + line), static_cast<_mm_hint>(kHint));
        }
        const __m512i sc8 = _mm512_loadu_si512(g);
        const __m512i sc_lo = spread_scale(sc8, kCtl.scales_lo), sc_hi = spread_scale(sc8, kCtl.scales_hi);
        const __m512 dv = _mm512_permutexvar_ps(spread_d, _mm512_castps128_ps512(_mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(g + kDAt)))));
        __m512i sum[C];
        for (int c = 0; c < C; ++c) sum[c] = _mm512_setzero_si512();
        for (int q = 0; q < 4; ++q) {
          // Quarter q = (half hf, piece p): elements 128·hf + 16·p + 32·k + (0..15), k = 0..3, are
          // sub-block 8·hf + p + 2·k.
          const int hf = q / 2, p = q % 2;
          const uint8_t* b = g + kBodyAt + 192 * q;
          const __m512i v0 = _mm512_loadu_si512(b), v1 = _mm512_loadu_si512(b + 64), v2 = _mm512_loadu_si512(b + 128);
          // Three quants are their piece's bits 0-5; the fourth is the pieces' bits 6-7 shifted to
          // 0-1, 2-3 and 4-5 and merged by two vpternlogd (0xE4: bits from the first operand where
          // the third's are set, else from the second), then masked (16-bit shifts carry the next
          // byte's bits into 6-7): 9 operations a quarter, where the GGUF's ql/qh split took 13.
          // AMD EPYC (Zen 5), bench.matmul 896 × 4864 Q6_K from L2/L3, 1 thread, medians of 300,
          // alternating builds: 68-76 -> 88-91 GB/s; a 64-token tile 1620-1785 -> 1589-1610 us.
          // From DRAM, in the model, level (38.5-39.6 / 38.4-39.8 GB/s): the GEMV was not bound
          // by this here.
          const __m512i q0 = _mm512_and_si512(v0, m3f), q1 = _mm512_and_si512(v1, m3f), q2 = _mm512_and_si512(v2, m3f);
          const __m512i q01 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(v0, 6), _mm512_srli_epi16(v1, 4), m03, 0xE4);
          const __m512i q3 = _mm512_and_si512(_mm512_ternarylogic_epi32(q01, _mm512_srli_epi16(v2, 2), m0f, 0xE4), m3f);
          // Sub-blocks 8·hf + p + 2·k: int16 p + 2·k of the half's scales.
          const __m512i sch = hf ? sc_hi : sc_lo;
          const auto spread = [&](int k) { return _mm512_shuffle_epi8(sch, _mm512_load_si512(kCtl.word[p + 2 * k])); };
          const __m512i s0 = spread(0), s1 = spread(1), s2 = spread(2), s3 = spread(3);
          for (int c = 0; c < C; ++c) {
            const int8_t* y = reinterpret_cast<const block_q8_K*>(act + c * as)[i].qs + 128 * hf + 16 * p;
            sum[c] = _mm512_dpwssd_epi32(sum[c], _mm512_maddubs_epi16(q0, bcast16(y)), s0);
            sum[c] = _mm512_dpwssd_epi32(sum[c], _mm512_maddubs_epi16(q1, bcast16(y + 32)), s1);
            sum[c] = _mm512_dpwssd_epi32(sum[c], _mm512_maddubs_epi16(q2, bcast16(y + 64)), s2);
            sum[c] = _mm512_dpwssd_epi32(sum[c], _mm512_maddubs_epi16(q3, bcast16(y + 96)), s3);
          }
        }
        for (int c = 0; c < C; ++c) {
          const block_q8_K* yb = reinterpret_cast<const block_q8_K*>(act + c * as) + i;
          const __m512i bs_lo = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(yb->bsums)));
          const __m512i bs_hi = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(yb->bsums + 8)));
          const __m512i offset = _mm512_add_epi32(_mm512_madd_epi16(sc_lo, bs_lo), _mm512_madd_epi16(sc_hi, bs_hi));
          const __m512i total = _mm512_sub_epi32(sum[c], _mm512_slli_epi32(offset, 5));
          acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(dv, _mm512_set1_ps(yb->d)), _mm512_cvtepi32_ps(total), acc[c]);
        }
      }
    for (int s = 0; s < S; ++s)
      for (int c = 0; c < C; ++c) store_rows(acc_of[s][c], outs[s] + c * os);
  }
};
using Kernel = KernelT<0>;
using PrefetchingKernel = KernelT<1536>;
using FarPrefetchingKernel = KernelT<3072>;
using L1PrefetchingKernel = KernelT<1536, _MM_HINT_T0>;
using TwoStreamKernel = KernelT<kFourStreamsPrefetchBytes, _MM_HINT_T0>;

}  // namespace q6k

// Decode: the row groups one after another, one weight stream. It read two before (a group from
// each half of the walk, as the AVX2 K-quant and the 32-element formats' GEMVs); on an AMD EPYC
// Zen 5 one stream draws more from DRAM. bench.matmul 896 x 4864 Q6_K from a 256 MiB ring, 1
// thread, medians of 100, alternating builds: 29.9-30.9 -> 34.2-37.4 GB/s; in the model (0.5B
// Q4_K_M, whose ffn_down is Q6_K in half the layers; 48 tokens after 256) 23.2-24.3 -> 33.9-35.4.
template <class K>
void gemv(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) {
  const size_t group_bytes = static_cast<size_t>(n / QK_K) * K::kSbBytes;
  for (int g = 0; g < groups; ++g) K::template run<1>(n, out + 4 * g, 0, w + g * group_bytes, act, 0);
}

// Two streams (KernelChoice::k_gemv_two_streams, core/isa.h, which has the figures): the walk's
// first and second halves side by side, group g beside group seg + g, each prefetched 2 KiB ahead
// into L1; an odd last group alone.
template <class K>
void gemv_two_streams(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) {
  const size_t group_bytes = static_cast<size_t>(n / QK_K) * K::kSbBytes;
  const int seg = groups / 2;
  for (int g = 0; g < seg; ++g) {
    const uint8_t* const ws[2] = {w + static_cast<size_t>(g) * group_bytes, w + static_cast<size_t>(seg + g) * group_bytes};
    float* const outs[2] = {out + 4 * g, out + 4 * (seg + g)};
    K::template runs<1, 2>(n, outs, 0, ws, act, 0);
  }
  for (int g = 2 * seg; g < groups; ++g) K::template run<1>(n, out + 4 * g, 0, w + static_cast<size_t>(g) * group_bytes, act, 0);
}

template <class K>
void tile(int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as, int cols) {
  switch (cols) {
    case 8: K::template run<8>(n, out, os, w, act, as); break;
    case 7: K::template run<7>(n, out, os, w, act, as); break;
    case 6: K::template run<6>(n, out, os, w, act, as); break;
    case 5: K::template run<5>(n, out, os, w, act, as); break;
    case 4: K::template run<4>(n, out, os, w, act, as); break;
    case 3: K::template run<3>(n, out, os, w, act, as); break;
    case 2: K::template run<2>(n, out, os, w, act, as); break;
    case 1: K::template run<1>(n, out, os, w, act, as); break;
    default: break;
  }
}

}  // namespace

void gemv_q6_kx4_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) {
  gemv<q6k::PrefetchingKernel>(n, out, w, groups, act);
}
void gemv_q6_kx4_ahead3k_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) {
  gemv<q6k::FarPrefetchingKernel>(n, out, w, groups, act);
}
void gemv_q6_kx4_l1_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) {
  gemv<q6k::L1PrefetchingKernel>(n, out, w, groups, act);
}
void gemv_q6_kx4_streams2_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) {
  gemv_two_streams<q6k::TwoStreamKernel>(n, out, w, groups, act);
}
void gemv_q6_kx4_hwpf_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) { gemv<q6k::Kernel>(n, out, w, groups, act); }
void tile_q6_kx4_avx512(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols) {
  tile<q6k::Kernel>(n, out, out_stride, w, act, act_stride, cols);
}

}  // namespace quant
}  // namespace fulcrum
