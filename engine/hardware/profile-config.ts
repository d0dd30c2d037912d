// What the profiler measures and how big: pure functions of the machine's shape (cores, cache,
// free memory) and the mode (full or --quick), so the plan can be tested without running it.
//
// Decisions (the papers leave the profiling grid open: digest 000 §5 "range of the thread
// sweep", 003 §6 "the profiling grid", 004 §6):
// - Thread sweep: every count 1..cores up to 8 cores, then powers of two plus cores/2 and cores
//   (paper 000 keeps the minimum latency over the sweep: all cores is not always best).
// - GEMV (decode, 1 token) on a 4096×4096 matrix, the size of a 7B model's attention
//   projections; GEMM at 32/128/512 tokens on 2048 columns with rows chosen so one run is about
//   `flopsPerRun` FLOPs (1 GFLOP; 0.5 quick): compute-bound, yet inside the time budget.
// - Decode attention at KV lengths 128…8192 (×2 steps) with 32 query heads, 8 KV heads and
//   head dimension 128 (the GQA shape of today's 7–8B code models).
// - Memory-bound kernels walk a ring of copies at least twice the last-level cache, so each
//   run streams from DRAM as decode does; memory bandwidth is measured on a buffer of that size.
// - Contention: the GEMV of F16 (the paper's BF16 stand-in) timed alone and then under a
//   concurrent transfer: a host memcpy thread standing in for the device's DMA engine. That
//   thread takes a core a DMA would not, so the kernel runs on cores − 1.

export const PROFILE_FORMATS = ['F32', 'F16', 'Q8_0', 'Q4_0', 'Q4_K'] as const;
export type ProfileFormat = (typeof PROFILE_FORMATS)[number];

/** ggml type ids of the profiled formats (ggml's numbering, as in GGUF). */
export const FORMAT_TYPE_ID: Record<ProfileFormat, number> = { F32: 0, F16: 1, Q8_0: 8, Q4_0: 2, Q4_K: 12 };

export interface MachineShape {
  physicalCores: number;
  /** Last-level cache in bytes, when known. */
  llcBytes?: number;
  availableBytes: number;
}

export interface RunCounts {
  warmups: number;
  runs: number;
}

export interface ProfileConfig {
  quick: boolean;
  memory: { bytes: number; threads: number[] } & RunCounts;
  gemv: { rows: number; cols: number; threads: number[]; formats: ProfileFormat[] } & RunCounts;
  gemm: { cols: number; tokens: number[]; flopsPerRun: number; threads: number[]; formats: ProfileFormat[] } & RunCounts;
  attention: { kvLengths: number[]; heads: number; kvHeads: number; headDim: number; threads: number[] } & RunCounts;
  contention: { format: ProfileFormat; threads: number; disturb: 'host-memcpy'; disturbBytes: number } & RunCounts;
  /** Bytes of data copies that memory-bound kernels walk (≥ 2× LLC where memory allows). */
  ringBytes: number;
  /** End-to-end calibration run of the executor (engine/profile/calibration-run.ts); absent = skipped. */
  calibration?: { promptTokens: number; genTokens: number; runs: number; maxRuns?: number; threads: number };
}

const MiB = 2 ** 20;

export function threadSweep(cores: number): number[] {
  const n = Math.max(1, Math.floor(cores));
  if (n <= 8) return Array.from({ length: n }, (_, i) => i + 1);
  const s = new Set<number>();
  for (let t = 1; t <= n; t *= 2) s.add(t);
  s.add(Math.floor(n / 2));
  s.add(n);
  return [...s].sort((a, b) => a - b);
}

/**
 * Ring/buffer size: 2× LLC, at least 256 MiB, at most 512 MiB and 1/8 of free memory. The cap
 * keeps setup (first touch, replication) inside the time budget; a VM may report the host's
 * whole LLC (480 MiB here) while its share is far smaller, and measured bandwidth was already
 * flat from 256 MiB to 1 GiB on this machine.
 */
export function ringBytesFor(m: MachineShape): number {
  const want = Math.max(256 * MiB, 2 * (m.llcBytes ?? 256 * MiB));
  const cap = Math.min(512 * MiB, m.availableBytes / 8);
  return Math.max(32 * MiB, Math.floor(Math.min(want, cap) / MiB) * MiB);
}

export function profileConfig(m: MachineShape, quick: boolean): ProfileConfig {
  const cores = Math.max(1, Math.floor(m.physicalCores));
  const sweep = threadSweep(cores);
  const ringBytes = ringBytesFor(m);
  const kernelThreads = quick ? [cores] : sweep;
  const disturb = 'host-memcpy' as const;
  return {
    quick,
    ringBytes,
    memory: { bytes: ringBytes, threads: quick ? [...new Set([1, cores])] : sweep, warmups: 1, runs: quick ? 3 : 7 },
    gemv: { rows: 4096, cols: 4096, threads: kernelThreads, formats: [...PROFILE_FORMATS], warmups: 2, runs: quick ? 9 : 25 },
    gemm: {
      cols: 2048, tokens: quick ? [128] : [32, 128, 512], flopsPerRun: quick ? 0.5e9 : 1e9,
      threads: kernelThreads, formats: [...PROFILE_FORMATS], warmups: 1, runs: quick ? 3 : 5,
    },
    attention: {
      kvLengths: quick ? [512, 8192] : [128, 256, 512, 1024, 2048, 4096, 8192],
      heads: 32, kvHeads: 8, headDim: 128, threads: kernelThreads, warmups: 2, runs: quick ? 5 : 15,
    },
    contention: {
      format: 'F16', threads: disturb === 'host-memcpy' ? Math.max(1, cores - 1) : cores, disturb,
      disturbBytes: Math.min(256 * MiB, Math.floor(ringBytes / 4)), warmups: 2, runs: quick ? 12 : 30,
    },
    // Decision: prompt 256 (one prefill batch), 32 decoded tokens, the executor's default thread
    // count (all physical cores, as generation uses); fastest of 5 runs (3 quick): ~2 s each.
    // At least 2 runs (quick) or 3, more until the two fastest agree (calibration-run.ts), at most 5 or 8.
    calibration: { promptTokens: 256, genTokens: 32, runs: quick ? 2 : 3, maxRuns: quick ? 5 : 8, threads: cores },
  };
}

/** GEMM rows so that one run of `tokens` × `cols` is about `flops` FLOPs (multiple of 64, ≥ 256). */
export function gemmRows(cols: number, tokens: number, flops: number): number {
  const rows = Math.round(flops / (2 * cols * tokens) / 64) * 64;
  return Math.min(16384, Math.max(256, rows));
}
