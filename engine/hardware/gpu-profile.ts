// The GPU and link parts of a measured profile, from the native CUDA driver benchmarks
// (bench.cudaLink): host↔device bandwidth pageable and pinned, per-transfer latency, device
// memory bandwidth (device-to-device copy), a launch-overhead proxy, and the memory the context
// keeps. Peaks come from the device's own attributes (SM count, clocks, bus width).
//
// Decisions:
// - fp16Tflops is the dense tensor peak derived from compute capability × SMs × clock (the
//   per-SM rates of NVIDIA's architecture documents); memoryGBps from memory clock × 2 × bus.
// - Efficiencies are measured with cuBLAS (loaded at run time; the project has no CUDA kernels
//   of its own yet): gemm = FP16 GEMM FLOP/s ÷ fp16Tflops, gemv = weight bytes/s of an FP16
//   GEMV ÷ memoryGBps, attention = KV bytes/s of one decode-attention step (two batched
//   products) ÷ memoryGBps. Without cuBLAS, gemv and attention fall back to the measured
//   device-to-device copy efficiency and gemm to the presets' typical 0.6, and a note says so.
import type { BenchAddon, CudaDevice, CudaProbe, CublasSamples } from './bench-native';
import { sig, summarize } from './stats';
import type { GpuProfile, LinkProfile } from './types';

/** Dense FP16 tensor FLOPs per clock per SM, by compute capability (major.minor). */
export function fp16FlopsPerClockPerSm(cc: string): number | undefined {
  const [maj, min] = cc.split('.').map(Number) as [number, number];
  if (!Number.isFinite(maj)) return undefined;
  if (maj >= 10 && maj < 12) return 8192;  // Blackwell data-centre
  if (maj === 9) return 4096;              // Hopper
  if (maj === 8 && min === 0) return 2048; // A100
  if (maj === 7 || maj === 8 || maj === 12) return 1024; // Volta, Turing, GA10x, Ada, consumer Blackwell
  if (maj === 6 && min === 0) return 256;  // P100: FP16 at twice FP32, no tensor cores
  return undefined;
}

export function specPeaks(d: CudaDevice): { fp16Tflops?: number; memoryGBps?: number } {
  const perClock = fp16FlopsPerClockPerSm(d.computeCapability);
  const fp16Tflops = perClock && d.clockKHz > 0 && d.multiprocessors > 0
    ? (perClock * d.multiprocessors * d.clockKHz * 1e3) / 1e12 : undefined;
  const memoryGBps = d.memoryClockKHz > 0 && d.memoryBusBits > 0
    ? (d.memoryClockKHz * 1e3 * 2 * (d.memoryBusBits / 8)) / 1e9 : undefined;
  return { fp16Tflops, memoryGBps };
}

/** Efficiencies live in (0, 1]; a measurement above a specification peak (boost clocks) is 1. */
function clampEff(x: number): number {
  return Math.min(1, Math.max(1e-3, x));
}

function gbps(bytes: number, ns: number[]): number {
  return sig(bytes / summarize(ns).medianNs);
}

export async function profileGpu(bench: BenchAddon, probe: CudaProbe, c: { bytes: number; warmups: number; runs: number }):
Promise<{ gpu: GpuProfile; link: LinkProfile; notes: string[] }> {
  const dev = probe.devices[0];
  if (!dev) throw new Error('no CUDA device in the probe');
  const notes: string[] = [];
  if (probe.devices.length > 1) notes.push(`${probe.devices.length} CUDA devices; profiled device 0 (${dev.name})`);
  const s = await bench.cudaLink({ device: 0, bytes: c.bytes, warmups: c.warmups, runs: c.runs });
  const d2dGBps = sig((2 * s.bytes) / summarize(s.d2d).medianNs);  // a copy reads and writes every byte
  const peaks = specPeaks(dev);
  const memoryGBps = peaks.memoryGBps ?? d2dGBps;
  if (!peaks.memoryGBps) notes.push('GPU memory peak unknown from the device attributes; the measured copy bandwidth is used');
  const copyEff = clampEff(d2dGBps / memoryGBps);
  let eff = { gemm: 0.6, gemv: copyEff, attention: copyEff };
  let blas: CublasSamples | undefined;
  try {
    blas = await bench.cublas({ device: 0, warmups: c.warmups, runs: c.runs });
  } catch (e) {
    notes.push(`GPU kernels not timed (${(e as Error).message}): efficiency.gemm 0.6 assumed, gemv and attention from the copy bandwidth`);
  }
  let fp16Tflops = peaks.fp16Tflops;
  if (blas) {
    const gemmTflops = (2 * blas.gemm.m * blas.gemm.n * blas.gemm.k) / summarize(blas.gemm.ns).medianNs / 1e3;
    if (!fp16Tflops) {
      fp16Tflops = gemmTflops;
      notes.push(`FP16 peak of ${dev.name} unknown from its attributes (compute capability ${dev.computeCapability}); the measured GEMM rate is used as the peak`);
    }
    const gemvGBps = (2 * blas.gemv.rows * blas.gemv.cols) / summarize(blas.gemv.ns).medianNs;
    const attnGBps = (2 * 2 * blas.attention.heads * blas.attention.kvLen * blas.attention.headDim) / summarize(blas.attention.ns).medianNs;
    eff = { gemm: clampEff(gemmTflops / fp16Tflops), gemv: clampEff(gemvGBps / memoryGBps), attention: clampEff(attnGBps / memoryGBps) };
    notes.push(`GPU (${blas.library}): FP16 GEMM ${sig(gemmTflops)} TFLOP/s, GEMV ${sig(gemvGBps)} GB/s, decode attention ${sig(attnGBps)} GB/s of KV, device copy ${d2dGBps} GB/s`);
  }
  if (!fp16Tflops) throw new Error(`cannot derive the FP16 peak of ${dev.name} (compute capability ${dev.computeCapability}) and cuBLAS did not run`);
  const gpu: GpuProfile = {
    name: dev.name,
    memoryBytes: dev.totalBytes,
    fp16Tflops: sig(fp16Tflops),
    memoryGBps: sig(memoryGBps),
    efficiency: { gemm: sig(eff.gemm, 3), gemv: sig(eff.gemv, 3), attention: sig(eff.attention, 3) },
    launchOverheadUs: sig(summarize(s.tinyOp).medianNs / 1e3, 3),
    reservedBytes: Math.max(0, s.totalBytes - s.freeBytes),
  };
  const link: LinkProfile = {
    name: `host↔${dev.name}`,
    h2dPinnedGBps: gbps(s.bytes, s.h2dPinned),
    h2dPageableGBps: gbps(s.bytes, s.h2dPageable),
    d2hPinnedGBps: gbps(s.bytes, s.d2hPinned),
    d2hPageableGBps: gbps(s.bytes, s.d2hPageable),
    latencyUs: sig(summarize(s.smallH2d).medianNs / 1e3, 3),
  };
  return { gpu, link, notes };
}
