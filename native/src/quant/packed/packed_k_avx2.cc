// Q6_K in groups of 4 rows (q6_kx4: repack.h) × Q8_K activations as they are, AVX2 (no VNNI):
// the AVX-512 kernel (packed_k_avx512.cc) on half the width, a ymm holding a pair of rows (128-bit
// lane = row), so each step runs once per pair.
//
// The 6-bit values and scales of one sub-block are built just before the tokens use them (one at a
// time, not four), and serve a tile of up to 8 tokens (kPackedTileColsQ6_kAvx2). Its GEMV
// (q6k::gemv_step in gemv_walk) reads one stream, or two on Intel CPUs (gemv_walk_two_streams).
// vpmaddwd by the scales and int32 adds give the same integer sums as vpdpwssd, and the float
// steps are the AVX-512 kernel's: both ISAs give the same bits.
// (Q4_K and Q5_K ran here in the same 4-row frame, q4_kx4 / q5_kx4, until the 8-row groups of
// packed_k8_avx2.cc replaced them.)
#include "quant/formats/blocks.h"
#include "quant/packed/repack.h"
#define QUANT_ISA QUANT_AVX2_LEVEL
#include "quant/dot/simd_avx2.h"

namespace fulcrum {
namespace quant {
namespace {

// The GEMV's software prefetch, where the CPU's choice has one (gemv_walk): non-temporal, as the
// 32-element formats' GEMV (gemm_tile_dispatch.h), 4.5 KiB ahead of its one stream. It read two
// streams 1 KiB ahead each before (chosen on a 2-vCPU Zen 3: 512 B kept too little in flight once
// the hint was non-temporal; against prefetcht1 the hint gained 0.5B Q4_K at AVX2 1 thread 96.1
// -> 98.6 tok/s on Zen 4). AMD EPYC Zen 5, bench.matmul 896 x 4864 Q6_K from a 256 MiB ring, 1
// thread, medians of 100, three alternating rounds: FULCRUM_ISA=avxvnni 30.6-33.9 -> 36.1-37.2 GB/s
// (3 KiB 34.1-35.3), avx2 28.2-31.9 -> 30.7-32.2.
constexpr size_t kGemvPrefetchBytes = kOneStreamPrefetchBytes;

inline __m256i bcast16(const int8_t* p) { return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// A pair of rows' four floats each (lane 0 the first row): (l0 + l2) + (l1 + l3), as the AVX-512
// kernels, into out[0] and out[1].
inline void store_pair_rows(__m256 acc, float* out) {
  __m256 t = _mm256_add_ps(acc, _mm256_permute_ps(acc, 0x4E));
  t = _mm256_add_ps(t, _mm256_permute_ps(t, 0xB1));
  out[0] = _mm256_cvtss_f32(t);
  out[1] = _mm_cvtss_f32(_mm256_extractf128_ps(t, 1));
}

namespace q6k {

constexpr size_t kBodyAt = 64, kDAt = 832;

// Built at compile time (constexpr): no dynamic initializer in an ISA-specific file.
struct Controls {
  alignas(32) uint8_t scale[16][32] = {};
  alignas(32) uint8_t scales_lo[32] = {};
  alignas(32) uint8_t scales_hi[32] = {};
  // gemv_step: int16 lane i of each 128-bit lane gets int16 j of that lane (bytes 2j, 2j + 1).
  alignas(32) uint8_t pick16[8][32] = {};
  constexpr Controls() {
    for (int j = 0; j < 8; ++j)
      for (int b = 0; b < 32; ++b) pick16[j][b] = static_cast<uint8_t>(2 * j + b % 2);
    for (int j = 0; j < 16; ++j)
      for (int b = 0; b < 32; ++b) scale[j][b] = b % 2 == 1 ? static_cast<uint8_t>(j) : 0x80;
    for (int b = 0; b < 32; ++b) {
      scales_lo[b] = b % 2 == 1 ? static_cast<uint8_t>((b % 16) / 2) : 0x80;
      scales_hi[b] = b % 2 == 1 ? static_cast<uint8_t>(8 + (b % 16) / 2) : 0x80;
    }
  }
};
constexpr Controls kCtl{};

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// A quarter's three pieces for a pair of rows (at b, b + 64, b + 128: repack.h), and its four
// 6-bit quant vectors, each built when its sub-block runs (all four at once spilled the 16 ymm
// registers): three are their piece's bits 0-5 (one AND), the fourth the pieces' bits 6-7 (one
// ANDNOT each by the same mask) shifted down to 0-1, 2-3 and 4-5 and ORed; with only bits 6-7
// left, a 16-bit shift carries nothing across bytes. 11 operations and one constant, where the
// GGUF's ql/qh split took 17 and two. AMD EPYC (Zen 5), 1 thread, alternating builds, with the
// barrier in gemv_step: bench.matmul 896 × 4864 Q6_K from L2/L3, medians of 300,
// FULCRUM_ISA=avx2 33.6-34.9 -> 37.4-37.9 GB/s, avxvnni 38.6-40.4 -> 45.5-46.8; in the model
// (0.5B Q4_K_M's Q6_K ffn_down, per-weight GB/s of the decode trace, three rounds) avx2
// 30.0-31.9 -> 32.7-34.5, avxvnni 33.4-35.7 -> 36.8-38.5. (The layout alone, without the barrier,
// was slower at avx2, 34 -> 33: the spills below.)
struct Quarter {
  __m256i v[3];
  explicit Quarter(const uint8_t* b) : v{load32(b), load32(b + 64), load32(b + 128)} {}
  __m256i quant(int k, __m256i m3f) const {
    if (k < 3) return _mm256_and_si256(v[k], m3f);
    const __m256i p0 = _mm256_srli_epi16(_mm256_andnot_si256(m3f, v[0]), 6);
    const __m256i p1 = _mm256_srli_epi16(_mm256_andnot_si256(m3f, v[1]), 4);
    const __m256i p2 = _mm256_srli_epi16(_mm256_andnot_si256(m3f, v[2]), 2);
    return _mm256_or_si256(_mm256_or_si256(p0, p1), p2);
  }
};

// sum + Σ pairs of (int16 products · scale): vpmaddwd and an int32 add, or one vpdpwssd in the
// avxvnni copy (the same exact int32 sums, so the same bits). The Q6_K GEMV is bound by its vector
// arithmetic at AVX2 width. AMD EPYC (Zen 5, 2 vCPUs), FULCRUM_ISA=avxvnni, 1 thread, alternating
// processes: bench.matmul Q6_K 256 x 4864 from L2/L3 33-35 -> 37-40 GB/s, 896 x 4864 from DRAM
// (p50) 29.5-31.6 -> 30.9-33.3; 0.5B Q4_K_M (its ffn_down half Q6_K) prefill 291-302 -> 297-319
// tok/s, decode 102-111 either way.
inline __m256i add_scaled(__m256i sum, __m256i p16, __m256i scale16) {
#if defined(__AVXVNNI__)
  return _mm256_dpwssd_avx_epi32(sum, p16, scale16);
#else
  return _mm256_add_epi32(sum, _mm256_madd_epi16(p16, scale16));
#endif
}
inline __m256i spread_scale(__m256i sc8, const uint8_t* ctl) { return _mm256_srai_epi16(_mm256_shuffle_epi8(sc8, load32(ctl)), 8); }

struct Kernel {
  static constexpr size_t kSbBytes = 4 * sizeof(block_q6_K);  // 840: one super-block of four rows
  // (The tile. Run with two streams interleaved inside it, two groups' 6-bit unpacking did not fit
  // the 16 ymm registers: 0.5B Q4_K_M decode 31 -> 21.5 tok/s at 1 thread. The GEMV is gemv_step
  // below, one super-block of one stream at a time.)

  template <int C>
  static void run(int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as) {
    const int64_t nsb = n / QK_K;
    const __m256i m3f = _mm256_set1_epi8(0x3F);
    __m256 acc[C][2];
    for (int c = 0; c < C; ++c) acc[c][0] = acc[c][1] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nsb; ++i) {
      const uint8_t* g = w + i * kSbBytes;
      if constexpr (C == 1)
        for (size_t o = 0; o < kSbBytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(g + kGemvPrefetchBytes + o), _MM_HINT_NTA);
      const __m128 d4 = _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(g + kDAt)));
      for (int pr = 0; pr < 2; ++pr) {
        const __m256i sc8 = load32(g + 32 * pr);
        __m256i sum[C];
        for (int c = 0; c < C; ++c) sum[c] = _mm256_setzero_si256();
        for (int q = 0; q < 4; ++q) {
          const int hf = q / 2, p = q % 2, j0 = 8 * hf + p;
          const Quarter qt(g + kBodyAt + 192 * q + 32 * pr);
          for (int k = 0; k < 4; ++k) {
            // Sub-block j0 + 2k.
            const __m256i qk = qt.quant(k, m3f);
            const __m256i sk = spread_scale(sc8, kCtl.scale[j0 + 2 * k]);
            for (int c = 0; c < C; ++c) {
              const int8_t* y = reinterpret_cast<const block_q8_K*>(act + c * as)[i].qs + 128 * hf + 16 * p + 32 * k;
              sum[c] = add_scaled(sum[c], _mm256_maddubs_epi16(qk, bcast16(y)), sk);
            }
          }
        }
        const __m256i sc_lo = spread_scale(sc8, kCtl.scales_lo), sc_hi = spread_scale(sc8, kCtl.scales_hi);
        // Lane 0: row 2·pr's d, lane 1: row 2·pr + 1's.
        const __m256 dv = _mm256_set_m128(_mm_set1_ps(d4[2 * pr + 1]), _mm_set1_ps(d4[2 * pr]));
        for (int c = 0; c < C; ++c) {
          const block_q8_K* yb = reinterpret_cast<const block_q8_K*>(act + c * as) + i;
          const __m256i bs_lo = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(yb->bsums)));
          const __m256i bs_hi = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(yb->bsums + 8)));
          const __m256i offset = _mm256_add_epi32(_mm256_madd_epi16(sc_lo, bs_lo), _mm256_madd_epi16(sc_hi, bs_hi));
          const __m256i total = _mm256_sub_epi32(sum[c], _mm256_slli_epi32(offset, 5));
          acc[c][pr] = _mm256_fmadd_ps(_mm256_mul_ps(dv, _mm256_set1_ps(yb->d)), _mm256_cvtepi32_ps(total), acc[c][pr]);
        }
      }
    }
    for (int c = 0; c < C; ++c)
      for (int p = 0; p < 2; ++p) store_pair_rows(acc[c][p], out + c * os + 2 * p);
  }
};

