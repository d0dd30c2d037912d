// Turns a tile kernel with compile-time shape (K::run<R, C>) into a GemmTileFn body that takes
// any rows <= RMAX and cols <= CMAX, so partial tiles at the matrix edges keep the register
// blocking instead of falling back to one vec_dot per output; gemv_any does the same for the
// decode GEMV kernels, packed_tile_any and packed_gemv_groups the same for the packed kernels.
// Include only from the gemm_* / gemv_* / packed_* ISA files; everything here has
// internal linkage (ODR rule: no shared inline ISA code).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <immintrin.h>

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

// How far ahead the tile walk prefetches at least. A speculative step's few tokens (PackedFormat::
// few_tile, one token block: matmul_packed) read every weight once from memory through this
// walk, one contiguous run of groups a claim, and K::kTileAhead chunks alone (576 B for Q4_0's
// 16-row chunks, 1088 for Q8_0's) kept too few lines in flight. bench.matmul 4864 x 1024 from a
// 256 MiB ring, 2 threads, medians of 61, three alternating rounds, Intel Xeon (AMX host; the
// register tiles below 16 tokens), kTileAhead chunks -> at least 2 KiB: Q4_0 2 tokens 142-153 ->
// 118-126 µs, 5 tokens 179-187 -> 148-149; Q5_0 5 tokens 195-212 -> 173-184; Q8_0 5 tokens
// 255-277 -> 246-265, 2 tokens level; Q4_K (2304 B already) level; 4 KiB no better than 2. At
// FULCRUM_ISA=avx2 (8-row chunks): Q4_0 5 tokens 218-245 -> 181-182, 2 tokens 160-163 -> 139-140;
// Q8_0 5 tokens 317-322 -> 299-315; Q4_K 199-219 -> 190-195. Prefill's later token blocks read
// the group from L2, where the prefetch costs its instructions only.
constexpr size_t kTileMinAheadBytes = 2048;

// The packed kernels' tile: one row group × C tokens, chunk after chunk in column order
// (K::chunk_tile<C>: the chunk's weights unpacked once serve the C tokens from registers), each
// chunk max(K::kTileAhead chunks, kTileMinAheadBytes) ahead prefetched into L1, from L2 where the
// previous token tile over this group left it or, for the first token tile, from memory. (The
// GEMV walks below take K::chunk, one token's step.)
template <class K, int C>
void packed_tile_walk(int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as) {
  constexpr size_t kAhead = std::max<size_t>(K::kTileAhead * K::kChunkBytes, kTileMinAheadBytes);
  typename K::Acc acc[C];
  for (int c = 0; c < C; ++c) acc[c] = K::zero();
  const int64_t chunks = n / K::kChunkCols;
  for (int64_t j = 0; j < chunks; ++j) {
    const uint8_t* cw = w + j * K::kChunkBytes;
    for (size_t o = 0; o < K::kChunkBytes + 32; o += 64)
      _mm_prefetch(reinterpret_cast<const char*>(cw + kAhead + o), _MM_HINT_T0);
    K::template chunk_tile<C>(acc, cw, act + j * K::kActChunkBytes, as);
  }
  for (int c = 0; c < C; ++c) K::store(out + c * os, acc[c]);
}

// packed_tile_walk for cols in [1, C] (others write nothing).
template <class K, int C>
void packed_tile_any(int cols, int64_t n, float* out, int64_t os, const uint8_t* w, const uint8_t* act, size_t as) {
  if (cols == C) {
    packed_tile_walk<K, C>(n, out, os, w, act, as);
  } else if constexpr (C > 1) {
    packed_tile_any<K, C - 1>(cols, n, out, os, w, act, as);
  }
}

// S row groups at once, one from each of S equal segments of the walk (group g of segment s is
// group s·seg + g): S weight streams in flight and S independent accumulator chains. Each group's
// sums run in the same order as alone, so the outputs are the same bits.
template <class K, int S, size_t kPrefetchBytes, int kHint>
void packed_gemv_streams(int64_t chunks, size_t group_bytes, float* out, const uint8_t* w, int seg, const uint8_t* act) {
  const size_t seg_bytes = static_cast<size_t>(seg) * group_bytes;
  for (int g = 0; g < seg; ++g, w += group_bytes, out += K::kGroupRows) {
    typename K::Acc acc[S];
    for (int s = 0; s < S; ++s) acc[s] = K::zero();
    for (int64_t j = 0; j < chunks; ++j) {
      const uint8_t* cw = w + j * K::kChunkBytes;
      if constexpr (kPrefetchBytes > 0)
        for (int s = 0; s < S; ++s)
          for (size_t o = 0; o < K::kChunkBytes + 32; o += 64)
            _mm_prefetch(reinterpret_cast<const char*>(cw + s * seg_bytes + kPrefetchBytes + o), static_cast<_mm_hint>(kHint));
      for (int s = 0; s < S; ++s) K::chunk(acc[s], cw + s * seg_bytes, act + j * K::kActChunkBytes);
    }
    for (int s = 0; s < S; ++s) K::store(out + static_cast<int64_t>(s) * seg * K::kGroupRows, acc[s]);
  }
}

