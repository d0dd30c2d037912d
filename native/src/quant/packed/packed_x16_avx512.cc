// Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 in the q4_0x16 / q4_1x16 / q5_0x16 / q5_1x16 / q8_0x16 layouts
// (repack.h: sixteen rows a group, block after block) × Q8_0 activations with their block sums
// ("q8_0 sums"; Q4_1's and Q5_1's Q8_1 ones with theirs, "q8_1 sums"), AVX-512 VNNI.
//
// A zmm's 16 int32 lanes are the group's 16 rows, each lane four quants of its row's block, so
// one block's 512 multiply-adds for a token are eight vpdpbusd whose activation operand is a
// 4-byte broadcast straight from the token's quants (vpbroadcastd from memory: a load, no
// shuffle). A lane's sum is one (row, block) product, so the scales are one float step per
// block and token for all 16 rows: convert, scale product, fused add. The 4-row layouts this
// replaces paid more: Q4_0's "piece order" two float steps per 512 multiply-adds (its lanes held
// every (row, block) pair twice) over activations pre-broadcast in memory, 2.5x the Q8_0 bytes;
// Q8_0's row order a masked negation per activation vector and a horizontal sum per output. Here
// a token's block is 40 bytes (its 32 quants, scale, offset sum), so eight tokens' activations of
// a 2048-column matrix (20 KiB) stay in L1 while a row group's blocks pass.
//
// vpdpbusd multiplies unsigned bytes by signed ones. Q4_0's nibbles q are unsigned and the
// value is q − 8 (Q5_0: 5 bits, q − 16); Q8_0's quants w are stored as w + 128 (the repacking
// flips their sign bits). Either way Σ(u − o)·y = Σu·y − o·Σy, and the activations carry −o·Σy
// per block as the sums' seed (o = 8, 16 or 128: one arrangement each).
//
// Measured on an AMD EPYC (AVX-512 and AVX-VNNI: Zen 5, 2 vCPUs), benchModel (256-token prefill, 48 decoded
// tokens), alternating processes, tok/s, before -> after:
//   0.5B Q4_0 1 thread   prefill 282-284 -> 562-573    decode 100-101 -> 109-110
//   0.5B Q4_0 2 threads  prefill (400)   -> 952-990    decode (116-122) -> 170-173
//   1.3B Q4_0 1 thread   prefill 79      -> 157-169    decode 27-28 -> 30-33
// (the 2-thread piece-order figures from the same hour's earlier runs).
//
// The GEMV and the tile share `dot_block`'s order of operations per (row group, token, block),
// so a token's outputs are the same bits alone and in a batch.
#include <cstring>

#include "quant/formats/blocks.h"
#include "quant/packed/packed_x16_blocks.h"
#include "quant/packed/repack.h"
#include "quant/tiles/gemm_tile_dispatch.h"
#define QUANT_ISA avx512
#include "quant/dot/simd_avx512.h"

