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
  // AMX-INT8 prefill tiles for Q8_0/Q4_0/Q5_0/Q4_K; only with isa Avx512 (so FULCRUM_ISA=avx2 or
  // avxvnni turns them off too). With them, those formats and Q6_K stay in the GGUF layout
  // (quant/packed/repack.cc). FULCRUM_AMX=0 turns them off on an AMX CPU: the AVX-512 row-group
  // layouts and kernels then run there as on any AVX-512 CPU (the repack and grouped-GEMV tests
  // run that way, so they test those kernels on every AVX-512 host).
  bool amx_int8 = false;
  // Whether the packed decode GEMVs of the 32-element formats (Q4_0, Q5_0, Q5_1, Q8_0), the AVX2
  // K-quants and the AVX-512 Q4_K/Q5_K (16-row groups) prefetch their weights in software
  // (prefetchnta, packed/packed_x*.cc, packed_k_avx2.cc, packed_k16_avx512.cc) or leave it to the
  // hardware prefetchers (the AVX-512 Q6_K GEMV has its own choice below). Software prefetch, except on Zen 4, where it halved what one core drew from
  // DRAM: bench.matmul Q4_0 4864 x 896 from a 256 MiB ring, 1 thread, medians of 5 alternating
  // runs, 15.2 GB/s with it against 31.1 without (read probe 28-31); a 0.5B Q4_0 decode 80 ->
  // 105 tok/s, 1.3B 21 -> 24 (1 thread; 2 threads and Q8_0 unchanged). On the Zen 3 (AVX2) and
  // Zen 5 (AVX-512) hosts it was measured on, the software prefetch was the faster choice. The
  // AVX2 K-quant GEMVs on the Zen 4 (FULCRUM_ISA=avx2), alternating processes, medians of 6,
  // 1 thread: 1.3B Q4_K decode 26.5 -> 28.1 tok/s (every run above every run), 1.3B Q4_K_M
  // 19.8 -> 22.6, 0.5B Q4_K_M 81.0 -> 81.3; 2 threads 1.3B Q4_K 32.8 -> 33.7 (noise).
  // FULCRUM_GEMV_PREFETCH=0|1 overrides the choice (to compare the two).
  bool gemv_prefetch = true;
  // Whether the AVX-512 Q6_K decode GEMV (packed_k_avx512.cc) prefetches its weights in software,
  // 1.5 KiB ahead (prefetchnta), or leaves them to the hardware prefetchers. Software on Zen 4
  // only, the opposite of the formats above: Q6_K's walk is compute-heavy (37-38 GB/s from L3
  // against Q4_0's 74), and on the Zen 4 the hardware prefetchers alone kept too little in
  // flight behind it: bench.matmul 896 x 4864 Q6_K from a 256 MiB ring, 1 thread, 19.8-25.2 ->
  // 27.7-29.7 GB/s (read probe 27-30). Decode, alternating processes on a noisy host, medians of
  // 5-6, 1 thread: 0.5B Q4_K_M (14 % of its bytes Q6_K) 80.0 -> 91.0 and 84.9 -> 89.2 tok/s,
  // 1.3B Q4_K_M (11 %) 20.4 -> 24.4 and 23.9 -> 25.8; 2 threads within the noise (0.5B 115 -> 109,
  // then 87 -> 93 over 10 rounds).
  // On the host the kernel was first measured on, prefetch measured the same at 512 B ahead
  // and 40 % slower at 2 KiB. FULCRUM_GEMV_PREFETCH_Q6_K=0|1 overrides the choice.
  bool q6_k_gemv_prefetch = false;
};

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
