// Choosing the device a model executes on, and the hardware profile its plan is made for.
//
// `--device auto` (the default) uses a real GPU when the addon finds one and never picks an
// emulated or software device unless asked; `loopback` is the emulated accelerator (its own
// arena of `--vram` bytes, its own worker pool, a link with a bandwidth cap), which runs the CPU
// kernels — exact, not fast. The plan for a loopback run is made for *this* machine's measured
// CPU with the loopback device described as a GPU: its memory bandwidth and kernel rates are the
// CPU's at the device's thread count, its VRAM the arena, its link the cap. `vulkan` is a GPU
// through Vulkan compute; its plan is made with the profile's measurement of that device (its own
// kernels, copies and submissions), so on a software device (lavapipe) `auto`'s plan keeps the
// work on the CPU.
import { nativeDeviceWorkspaceBytes, nativeOpTable } from '../native/op-table';
import { listNativeDevices, type NativeDeviceInfo, type NativeLoopbackDevice } from '../native/model';
import type { CpuProfile, HardwareProfile } from '../hardware/types';
import type { ModelHparams } from '../model/hparams';

/** Where a model executes. */
export type ExecutionDevice = 'cpu' | 'loopback' | 'vulkan';
export type DeviceChoice = 'auto' | ExecutionDevice;

export interface DeviceOptions {
  device?: DeviceChoice;
  /** Device memory the plan may use; for loopback the arena's capacity. */
  vramBytes?: number;
  /** Loopback link cap, GB/s (0: uncapped). Default: see defaultLinkGBps. */
  linkGBps?: number;
  linkLatencyUs?: number;
  /** Loopback kernel threads. Default 1. */
  deviceThreads?: number;
}


export const DEVICE_CHOICES: DeviceChoice[] = ['auto', 'cpu', 'loopback', 'vulkan'];
/** Decision: a 1 GiB loopback arena unless --vram says otherwise (enough for the test models, small enough to force splits of real ones). */
export const DEFAULT_LOOPBACK_VRAM = 2 ** 30;

export function listDevices(): { found: NativeDeviceInfo[]; unavailable: string[] } {
  return listNativeDevices();
}

/** The device `choice` resolves to here: 'auto' is a real GPU when found (its plan may still keep everything on the CPU), else the CPU. */
export function resolveDevice(choice: DeviceChoice): { device: ExecutionDevice; reason: string; info?: NativeDeviceInfo } {
  if (!DEVICE_CHOICES.includes(choice)) throw new Error(`--device must be one of ${DEVICE_CHOICES.join(', ')}, got '${choice}'`);
  if (choice === 'cpu') return { device: 'cpu', reason: 'asked for' };
  if (choice === 'loopback') return { device: 'loopback', reason: 'asked for; an emulated accelerator: exact, not fast' };
  const { found, unavailable } = listDevices();
  const vulkan = found.find((d) => d.name === 'vulkan');
  if (choice === 'vulkan') {
    if (!vulkan) throw new Error(`--device vulkan: ${unavailable.find((u) => u.startsWith('vulkan')) ?? 'no Vulkan device'}`);
    return { device: 'vulkan', reason: `asked for: ${vulkan.description}`, info: vulkan };
  }
  if (vulkan) return { device: 'vulkan', reason: `found ${vulkan.description}`, info: vulkan };
  return { device: 'cpu', reason: `no GPU found (${unavailable.join('; ') || 'none listed'})` };
}

/**
 * This machine's measured profile with its Vulkan device as the GPU the plan may use: the
 * profile's own measurement of the device (engine/hardware/vulkan-profile.ts), `vramBytes` of it,
 * less the executor's workspace, and the KV formats its attention reads (the device's own list).
 */
export function vulkanHardware(base: HardwareProfile, opts: { vramBytes: number; workspaceBytes: number; kvFormats?: string[] }): HardwareProfile {
  if (!base.gpu) throw new Error('the hardware profile has no measured Vulkan device; run `fulcrum profile` on this machine');
  return { ...base, gpu: { ...base.gpu, memoryBytes: opts.vramBytes, reservedBytes: opts.workspaceBytes, ...(opts.kvFormats ? { kvFormats: opts.kvFormats } : {}) } };
}

/**
 * Decision: by default the loopback link runs at 0.4 × this machine's single-thread copy
 * bandwidth — about the ratio of a PCIe 4.0 x16 link (≈ 25 GB/s) to a desktop's DDR5 (≈ 60 GB/s).
 * Copy, not read: the loopback link really copies (memcpy on its lane's thread, where a GPU has
 * a DMA engine), so the cap must sit well below what one thread copies for the emulated transfer
 * time, not the memcpy, to set the pace (measured here: with the cap at 0.4 × read = 12.6 GB/s,
 * right at the 13.5 GB/s one thread copies, a KVPR step's copies took 2.6× the predicted time).
 */
export function defaultLinkGBps(hw: HardwareProfile): number {
  const one = hw.cpu.memory.byThreads?.find((t) => t.threads === 1);
  const copy = one?.copyGBps ?? hw.cpu.memory.copyGBps;
  return Math.max(0.1, 0.4 * copy);
}

/** Device bytes the executor needs besides weights and KV: activations, logits, converted activations (the addon's own figure, op table). */
export function deviceWorkspaceBytes(hp: ModelHparams, batchSize: number, headOnDevice = true, maxSequences = 1): number {
  return nativeDeviceWorkspaceBytes(hp, batchSize, headOnDevice, maxSequences);
}

