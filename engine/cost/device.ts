// Device times of one op's work from a hardware profile: a roofline (compute vs memory traffic)
// using measured efficiencies, plus a fixed per-op overhead (kernel launch on the GPU, thread
// pool hand-off on the CPU). Transfer times from the link profile.

import type { CpuProfile, GpuProfile, HardwareProfile } from '../hardware/types';
import type { OpWork } from './types';

const MS = 1e3;
/** Decision: per-op fixed cost on the CPU (thread-pool wake-up and barrier), 5 µs. */
const CPU_OP_OVERHEAD_MS = 0.005;

function isLinear(w: OpWork): boolean { return w.weightBytes > 0; }
function isAttention(w: OpWork): boolean { return w.kind === 'scores' || w.kind === 'wv'; }

/**
 * Best rate over thread counts for a kernel and format (paper 000 keeps the fastest thread
 * count), times the profile's end-to-end calibration scale when it has one (CpuCalibration).
 */
export function cpuKernelRate(cpu: CpuProfile, kernel: 'gemv' | 'gemm', format: string): number {
  const scale = cpu.calibration ? (kernel === 'gemv' ? cpu.calibration.gemvScale : cpu.calibration.gemmScale) : 1;
  return measuredKernelRate(cpu, kernel, format) * scale;
}

function measuredKernelRate(cpu: CpuProfile, kernel: 'gemv' | 'gemm', format: string): number {
  let best = 0;
  const fmt = format.toUpperCase();
  for (const k of cpu.kernels) {
    if (k.kernel !== kernel || k.format.toUpperCase() !== fmt) continue;
    const v = kernel === 'gemv' ? k.gbps : k.gflops;
    if (v !== undefined && v > best) best = v;
  }
  if (best > 0) return best;
  // Decision: a format the profile did not measure runs at 0.7 of the DRAM bandwidth (GEMV) and
  // 0.3 of the peak (GEMM) — conservative, since an unmeasured kernel is likely a slower path.
  return kernel === 'gemv' ? cpu.memory.readGBps * 0.7 : cpu.peakGflops * 0.3;
}

/** CPU attention KV-read rate (GB/s) at a KV length: linear interpolation over measured points. */
export function cpuAttentionGBps(cpu: CpuProfile, kvLength: number): number {
  const pts = cpu.attention.length ? bestByLength(cpu) : [];
  if (!pts.length) return cpu.memory.readGBps * 0.5; // Decision: unmeasured attention at half DRAM bandwidth
  if (kvLength <= pts[0]![0]) return pts[0]![1];
  for (let i = 1; i < pts.length; i++) {
    const [x1, y1] = pts[i]!;
    if (kvLength <= x1) {
      const [x0, y0] = pts[i - 1]!;
      return y0 + ((y1 - y0) * (kvLength - x0)) / (x1 - x0);
    }
  }
  return pts[pts.length - 1]![1];
}

function bestByLength(cpu: CpuProfile): [number, number][] {
  const m = new Map<number, number>();
  for (const a of cpu.attention) m.set(a.kvLength, Math.max(m.get(a.kvLength) ?? 0, a.gbps));
  return [...m.entries()].sort((a, b) => a[0] - b[0]);
}

/** Uncontended CPU time of an op, ms. `kvLength` = keys per sequence (for attention rates). */
export function cpuOpMs(cpu: CpuProfile, w: OpWork, kvLength: number): number {
  const actBytes = w.actInBytes + w.actOutBytes;
  let t: number;
  if (isLinear(w)) {
    const gemv = cpuKernelRate(cpu, 'gemv', w.format) * 1e9;
    const gemm = cpuKernelRate(cpu, 'gemm', w.format) * 1e9;
    t = Math.max(w.weightBytes / gemv, w.flops / gemm) + actBytes / (cpu.memory.readGBps * 1e9);
  } else if (isAttention(w)) {
    const bw = cpuAttentionGBps(cpu, kvLength) * 1e9;
    t = Math.max(w.kvReadBytes / bw, w.flops / (cpu.peakGflops * 0.3 * 1e9)) + actBytes / (cpu.memory.readGBps * 1e9);
  } else {
    // Element-wise ops: streaming, or vector-ALU bound (Decision: 0.25 of the matrix peak).
    t = Math.max(actBytes / (cpu.memory.readGBps * 1e9), w.flops / (cpu.peakGflops * 0.25 * 1e9));
  }
  // A calibrated profile carries this machine's fitted per-op cost (thread hand-off, barriers).
  const overheadMs = cpu.calibration?.opOverheadUs !== undefined ? cpu.calibration.opOverheadUs / 1e3 : CPU_OP_OVERHEAD_MS;
  return t * MS + overheadMs;
}

/** GPU time of an op (operands already in VRAM), ms. */
export function gpuOpMs(gpu: GpuProfile, w: OpWork): number {
  const bytes = w.weightBytes + w.kvReadBytes + w.kvWriteBytes + w.actInBytes + w.actOutBytes;
  const eff = isAttention(w) ? gpu.efficiency.attention : gpu.efficiency.gemv;
  // A measured kernel for this op's weight format (a profiled Vulkan device) replaces the peaks.
  const k = isLinear(w) && w.format ? gpu.kernels?.find((x) => x.format === w.format) : undefined;
  if (k) {
    const t = Math.max(w.weightBytes / (k.gemvGBps * 1e9), w.flops / (k.gemmTflops * 1e12)) + (bytes - w.weightBytes) / (gpu.memoryGBps * 1e9);
    return t * MS + gpu.launchOverheadUs / 1e3;
  }
  const compute = w.flops / (gpu.fp16Tflops * 1e12 * gpu.efficiency.gemm);
  const memory = bytes / (gpu.memoryGBps * 1e9 * eff);
  return Math.max(compute, memory) * MS + gpu.launchOverheadUs / 1e3;
}

/** Transfer time over the host link, ms (0 bytes → 0). */
export function transferMs(hw: HardwareProfile, bytes: number, direction: 'h2d' | 'd2h', pinned = true): number {
  if (bytes <= 0) return 0;
  const l = hw.link;
  if (!l) return Infinity;
  const gbps = direction === 'h2d' ? (pinned ? l.h2dPinnedGBps : l.h2dPageableGBps) : (pinned ? l.d2hPinnedGBps : l.d2hPageableGBps);
  return (bytes / (gbps * 1e9)) * MS + l.latencyUs / 1e3;
}

/**
 * Storage→device time over all NVMe devices (GDS), ms; undefined without NVMe or when the GPU
 * does not support GPUDirect Storage (GeForce cards; unknown counts as unsupported).
 */
export function s2dMs(hw: HardwareProfile, bytes: number): number | undefined {
  if (!hw.nvme || bytes <= 0 || hw.gpu?.gds !== true) return undefined;
  return (bytes / (hw.nvme.readGBps * 1e9)) * MS;
}