// The GEMV's step (one token): one super-block of one row group into that group's two pair
// accumulators, computing run<1>'s integer sums and float operations in the same order (the same
// bits). The scales are sign-extended to int16 once per pair of rows and picked per sub-block
// with one byte shuffle (run<1>: a shuffle into the high bytes and an arithmetic shift, 32 shifts a
// super-block more on the shift/shuffle ports). Inlined into gemv_walk. (On the 2-vCPU Zen 3 it was
// written on, run<1>'s walk read 7.3-8.1 GB/s from DRAM, 67 % of a read probe, and two streams of
// this step 8.3-10.7; on the Zen 5 one stream of it 4.5 KiB ahead beats two: kGemvPrefetchBytes.)
[[gnu::always_inline]] inline void gemv_step(const uint8_t* g, const block_q8_K* yb, __m256& acc0, __m256& acc1) {
  const __m256i m3f = _mm256_set1_epi8(0x3F);
  const __m128 d4 = _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(g + kDAt)));
  const __m256 dy = _mm256_set1_ps(yb->d);
#pragma GCC unroll 2
  for (int pr = 0; pr < 2; ++pr) {
    // Row 2·pr's scales in the low lane, row 2·pr + 1's in the high: scales 0-7 and 8-15 as int16.
    const __m256i sc8 = load32(g + 32 * pr);
    const __m256i sc_a = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(sc8)), sc_b = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(sc8, 1));
    // sc_a = [row 2pr: 0..15] (256 bits), sc_b = [row 2pr+1: 0..15]; lanes per row: low 128 = scales 0-7, high = 8-15.
    const __m256i s07 = _mm256_permute2x128_si256(sc_a, sc_b, 0x20), s815 = _mm256_permute2x128_si256(sc_a, sc_b, 0x31);
    // Two partial sums (sub-blocks of even and odd k), added at the end (the same int32 value):
    // with AVX-VNNI each add_scaled is a vpdpwssd, and one chain of sixteen waited on each
    // other's latency. AMD EPYC Zen 5, FULCRUM_ISA=avxvnni, bench.matmul 896 x 4864 Q6_K, 1
    // thread, alternating builds, medians: from L2/L3 37.4-38.0 -> 37.9-40.0 GB/s, from DRAM
    // 30.4-31.8 -> 33.7-36.0 (four chains no better than two; plain AVX2 level).
    __m256i sums[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      const int hf = q / 2, p = q % 2, j0 = 8 * hf + p;
      const Quarter qt(g + kBodyAt + 192 * q + 32 * pr);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m256i qk = qt.quant(k, m3f);
        const int j = j0 + 2 * k;
        const __m256i sk = _mm256_shuffle_epi8(j < 8 ? s07 : s815, load32(kCtl.pick16[j % 8]));
        const int8_t* y = yb->qs + 128 * hf + 16 * p + 32 * k;
        sums[k % 2] = add_scaled(sums[k % 2], _mm256_maddubs_epi16(qk, bcast16(y)), sk);
      }
    }
    const __m256i sum = _mm256_add_epi32(sums[0], sums[1]);
    const __m256i bs_lo = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(yb->bsums)));
    const __m256i bs_hi = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(yb->bsums + 8)));
    const __m256i offset = _mm256_add_epi32(_mm256_madd_epi16(s07, bs_lo), _mm256_madd_epi16(s815, bs_hi));
    const __m256i total = _mm256_sub_epi32(sum, _mm256_slli_epi32(offset, 5));
    const __m256 dv = _mm256_set_m128(_mm_set1_ps(d4[2 * pr + 1]), _mm_set1_ps(d4[2 * pr]));
    __m256& acc = pr == 0 ? acc0 : acc1;
    acc = _mm256_fmadd_ps(_mm256_mul_ps(dv, dy), _mm256_cvtepi32_ps(total), acc);
    // The second pair of rows loads the token's activations again: without this barrier GCC
    // keeps the first pair's sixteen broadcasts for it, which spill to the stack (the avx2
    // copy's GEMV had 95 stack accesses, now 49; avxvnni 44 -> 11).
    asm volatile("" ::: "memory");
  }
}

}  // namespace q6k

