// The instruction-set levels the kernels are compiled for, and the one choice among them the
// process runs at. The choice is made once (kernel_choice(), forced at module load) from cpuid +
// the OS's XSAVE state, capped by FULCRUM_ISA=scalar|avx2|avxvnni|avx512 for tests and comparisons;
// select_kernels installs every kernel family's implementations for it, and every family reads
// it from here rather than looking at the CPU itself.
#pragma once
#include "ggml_types.h"

namespace fulcrum {

// avxvnni is AVX2 plus AVX-VNNI (the VEX vpdpbusd of Alder Lake and later, Zen 4 and later): the
// block formats' AVX2 kernels (quant/**/*_avx2.cc) are compiled a second time with it, under
// *_avxvnni names; the float kernels have nothing to gain from it and stay AVX2's.
enum class Isa : int { Scalar = 0, Avx2 = 1, AvxVnni = 2, Avx512 = 3 };
constexpr int kIsaCount = 4;

const char* isa_name(Isa isa);
// Parses "scalar" / "avx2" / "avxvnni" / "avx512"; false for anything else.
bool isa_from_name(const char* s, Isa* out);

// Whether code compiled for `isa` can run on a CPU with features `f`: avx2 needs AVX2+FMA+F16C;
// avxvnni those plus AVX-VNNI; avx512 needs AVX2+FMA+F16C plus AVX-512 F/BW/VL/DQ/VNNI/BF16 (its files are compiled with all of them,
// so a CPU with part of the set runs none of it).
bool isa_runs_on(Isa isa, const CpuFeatures& f);

struct KernelChoice {
  Isa isa = Isa::Scalar;
  // AMX-INT8 prefill tiles: Q4_K's over the GGUF layout (which Q4_K and Q6_K then keep), the
  // 32-element formats' over their 16-row groups (quant/packed/repack.cc); only with isa Avx512
  // (so FULCRUM_ISA=avx2 or avxvnni turns them off too) and once the process holds the tile state. FULCRUM_AMX=0 turns them off on an AMX CPU: the AVX-512 row-group
  // layouts and kernels then run there as on any AVX-512 CPU (the repack and grouped-GEMV tests
  // run that way, so they test those kernels on every AVX-512 host).
  bool amx_int8 = false;
  // Whether the packed decode GEMVs of the 32-element formats (Q4_0, Q5_1, Q8_0; Q5_0 has its own
  // choice below, equal to this one except at AVX-512 on Zen 4), the AVX2
  // K-quants and the AVX-512 Q4_K/Q5_K (16-row groups) prefetch their weights in software
  // (prefetchnta, packed/packed_x*.cc, packed_k_avx2.cc, packed_k16_avx512.cc) or leave it to the
  // hardware prefetchers (the AVX-512 Q6_K GEMV has its own choice below). Software prefetch, except on Zen 4, where it halved what one core drew from
  // DRAM: bench.matmul Q4_0 4864 x 896 from a 256 MiB ring, 1 thread, medians of 5 alternating
  // runs, 15.2 GB/s with it against 31.1 without (read probe 28-31); a 0.5B Q4_0 decode 80 ->
  // 105 tok/s, 1.3B 21 -> 24 (1 thread; 2 threads and Q8_0 unchanged). On the Zen 3 (AVX2) and
  // Zen 5 (AVX-512) hosts it was measured on, the software prefetch was the faster choice: Zen 5,
  // the same bench.matmul, medians of 40 runs, without -> with: Q4_K 16.5 -> 35.3 GB/s, Q5_0
  // 15.6 -> 37.2, Q4_0 36.6 -> 39.0, Q8_0 level at 41.5 (read probe 42). The
  // AVX2 K-quant GEMVs on the Zen 4 (FULCRUM_ISA=avx2), alternating processes, medians of 6,
  // 1 thread: 1.3B Q4_K decode 26.5 -> 28.1 tok/s (every run above every run), 1.3B Q4_K_M
  // 19.8 -> 22.6, 0.5B Q4_K_M 81.0 -> 81.3; 2 threads 1.3B Q4_K 32.8 -> 33.7 (noise).
  // Without software prefetch every packed format's walk reads one stream (measured on the Zen 4
  // on 2026-12-02: quant/tiles/gemm_tile_dispatch.h).
  // FULCRUM_GEMV_PREFETCH=0|1 overrides the choice (to compare the two).
  bool gemv_prefetch = true;
  // The AVX-512 Q5_0 decode GEMV's own choice (packed_x16_avx512.cc; at the AVX2 levels Q5_0
  // follows gemv_prefetch). Zen 4 runs this one walk with software prefetch where the others run
  // without. Measured there on 2026-12-02 (noisy host, read probe 26-30 GB/s), bench-cpu-ops,
  // alternating processes, Q5_0 prefetch off -> on with everything else as chosen: 0.5B Q4_K_M
  // (its gate/up/q/k/v/o are Q5_0) 1 thread 74.3 -> 82.3 tok/s median of 6 pairs (on faster in
  // 5), its ffn_gate 23.3 -> 26.8 GB/s; 2 threads 90.7 -> 100.2 (4 of 4); 0.5B Q4_K 1 thread
  // 85.9 -> 96.5 (4 of 4). Turning software prefetch on for every walk there (the 11-30 choice
  // reversed) measured no better for Q8_0 and Q4_K (bench.matmul 4864 x 896 from a 256 MiB ring,
  // medians of 5 alternating processes: 26.7 -> 21.8 and 30.1 -> 24.7 GB/s; Q5_0 26.7 -> 29.6),
  // and worse at FULCRUM_ISA=avx2 (0.5B Q4_K_M 81.3 -> 68.9 tok/s, 9 pairs), so only this walk
  // changes. FULCRUM_GEMV_PREFETCH sets it with the others; FULCRUM_GEMV_PREFETCH_Q5_0=0|1 alone.
  bool q5_0_gemv_prefetch = true;
  // With software prefetch, whether the packed decode GEMVs of the 32-element formats (Q4_0, Q4_1,
  // Q5_0, Q5_1, Q8_0) read four segments of their walk side by side, each prefetched 2 KiB ahead
  // into L1 (prefetcht0; the gemv_*_streams4 entry points, quant/tiles/gemm_tile_dispatch.h), or
  // their kernel's own walk: one stream 4.5 KiB ahead (prefetchnta) at AVX-512 and for the
  // AVX2-level Q8_0, four streams 2 KiB ahead (prefetchnta) for the other AVX2-level formats.
  // Same bits either way. Four streams everywhere but Zen 4 (whose only software-prefetched walk
  // there, Q5_0, was measured as one stream). Measured on 2026-12-02 on a Zen 5 EPYC (family 1Ah,
  // 2 vCPUs, read probe 30-38 GB/s at 1 thread) in one process alternating the walks every 12
  // decode tokens after a 512-token prompt (a slow moment of the host hits both), medians of
  // 8-10 pairs, one stream -> four for every packed format: 1 thread 0.5B Q8_0 50.3 -> 60.0 tok/s
  // (10 of 10 pairs faster), Q4_0 87.6 -> 103.2 (9/10), Q4_K (its 896-column matrices Q5_0) 83.4
  // -> 97.5 (9/10), Q4_K_M 77.7 -> 90.1 (10/10); 2 threads Q8_0 83.2 -> 106.0 (8/8), Q4_0 155.6
  // -> 171.9 (8/8); FULCRUM_ISA=avx2 1 thread Q8_0 49.1 -> 60.1 (8/8), Q4_0 (four streams
  // already, prefetchnta -> t0) 116.7 -> 113.0 (2/8, within the noise). bench.matmul from a
  // 256 MiB ring, 1 thread, 12 alternating rounds: Q8_0 4864 x 896 25.9 -> 32.0 GB/s, 896 x 4864
  // 21.6 -> 30.4; Q4_0 25.7 -> 29.9 and 19.6 -> 29.9. Against four streams with prefetchnta,
  // prefetcht0 was ahead in all four 0.5B files (1-4 %); 1 or 3 KiB ahead, 3 or 8 streams, or
  // prefetcht1 were no better. The K-quants keep their one stream: four measured 1.3B Q4_K at 2
  // threads 45-53 -> 36-38 tok/s (1 thread level), and the AVX-512 Q6_K's walk as four streams
  // 0.80-0.88x at 2 threads. (An earlier Zen 5 host measured one stream ahead of four streams
  // with prefetchnta, in separate processes: packed_x16_avx512.cc.) FULCRUM_GEMV_STREAMS=1|4
  // overrides.
  bool gemv_four_streams = true;
  // How far ahead of its weight stream the AVX-512 Q6_K decode GEMV (packed_k_avx512.cc)
  // prefetches (prefetchnta), in bytes; 0 leaves it to the hardware prefetchers. Its walk is
  // compute-heavy (60 GB/s from L3 on a Zen 5 against Q4_0's 104), and on AMD's AVX-512 cores the
  // hardware prefetchers alone keep too little in flight behind a walk that slow.
  //   Zen 4, 1536: bench.matmul 896 x 4864 Q6_K from a 256 MiB ring, 1 thread, 19.8-25.2 ->
  //   27.7-29.7 GB/s (read probe 27-30; 2 KiB 26.3-29.2, 1 KiB 26.2-27.6). Decode, alternating
  //   processes on a noisy host, medians of 5-6, 1 thread: 0.5B Q4_K_M (14 % of its bytes Q6_K)
  //   80.0 -> 91.0 and 84.9 -> 89.2 tok/s, 1.3B Q4_K_M (11 %) 20.4 -> 24.4 and 23.9 -> 25.8;
  //   2 threads within the noise.
  //   Zen 5 (family 1Ah), 3072: the same bench.matmul, medians of 60 runs, alternating
  //   processes: none 15.3 GB/s, 768 B 21.2, 1536 24.7-26.3, 2304 26.2-26.6, 3072 30.9-32.5,
  //   4608 29.7-31.5, 6144 28.8 (read probe 42); prefetcht0/t1 and four streams instead of two
  //   no better. In the 0.5B Q4_K_M's decode (1 thread, 48 tokens after 256, bench-cpu-ops)
  //   its Q6_K ffn_down ran 15-17 GB/s -> 20-22 (1536) -> 24-25 (3072), the token 97.6 -> 110;
  //   2 threads 31-32 -> 36-43 -> 44-46 GB/s. (Those sweeps ran the two-stream walk; the walk
  //   reads one stream since, and a re-sweep there put 3072, 4608 and 6144 within the host's
  //   noise (34-38 GB/s p50) and 1536 below them (30-34).)
  // On the host the kernel was first measured on (not AMD), prefetch measured the same at 512 B
  // ahead and 40 % slower at 2 KiB. FULCRUM_GEMV_PREFETCH_Q6_K=0|1 overrides the choice (1: the
  // CPU's distance, or 1536 where it has none).
  int q6_k_gemv_prefetch_bytes = 0;
  // Whether those prefetches go to L1 (prefetcht0) instead of prefetchnta: on Intel CPUs, whose
  // prefetchnta fills L1 alone and keeps few lines in flight (k_gemv_two_streams below). 2-vCPU
  // Intel Xeon (AMX) on 2026-12-03, bench.matmul Q6_K 896 x 4864 and 4864 x 1024 from a 256 MiB
  // ring, 1 / 2 threads, GB/s: hardware prefetch only 11.2-11.7 / 18.8-20.9, prefetchnta 1.5 KiB
  // ahead 7.7-7.8 / 13.9-14.0, prefetcht0 1.5 KiB ahead 13.6-13.8 / 23.9-24.8, 3 KiB 13.1 /
  // 24.2-24.8 (from L2 the kernel runs at 32.7 at 1 thread: it is partly bound by its arithmetic).
  // The AVX2-level Q6_K GEMV gained nothing from prefetcht0 there (1 thread 9.7 against 11.1-11.3
  // with the hardware alone, 2 threads 19.5-19.6 against 18.2-18.8). On Intel both levels read two
  // streams instead (k_gemv_two_streams below); this one-stream walk is theirs at
  // FULCRUM_GEMV_K_STREAMS=1.
  bool q6_k_gemv_prefetch_l1 = false;
  // With software prefetch, whether the Q4_K and Q5_K decode GEMVs (q4_kx16 / q5_kx16 at AVX-512,
  // q4_kx8 / q5_kx8 at the AVX2 levels) read two segments of their walk side by side, each
  // prefetched 2 KiB ahead into L1 (prefetcht0; the gemv_*_streams2 entry points), or their own
  // one stream 4.5 KiB ahead (prefetchnta). Two streams on Intel CPUs. There the one-stream
  // prefetchnta walk drew a third of the read bandwidth: its prefetches go to L1 alone and do not
  // start the L2 streamer, so no more than L1's fill buffers are in flight. 2-vCPU Intel Xeon
  // (AMX, avx512; read probe ~20 GB/s at 1 thread, ~40 at 2) on 2026-12-03, bench.matmul Q4_K
  // from a 256 MiB ring, 1 / 2 threads, 5632 x 2048 and 1024 x 4864, GB/s: one stream
  // prefetchnta 5.7-6.2 / 11.4-12.1; the same walk prefetcht0 13.0-13.8 / 22.7-27.3, prefetcht1
  // 12.6-13.0 / 23.1-25.3; hardware prefetch only 12.1-13.9 / 22.0-27.5; four streams prefetcht0
  // 2 KiB ahead 16.1-17.3 / 24.5-29.3; two streams 2 KiB ahead 15.5-16.4 / 28.2-30.9 (the
  // GGUF-layout Q4_K GEMV these groups replaced there: 11.8-14.1 / 22.1-27.1).
  // Q6_K's 4-row groups (q6_kx4, at every ISA) take the same two-stream walk (gemv_q6_kx4_streams2)
  // where this is set and the GEMVs prefetch in software. The same Xeon, later that day,
  // bench.matmul Q6_K 896 x 4864 and 4864 x 1024 from a 256 MiB ring, medians of 101, alternating
  // processes, 1 / 2 threads, GB/s: AVX-512, one stream prefetcht0 1.5 KiB ahead (below)
  // 12.4-13.7 / 23.6-25.5 -> two streams 15.3-16.1 / 26.1-29.3 (three or four streams no better,
  // two with the hardware prefetchers alone 10.2-11.2 / 18.2-20.2); FULCRUM_ISA=avx2, the
  // hardware prefetchers alone (q6_k_avx2_gemv_prefetch below) 10.9-11.1 / 19.3-20.0 -> 14.1-15.1
  // / 27.3-28.1 (AVX-512 Q4_0 896 x 4864 read 16.8 / 29.4 then). FULCRUM_GEMV_K_STREAMS=1|2 overrides.
  bool k_gemv_two_streams = false;
  // Whether the AVX2-level Q6_K decode GEMV (q6_kx4, packed_k_avx2.cc: one stream prefetchnta)
  // prefetches its one stream in software: where the others do, except on Intel CPUs, for the
  // reason above (there it reads two streams, k_gemv_two_streams, when the GEMVs prefetch). The
  // same Intel Xeon at FULCRUM_ISA=avx2, bench.matmul Q6_K 5632 x 2048 from a 256 MiB ring,
  // 1 / 2 threads: software 7.1-7.3 / 12.0-13.6 GB/s, hardware 12.0 / 23.0 (from L3: 8.7 against
  // 23.1). FULCRUM_GEMV_PREFETCH and FULCRUM_GEMV_PREFETCH_Q6_K set it with the others.
  bool q6_k_avx2_gemv_prefetch = true;
};

// Whether the Q6_K decode GEMV (q6_kx4) reads the two-stream walk (gemv_q6_kx4_streams2): where
// k_gemv_two_streams is set and its level prefetches in software (AVX-512: a
// q6_k_gemv_prefetch_bytes; the AVX2 levels: gemv_prefetch). repack.cc registers the walk by it;
// kernels_addon.cc reports it.
inline bool q6_k_gemv_two_streams(const KernelChoice& c, bool avx512) {
  return c.k_gemv_two_streams && (avx512 ? c.q6_k_gemv_prefetch_bytes > 0 : c.gemv_prefetch);
}

// The best choice for `f`, capped by `cap` (FULCRUM_ISA's value, or null for no cap).
KernelChoice choose_kernels(const CpuFeatures& f, const char* cap);

// The process's choice. The first call makes it and runs select_kernels; the addon's module
// init calls it so that happens at load.
const KernelChoice& kernel_choice();

// Whether callers that pick an ISA explicitly (tests and benchmarks comparing paths) may run
// `isa`: every level at or below the choice that this CPU runs (a CPU with AVX-512 may lack
// AVX-VNNI).
bool isa_allowed(Isa isa);

// The block formats' rows of the table (Q8_0, Q8_K, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K:
// vec_dot, prefill tiles, decode GEMVs) and their packed layouts, for `c` (quant/formats/registry.cc).
void register_quant_types(TypeTraits* table, const KernelChoice& c);

namespace quant {
// The packed layouts the CPU kernels read (quant/packed/repack.cc; formats whose prefill runs on
// AMX tiles, which read the GGUF layout, stay unpacked), then the prefill tiles and decode GEMVs
// (quant/tiles/gemm_registry.cc), which read those layouts: select_kernels calls them in this
// order after register_quant_types.
void register_packed_formats(const KernelChoice& c);
void register_gemm_tiles(TypeTraits* table, const KernelChoice& c);
}  // namespace quant

// Installs every kernel family's implementations for `c`: the float formats and primitives
// (kernels/), the block formats, their prefill tiles, decode GEMVs and packed layouts (quant/),
// all into `table`. Called once, by kernel_choice().
void select_kernels(const KernelChoice& c, TypeTraits* table);

}  // namespace fulcrum