// The packed GEMV's walk over `groups` consecutive row groups of group_rows outputs: per group
// an accumulator (K::Acc, K::zero()), K::chunk over its chunks of kChunkCols columns (the
// weights prefetched kPrefetchBytes ahead in software, or with 0 left to the hardware
// prefetchers: KernelChoice::gemv_prefetch, core/isa.h, says which a CPU runs), K::store of its
// outputs.
//
// The prefetches are non-temporal (prefetchnta): a weight byte is read once a token, so it has
// no business in L2 or L3, and keeping it out leaves the caches to the activations, KV and the
// other thread's streams. Against prefetcht1 (to L2), same-process alternating builds on an
// AMD EPYC with AVX-512 and AVX-VNNI (2 vCPUs; Zen 5 by those flags: Zen 4 has no AVX-VNNI),
// decode after a 256-token prompt, tok/s: 0.5B Q4_0 103.6 -> 122.3
// at 1 thread and 179.9 -> 195.4 at 2; 1.3B Q4_0 20.6 -> 24.5 and 48.9 -> 52.4; 0.5B Q8_0 59.0 ->
// 64.1 and 111.5 -> 115.4; AVX2 0.5B Q4_0 1 thread 115.7 -> 119.2; bench.matmul 4864 x 896 Q4_0
// from DRAM 27 -> 33 GB/s at 1 thread and 36 -> 44 at 2 (medians of six runs each).
// On a Zen 4 EPYC (AVX-512, no AVX-VNNI) the same prefetches halved one core's draw (15 against
// 31 GB/s without any), so there the walk runs with kPrefetchBytes = 0 (core/isa.h).
//
// Decode reads each weight byte once, so the walk runs at the speed DRAM delivers them. One
// linear stream with one accumulator chain left a 2-vCPU Zen 3 at 75-80 % of its read bandwidth
// inside the model; reading several segments of the walk side by side, about 1.1 KiB per step
// across them (Q4_0: 4 streams of 288 B chunks, Q5_0: 3, Q8_0: 2 of 544 B), reached it
// (0.5B decode, 1 thread, alternating runs: Q4_0 37 -> 48 tok/s, Q8_0 22.3 -> 24.0; more
// streams than that lost on Q8_0: 4 gave 20.8): gemv_streams_for below. With software
// prefetch each kernel says how many streams its GEMV reads (K::kGemvStreams): the AVX2
// 32-element formats that rule; the AVX-512 kernels and the AVX2 K-quants one stream
// prefetched further ahead, which the Zen 5 host draws more from (packed_x16_avx512.cc,
// packed_k16_avx512.cc and packed_k8_avx2.cc measure it). The outputs are the same bits for any
// number of streams (packed_gemv_streams).
//
// Where the hardware prefetchers alone feed the walk (kPrefetchBytes = 0: the Zen 4, the one CPU
// whose choice that is) every kernel's GEMV reads one stream. Measured on a 2-vCPU Zen 4 (family
// 19h model 11h) in one process, decode after 512 tokens, the walk switched step by step in a
// Thue-Morse order (plain alternation let a step-parity effect of the host into one side),
// medians of the op trace's time in that format's matmuls a step:
//   - the 32-element formats (gemv_streams_for's 2-4 streams before): packed_x16_avx512.cc and
//     packed_x8_avx2.cc have the figures;
//   - the K-quants (Q4_K, Q5_K; two streams before), one stream / two, 2 threads: AVX-512 Q4_K
//     0.85-0.97 (nine runs: the 0.5B Q4_K's ffn_down, the 1.3B Q4_K's and Q4_K_M's Q4_K
//     matrices; the whole step 0.91-1.02), Q5_K 0.86-0.97 (four, Q5_K_M files),
//     FULCRUM_ISA=avx2 Q4_K 0.90-0.96 (six; the step 0.94-1.00). 1 thread, it depends on what the
//     host gives at the moment: 0.79-0.92 while the two-stream walk drew little (the 0.5B's
//     ffn_down at 10-14 GB/s), 1.01-1.22 while it drew much (16-25 GB/s); over 17 AVX-512 runs
//     geometric mean 0.97, over 6 AVX2 runs 1.01, Q5_K 0.91-1.13. The same walk on both sides of
//     the switch (six control runs): 0.97-1.08.
//   Three streams, or one with software prefetch 1.5, 4.5 or 9 KiB ahead (prefetchnta), or four
//   2 KiB ahead into L1, were no better for the Q4_K (three streams 1.06-1.16 at both counts).
//
// The 32-element formats' software-prefetched walks may instead read four streams, each
// prefetched kFourStreamsPrefetchBytes (2 KiB) ahead into L1 (prefetcht0): the gemv_*_streams4
// entry points (KernelChoice::gemv_four_streams, core/isa.h, says which walk a CPU runs, and why).
constexpr int gemv_streams_for(size_t chunk_bytes) { return chunk_bytes * 4 <= 1152 ? 4 : chunk_bytes * 3 <= 1152 ? 3 : 2; }