namespace fulcrum {
namespace quant {
namespace {

constexpr size_t kActBytes = kQ8SumsBlockBytes;  // 40
// With software prefetch (the CPU's choice, KernelChoice::gemv_prefetch) the GEMV reads one stream
// (Kernel::kGemvStreams), prefetched this far ahead (prefetchnta; repack.h), as the AVX-512 K-quants' (packed_k16_avx512.cc). It
// read up to four (gemm_tile_dispatch.h's rule) 1 KiB ahead each, then 2 KiB. AMD EPYC Zen 5,
// decode, 1 thread, 64 tokens after 256 (1.3B: 32), alternating processes, tok/s:
//   4 streams 1 KiB -> 2 KiB: 0.5B Q4_0 158-167 -> 168-171, 0.5B Q4_K (its 896-column matrices
//   Q5_0) 137-146 -> 144-150, 0.5B Q8_0 84-93 -> 97-100 (bench.matmul 4864 x 896 from DRAM
//   level: the ring's back-to-back copies hide it);
//   then -> one stream 4.5 KiB ahead: 0.5B Q4_0 158-159 -> 169-179, 1.3B Q4_0 43.6-46.6 ->
//   49.4-51.0, 0.5B Q4_K 137-144 -> 149-153, 0.5B Q8_0 level (90-100); 2 threads level or better
//   (0.5B Q4_0 200-209 -> 209-217, 1.3B Q4_0 57-60 -> 59-61). Two streams 2 KiB ahead each and four
//   3 KiB ahead measured in between.
// That is this kernel's own walk (FULCRUM_GEMV_STREAMS=1); CPUs run four streams 2 KiB ahead by
// default since a 2026-12-02 Zen 5 host drew more that way (core/isa.h KernelChoice::gemv_four_streams).
constexpr size_t kGemvPrefetchBytes = kOneStreamPrefetchBytes;

// One (row group, token, block): the unsigned quants against |y| ≤ 127 summed in int32 from the
// token's −o·Σy, then scaled by d_w·d_y into the row's accumulator; kMin formats sum from zero
// and then add the rows' m times the token's s (mw: F::mins of the block).
template <class F>
inline __m512 dot_block(__m512 acc, const BlockW& w, const uint8_t* a, __m512 mw) {
  __m512i s = F::kMin ? _mm512_setzero_si512() : bcast4(a + 36);
  for (int m = 0; m < 8; ++m) s = _mm512_dpbusd_epi32(s, w.u[m], bcast4(a + 4 * m));
  return scale_block<F>(acc, s, w.d, a, mw);
}

// The drivers' kernel (tiles/gemm_tile_dispatch.h): a chunk is one block. The GEMV is the
// tile's one-token case.
template <class F>
struct Kernel {
  static constexpr int64_t kChunkCols = QK8_0;
  static constexpr size_t kChunkBytes = F::kBlockBytes, kActChunkBytes = kActBytes;
  static constexpr int kGroupRows = 16;
  static constexpr int kGemvStreams = 1;  // kGemvPrefetchBytes says why
  // Without software prefetch (the Zen 4, KernelChoice::gemv_prefetch) the walk reads one stream too
  // (gemm_tile_dispatch.h), not the four (Q4_0; Q4_1, Q5_0, Q5_1: three; Q8_0: two) of
  // gemv_streams_for it read before, measured on a 2-vCPU Zen 3. 2-vCPU Zen 4 (AMD EPYC, family 19h
  // model 11h), decode after 512 tokens in one process, the walk switched every other step (so a slow
  // moment of this noisy host hits both), median step time one stream / the rule's: 0.5B Q4_0 1
  // thread 0.89-1.00 (five processes, median 0.96), 2 threads 0.95-1.01 (0.97); 0.5B Q8_0 1T 0.93 /
  // 1.03 / 0.93, 2T 0.96 / 0.97 / 0.99; 1.3B Q8_0 1T 0.95 / 0.93, 2T 0.98 / 0.98; 1.3B Q4_0 0.99 /
  // 0.98; the Q4_K models (their 896-column matrices Q5_0) level. The same switch between the rule's
  // walk and itself: 1T 0.97-1.01, 2T 1.01-1.02.
  using Acc = __m512;
  static Acc zero() { return _mm512_setzero_ps(); }
  static void chunk(Acc& acc, const uint8_t* cw, const uint8_t* a) { chunk_tile<1>(&acc, cw, a, 0); }
  static void store(float* out, Acc acc) { _mm512_storeu_ps(out, acc); }
  // The walk's prefetch: two blocks ahead in this group.
  static constexpr int kTileAhead = 2;
  // One block of the 16 rows × C tokens (token c's activations at a + c·as): the block's unpacked
  // weights serve the C tokens from registers.
  template <int C>
  [[gnu::always_inline]] static inline void chunk_tile(Acc* acc, const uint8_t* cw, const uint8_t* a, size_t as) {
    const BlockW bw = F::load(cw);
    const __m512 mw = block_mins<F>(cw);
    for (int c = 0; c < C; ++c) acc[c] = dot_block<F>(acc[c], bw, a + c * as, mw);
  }
};

// One token's Q8_0 row -> its "q8_0 sums" row, seeds −o·Σy.
template <int O>
void arrange_sums(const void* q8, void* dst, int64_t n) {
  const block_q8_0* y = static_cast<const block_q8_0*>(q8);
  uint8_t* o = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / QK8_0; ++b, o += kActBytes) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), q);
    // Σy: the 32 int8 widened to int16 and summed in pairs (exact: |Σy| ≤ 32·127).
    const int32_t sum = _mm512_reduce_add_epi32(_mm512_madd_epi16(_mm512_cvtepi8_epi16(q), _mm512_set1_epi16(1)));
    const float dy = simd::f16(y[b].d);
    const int32_t seed = -O * sum;
    std::memcpy(o + 32, &dy, 4);
    std::memcpy(o + 36, &seed, 4);
  }
}

}  // namespace

void arrange_q8_0_sums8_avx512(const void* q8, void* dst, int64_t n) { arrange_sums<8>(q8, dst, n); }
void arrange_q8_0_sums16_avx512(const void* q8, void* dst, int64_t n) { arrange_sums<16>(q8, dst, n); }
void arrange_q8_0_sums128_avx512(const void* q8, void* dst, int64_t n) { arrange_sums<128>(q8, dst, n); }

// Each layout's entry points (tiles/gemm_tile_dispatch.h).
FULCRUM_PACKED_ENTRY_POINTS(q4_0x16, avx512, Kernel<Q4_0x16>, kGemvPrefetchBytes, kPackedTileColsX16Avx512)
FULCRUM_PACKED_ENTRY_POINTS(q5_0x16, avx512, Kernel<Q5_0x16>, kGemvPrefetchBytes, kPackedTileColsX16Avx512)
FULCRUM_PACKED_ENTRY_POINTS(q4_1x16, avx512, Kernel<Q4_1x16>, kGemvPrefetchBytes, kPackedTileColsX16Avx512)
FULCRUM_PACKED_ENTRY_POINTS(q5_1x16, avx512, Kernel<Q5_1x16>, kGemvPrefetchBytes, kPackedTileColsX16Avx512)
FULCRUM_PACKED_ENTRY_POINTS(q8_0x16, avx512, Kernel<Q8_0x16>, kGemvPrefetchBytes, kPackedTileColsX16Avx512)
FULCRUM_PACKED_STREAMS4_ENTRY_POINT(q4_0x16, avx512, Kernel<Q4_0x16>)
FULCRUM_PACKED_STREAMS4_ENTRY_POINT(q5_0x16, avx512, Kernel<Q5_0x16>)
FULCRUM_PACKED_STREAMS4_ENTRY_POINT(q4_1x16, avx512, Kernel<Q4_1x16>)
FULCRUM_PACKED_STREAMS4_ENTRY_POINT(q5_1x16, avx512, Kernel<Q5_1x16>)
FULCRUM_PACKED_STREAMS4_ENTRY_POINT(q8_0x16, avx512, Kernel<Q8_0x16>)

}  // namespace quant
}  // namespace fulcrum