/**
 * Device bytes a Vulkan placement needs beyond deviceWorkspaceBytes (native set_placement with a
 * device that has its own kernels): the K and V pools attention gathers a sequence's pages into
 * (one layer's whole context), their page table, and device copies of the norm weights and biases.
 */
export function vulkanWorkspaceBytes(hp: ModelHparams, contextLength: number): number {
  const pageTokens = nativeOpTable().kvPageTokens;
  const pages = Math.ceil(contextLength / pageTokens);
  const pools = 2 * pages * pageTokens * hp.nKvHeads * hp.headDim * 2;
  const vectors = (hp.nLayers * (2 * hp.nEmbd + hp.nHeads * hp.headDim + 2 * hp.nKvHeads * hp.headDim) + hp.nEmbd) * 4;
  // Each allocation is rounded up to 256 bytes: one per vector, page and buffer.
  return pools + pages * 4 + vectors + 256 * (6 * hp.nLayers + 16);
}

/**
 * The CPU profile as seen by an engine running `threads` threads. The profiler measures kernels at
 * the machine's core count (quick profiles at that count only), and the cost model takes a
 * kernel's best measured rate; an engine on fewer threads gets each rate measured at more threads
 * scaled down linearly (a decode GEMV is bound by one core's load and dot-product rate, not by
 * DRAM, at these thread counts: measured earlier on this project's machines, 1 thread ≈ half of
 * 2 for Q8_0/Q4_0 GEMV).
 */
export function cpuForThreads(cpu: CpuProfile, threads: number): CpuProfile {
  const scale = (t: number) => Math.min(1, threads / Math.max(1, t));
  return {
    ...cpu,
    threads: Math.min(cpu.threads, threads),
    kernels: cpu.kernels.map((k) => (k.threads <= threads ? k : {
      ...k, threads, ...(k.gbps !== undefined ? { gbps: k.gbps * scale(k.threads) } : {}), ...(k.gflops !== undefined ? { gflops: k.gflops * scale(k.threads) } : {}),
    })),
    attention: cpu.attention.map((a) => (a.threads <= threads ? a : { ...a, threads, gbps: a.gbps * scale(a.threads) })),
    peakGflops: cpu.peakGflops * scale(cpu.threads),
  };
}

/**
 * This machine's measured profile with the loopback device as its GPU. The loopback device runs
 * the CPU kernels on its own `deviceThreads` threads, so its rates are the CPU's measured ones
 * (with the profile's end-to-end calibration) scaled to that thread count: memory-bound kernels
 * by the read bandwidth at that count, compute by the share of the cores.
 */
export function loopbackHardware(base: HardwareProfile, opts: { vramBytes: number; linkGBps: number; linkLatencyUs: number; deviceThreads: number; workspaceBytes: number; uncapped?: boolean }): HardwareProfile {
  const cpu = base.cpu;
  const at = cpu.memory.byThreads?.find((t) => t.threads === opts.deviceThreads)?.readGBps;
  const share = Math.min(1, opts.deviceThreads / Math.max(1, cpu.threads));
  const read = at ?? cpu.memory.readGBps * share;
  const cal = cpu.calibration;
  // The device's kernels are the CPU's at its thread count (see cpuForThreads).
  const dev = cpuForThreads(cpu, opts.deviceThreads);
  const gemv = Math.max(0, ...dev.kernels.filter((k) => k.kernel === 'gemv' && k.gbps !== undefined).map((k) => k.gbps!)) * (cal?.gemvScale ?? 1);
  const gemm = Math.max(0, ...dev.kernels.filter((k) => k.kernel === 'gemm' && k.gflops !== undefined).map((k) => k.gflops!)) * (cal?.gemmScale ?? 1);
  const attn = Math.max(0, ...dev.attention.map((a) => a.gbps));
  return {
    ...base,
    name: `${base.name} + loopback`,
    gpu: {
      name: 'loopback',
      // An emulated device reads no storage directly (no GPUDirect Storage).
      gds: false,
      memoryBytes: opts.vramBytes,
      fp16Tflops: (gemm > 0 ? gemm : cpu.peakGflops * share) / 1000,
      memoryGBps: read,
      efficiency: { gemm: 1, gemv: gemv > 0 ? Math.min(1, gemv / read) : 0.7, attention: attn > 0 ? Math.min(1, attn / read) : 0.5 },
      launchOverheadUs: cal?.opOverheadUs ?? 5,
      reservedBytes: opts.workspaceBytes,
    },
    link: {
      name: opts.uncapped ? `loopback link (uncapped: memcpy at ${opts.linkGBps.toFixed(1)} GB/s)` : `loopback link (${opts.linkGBps.toFixed(1)} GB/s cap)`,
      h2dPinnedGBps: opts.linkGBps, h2dPageableGBps: opts.linkGBps, d2hPinnedGBps: opts.linkGBps, d2hPageableGBps: opts.linkGBps,
      latencyUs: opts.linkLatencyUs,
    },
    nvme: undefined,
  };
}

export function loopbackDevice(opts: { vramBytes: number; linkGBps: number; linkLatencyUs: number; deviceThreads: number }): NativeLoopbackDevice {
  return {
    kind: 'loopback',
    capacityBytes: opts.vramBytes,
    linkBytesPerSecond: opts.linkGBps * 1e9,
    linkLatencySeconds: opts.linkLatencyUs / 1e6,
    threads: opts.deviceThreads,
  };
}