// kStreamsOverride > 0 reads that many streams instead of the kernel's own count; kHint is the
// prefetch's locality (prefetchnta unless a walk says otherwise).
template <class K, size_t kPrefetchBytes, int kStreamsOverride = 0, int kHint = _MM_HINT_NTA>
void packed_gemv_groups(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) {
  const int64_t chunks = n / K::kChunkCols;
  const size_t group_bytes = static_cast<size_t>(chunks) * K::kChunkBytes;
  constexpr int kStreams = kStreamsOverride > 0 ? kStreamsOverride : kPrefetchBytes > 0 ? K::kGemvStreams : 1;
  static_assert(kStreams >= 1, "a GEMV reads at least one stream");
  if (groups >= kStreams) {
    const int seg = groups / kStreams;
    packed_gemv_streams<K, kStreams, kPrefetchBytes, kHint>(chunks, group_bytes, out, w, seg, act);
    w += static_cast<size_t>(seg) * kStreams * group_bytes;
    out += static_cast<int64_t>(seg) * kStreams * K::kGroupRows;
    groups -= seg * kStreams;  // the last groups % kStreams, one at a time
  }
  for (int g = 0; g < groups; ++g, w += group_bytes, out += K::kGroupRows) {
    typename K::Acc acc = K::zero();
    for (int64_t j = 0; j < chunks; ++j) {
      const uint8_t* cw = w + j * K::kChunkBytes;
      if constexpr (kPrefetchBytes > 0)
        for (size_t o = 0; o < K::kChunkBytes + 32; o += 64) _mm_prefetch(reinterpret_cast<const char*>(cw + kPrefetchBytes + o), static_cast<_mm_hint>(kHint));
      K::chunk(acc, cw, act + j * K::kActChunkBytes);
    }
    K::store(out, acc);
  }
}

}  // namespace
}  // namespace quant
}  // namespace fulcrum

// A packed layout's entry points (repack.h), in quant:: of its ISA file: gemv_<name>_<isa> with
// its software prefetch `prefetch_bytes` ahead, gemv_<name>_hwpf_<isa> with the hardware
// prefetchers only (KernelChoice::gemv_prefetch), and tile_<name>_<isa>, the prefill tile of up to
// `tile_cols` tokens. `isa` may be a macro (an AVX2 file's QUANT_AVX2_LEVEL: avx2, or avxvnni in
// its AVX-VNNI copy): it is expanded before the names are put together.
#define FULCRUM_PACKED_NAME_(fn, isa) fn##_##isa
#define FULCRUM_PACKED_NAME(fn, isa) FULCRUM_PACKED_NAME_(fn, isa)
#define FULCRUM_PACKED_ENTRY_POINTS(name, isa, K, prefetch_bytes, tile_cols)                                                      \
  void FULCRUM_PACKED_NAME(gemv_##name, isa)(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) {            \
    packed_gemv_groups<K, prefetch_bytes>(n, out, w, groups, act);                                                                \
  }                                                                                                                               \
  void FULCRUM_PACKED_NAME(gemv_##name##_hwpf, isa)(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) {     \
    packed_gemv_groups<K, 0>(n, out, w, groups, act);                                                                             \
  }                                                                                                                               \
  void FULCRUM_PACKED_NAME(tile_##name, isa)(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act,      \
                                             size_t act_stride, int cols) {                                                       \
    packed_tile_any<K, tile_cols>(cols, n, out, out_stride, w, act, act_stride);                                                  \
  }

// The K-quants' two-stream GEMV, gemv_<name>_streams2_<isa> (KernelChoice::k_gemv_two_streams), and
// the 32-element formats' four-stream one, gemv_<name>_streams4_<isa> (KernelChoice::gemv_four_streams):
// that many streams, each prefetched kFourStreamsPrefetchBytes ahead into L1 (repack.h).
#define FULCRUM_PACKED_STREAMS2_ENTRY_POINT(name, isa, K)                                                                        \
  void FULCRUM_PACKED_NAME(gemv_##name##_streams2, isa)(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) { \
    packed_gemv_groups<K, kFourStreamsPrefetchBytes, 2, _MM_HINT_T0>(n, out, w, groups, act);                                     \
  }

#define FULCRUM_PACKED_STREAMS4_ENTRY_POINT(name, isa, K)                                                                        \
  void FULCRUM_PACKED_NAME(gemv_##name##_streams4, isa)(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) { \
    packed_gemv_groups<K, kFourStreamsPrefetchBytes, 4, _MM_HINT_T0>(n, out, w, groups, act);                                     \
  }