// Decode: the row groups one after another, one weight stream (kGemvPrefetchBytes says why one).
// Step is the format's inlined super-block step (q6k::gemv_step), which runs the tile's integer
// sums and float operations in the tile's order: the same bits as the tile.
using StepFn = void (*)(const uint8_t*, const block_q8_K*, __m256&, __m256&);

// kPrefetch: how far ahead the walk prefetches in software (kGemvPrefetchBytes), or 0 to leave the
// weights to the hardware prefetchers (KernelChoice::gemv_prefetch, core/isa.h, says which a CPU
// runs, as for the 32-element formats).
template <size_t SbBytes, StepFn Step, size_t kPrefetch>
[[gnu::always_inline]] inline void gemv_walk(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) {
  const int64_t nsb = n / QK_K;
  const size_t group_bytes = static_cast<size_t>(nsb) * SbBytes;
  const block_q8_K* y = reinterpret_cast<const block_q8_K*>(act);
  for (int g = 0; g < groups; ++g) {
    const uint8_t* w0 = w + g * group_bytes;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    for (int64_t i = 0; i < nsb; ++i) {
      const uint8_t* g0 = w0 + i * SbBytes;
      if constexpr (kPrefetch > 0)
        for (size_t o = 0; o < SbBytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(g0 + kPrefetch + o), _MM_HINT_NTA);
      Step(g0, y + i, a0, a1);
    }
    store_pair_rows(a0, out + 4 * g);
    store_pair_rows(a1, out + 4 * g + 2);
  }
}

