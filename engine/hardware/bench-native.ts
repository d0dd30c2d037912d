// Typed access to the addon's `bench` part (native/src/bench): raw timings in nanoseconds per
// timed run. Statistics and the profile are built by profiler.ts from these.
import { loadAddon } from '../native/addon';

export interface RunOptions {
  warmups?: number;
  runs?: number;
}

export interface ThreadSamples {
  threads: number;
  ns: number[];
  /** Kernel benchmarks: CPU time of the calling thread (pool thread 0) per run. */
  cpuNs?: number[];
}

/** The concurrent transfer: a host memcpy thread standing in for a device's DMA engine. */
export type DisturbKind = 'none' | 'host-memcpy';

export interface DisturbOptions {
  /** Concurrent transfer during the timed runs (paper 000 §2.1). */
  disturb?: DisturbKind;
  disturbBytes?: number;
  /** Alternate blocks of runs without and with the transfer (byThreads / contendedByThreads). */
  interleave?: boolean;
}

export interface KernelBenchResult {
  byThreads: ThreadSamples[];
  /** With `interleave`: the runs taken while the transfer ran. */
  contendedByThreads?: ThreadSamples[];
  bytesPerRun: number;
  flopsPerRun: number;
  /** Copies of the data walked by consecutive runs, so each run reads from DRAM. */
  copies: number;
  transfer?: { kind: DisturbKind; bytes: number; ns: number };
}

export interface BenchAddon {
  /**
   * The one read-bandwidth benchmark (the profiler's, bench:cpu's decode limit, the quant kernels'
   * ceiling). `prefetch`: each line also prefetched 2 KiB ahead, as the decode kernels do.
   */
  memoryRead(o: { bytes: number; threads: number[]; prefetch?: boolean; streams?: number } & RunOptions): Promise<ThreadSamples[]>;
  memoryCopy(o: { bytes: number; threads: number[] } & RunOptions): Promise<ThreadSamples[]>;
  matmul(o: { type: number; rows: number; cols: number; tokens: number; threads: number[]; ringBytes?: number }
    & RunOptions & DisturbOptions): Promise<KernelBenchResult>;
  /** `tokens` query tokens (default 1) at the last positions of kvLen: a speculative step's verification. */
  attention(o: { kvLen: number; heads: number; kvHeads: number; headDim: number; tokens?: number; threads: number[]; ringBytes?: number }
    & RunOptions & DisturbOptions): Promise<KernelBenchResult>;
  /** Cancels every benchmark started before this call (they return early). */
  cancel(): void;
}

interface AddonWithBench {
  bench?: BenchAddon;
  kernels?: { physicalCores?: () => number; isaLevel?: () => string };
}

/** The bench part; throws naming what is missing when the addon predates it. */
export function benchAddon(): BenchAddon {
  const addon = loadAddon<AddonWithBench>();
  if (!addon.bench) throw new Error('fulcrum: the native addon has no `bench` part; rebuild it (npm run build:native)');
  return addon.bench;
}

/**
 * The read layouts bestReadBandwidth tries: one linear stream per thread (the hardware
 * prefetchers' best case on most machines), and 4 or 8 segments side by side with software
 * prefetch, which is how the decode GEMV reads (quant/tiles/gemm_tile_dispatch.h). On the 2-vCPU
 * Zen 3 VM this project runs on, one core drew 10.7 GB/s from one stream and 12.7 from four; a
 * limit probed with one stream only was beaten by the GEMV itself (119 %).
 */
const READ_LAYOUTS: readonly { streams: number; prefetch: boolean }[] = [
  { streams: 1, prefetch: false },
  { streams: 4, prefetch: true },
  { streams: 8, prefetch: true },
];

/**
 * Best read bandwidth in bytes/s of `threads` threads streaming a `bytes` buffer (bench.memoryRead,
 * no warm-up: the buffer is first touched before timing), over `runs` rounds of every read layout
 * (READ_LAYOUTS), alternating so a slow moment of the machine hits each. The best pass: other load
 * on the machine only ever lowers the figure, and the limit estimated is what the memory system
 * can deliver to the fastest way of reading it.
 */
export async function bestReadBandwidth(bytes: number, threads: number, runs: number): Promise<number> {
  let bestNs = Infinity;
  for (let round = 0; round < runs; round++) {
    for (const layout of READ_LAYOUTS) {
      const [samples] = await benchAddon().memoryRead({ bytes, threads: [threads], warmups: 0, runs: 1, ...layout });
      if (!samples || samples.ns.length === 0) throw new Error('fulcrum: bench.memoryRead returned no timed run (cancelled?)');
      bestNs = Math.min(bestNs, ...samples.ns);
    }
  }
  return bytes / (bestNs / 1e9);
}

/** Physical cores as the engine's thread pool sees them (affinity-aware), when the addon says. */
export function nativePhysicalCores(): number | undefined {
  try {
    const n = loadAddon<AddonWithBench>().kernels?.physicalCores?.();
    return typeof n === 'number' && n > 0 ? n : undefined;
  } catch {
    return undefined;
  }
}

/** The ISA level the kernels were dispatched to ('scalar' | 'avx2' | 'avxvnni' | 'avx512'), if known. */
export function nativeIsaLevel(): string | undefined {
  try {
    return loadAddon<AddonWithBench>().kernels?.isaLevel?.();
  } catch {
    return undefined;
  }
}