// Two streams (KernelChoice::k_gemv_two_streams, core/isa.h, which has the figures): the walk's
// first and second halves side by side, group g beside group seg + g, each prefetched
// kFourStreamsPrefetchBytes ahead into L1 (prefetcht0); an odd last group alone. Each group's
// steps are its own, in its order: the same bits as the one-stream walk.
template <size_t SbBytes, StepFn Step>
[[gnu::always_inline]] inline void gemv_walk_two_streams(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) {
  const int64_t nsb = n / QK_K;
  const size_t group_bytes = static_cast<size_t>(nsb) * SbBytes;
  const block_q8_K* y = reinterpret_cast<const block_q8_K*>(act);
  const int seg = groups / 2;
  const size_t seg_bytes = static_cast<size_t>(seg) * group_bytes;
  for (int g = 0; g < seg; ++g) {
    const uint8_t* w0 = w + g * group_bytes;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
    for (int64_t i = 0; i < nsb; ++i) {
      const uint8_t* g0 = w0 + i * SbBytes;
      for (size_t o = 0; o < SbBytes; o += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(g0 + kFourStreamsPrefetchBytes + o), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(g0 + seg_bytes + kFourStreamsPrefetchBytes + o), _MM_HINT_T0);
      }
      Step(g0, y + i, a0, a1);
      Step(g0 + seg_bytes, y + i, b0, b1);
    }
    store_pair_rows(a0, out + 4 * g);
    store_pair_rows(a1, out + 4 * g + 2);
    store_pair_rows(b0, out + 4 * (seg + g));
    store_pair_rows(b1, out + 4 * (seg + g) + 2);
  }
  if (groups > 2 * seg) gemv_walk<SbBytes, Step, 0>(n, out + 4 * (2 * seg), w + 2 * seg_bytes, groups - 2 * seg, act);
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

void QUANT_FN(gemv_q6_kx4)(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) {
  gemv_walk<q6k::Kernel::kSbBytes, q6k::gemv_step, kGemvPrefetchBytes>(n, out, w, groups, act);
}
void QUANT_FN(gemv_q6_kx4_streams2)(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) {
  gemv_walk_two_streams<q6k::Kernel::kSbBytes, q6k::gemv_step>(n, out, w, groups, act);
}
void QUANT_FN(gemv_q6_kx4_hwpf)(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) {
  gemv_walk<q6k::Kernel::kSbBytes, q6k::gemv_step, 0>(n, out, w, groups, act);
}
void QUANT_FN(tile_q6_kx4)(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols) {
  tile<q6k::Kernel>(n, out, out_stride, w, act, act_stride, cols);
}

}  // namespace quant
}  // namespace fulcrum
