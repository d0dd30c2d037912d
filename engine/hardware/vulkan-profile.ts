// The GPU and link parts of a measured profile for a Vulkan device, from the addon's own kernels
// (vulkan.bench): per weight format a decode GEMV and a 64-token GEMM, one decode attention step,
// host<->device copies through the staging path the executor uses, a device-to-device copy, and
// an empty submission (launch + submit + wait). Everything here is measured on the device the
// executor will run on, with the kernels it will run, so a plan for `--device vulkan` (and
// `auto`'s choice) weighs this GPU as it really is — on lavapipe a software device several
// times slower than the CPU's own kernels, which `auto` then leaves idle.
//
// Decisions:
// - memoryGBps is the device-to-device copy rate (reads + writes); efficiency.gemv the best
//   format's GEMV rate over it, and `kernels` keeps every format's own GEMV and GEMM rate, which
//   the cost model prefers where it has the op's format.
// - fp16Tflops is the best measured GEMM rate (efficiency.gemm 1): no spec sheet to divide by.
// - Pinned and pageable rates are the same measurement: every copy goes through Fulcrum's
//   host-visible staging buffer.
import { loadAddon } from '../native/addon';
import { listNativeDevices } from '../native/model';
import { sig, summarize } from './stats';
import type { GpuProfile, LinkProfile } from './types';

export interface VulkanProbe {
  available: boolean;
  reason?: string;
  name?: string;
  type?: string;
  budgetBytes?: number;
  heapBytes?: number;
}

interface VulkanBench {
  bytes: number;
  h2dNs: number;
  d2hNs: number;
  d2dNs: number[];
  launchNs: number[];
  attentionNs: number[];
  attentionKvBytes: number;
  formats: { format: string; rows: number; cols: number; weightBytes: number; gemvNs: number[]; gemmNs: number[]; gemmTokens: number }[];
}

interface VulkanAddon {
  vulkan: { probe(): VulkanProbe; bench(o: { bytes: number; runs: number }): VulkanBench };
}

/** The addon's Vulkan probe ({available: false, reason} without a loader, device or shaders). */
export function vulkanProbe(): VulkanProbe {
  try {
    return loadAddon<VulkanAddon>().vulkan.probe();
  } catch (e) {
    return { available: false, reason: (e as Error).message };
  }
}

const median = (ns: number[]) => summarize(ns).medianNs;

function kvFormatsOf(device: { kvFormats: string[] } | undefined): { kvFormats?: string[] } {
  return device ? { kvFormats: device.kvFormats } : {};
}

export function profileVulkan(opts: { bytes: number; runs: number }): { gpu: GpuProfile; link: LinkProfile; notes: string[] } {
  const probe = vulkanProbe();
  if (!probe.available) throw new Error(`no Vulkan device: ${probe.reason}`);
  const b = loadAddon<VulkanAddon>().vulkan.bench(opts);
  const d2dGBps = (2 * b.bytes) / median(b.d2dNs);
  const kernels = b.formats.map((f) => ({
    format: f.format,
    gemvGBps: sig(f.weightBytes / median(f.gemvNs)),
    gemmTflops: sig((2 * f.rows * f.cols * f.gemmTokens) / median(f.gemmNs) / 1e3, 4),
  }));
  const bestGemv = Math.max(...kernels.map((k) => k.gemvGBps));
  const bestGemm = Math.max(...kernels.map((k) => k.gemmTflops));
  const attnGBps = b.attentionKvBytes / median(b.attentionNs);
  const h2d = sig(b.bytes / b.h2dNs), d2h = sig(b.bytes / b.d2hNs);
  const software = probe.type === 'cpu';
  const notes = [
    `Vulkan ${probe.name} (${probe.type}${software ? ': a software device running on this CPU' : ''}): GEMV ${kernels.map((k) => `${k.format} ${k.gemvGBps}`).join(', ')} GB/s; ` +
      `GEMM up to ${sig(bestGemm * 1e3)} GFLOP/s; decode attention ${sig(attnGBps)} GB/s of KV; device copy ${sig(d2dGBps)} GB/s; ` +
      `host→device ${h2d} GB/s, device→host ${d2h} GB/s; submit + wait ${sig(median(b.launchNs) / 1e3, 3)} µs`,
  ];
  const gpu: GpuProfile = {
    name: `${probe.name} (Vulkan)`,
    memoryBytes: probe.budgetBytes ?? 0,
    fp16Tflops: bestGemm,
    memoryGBps: sig(d2dGBps),
    efficiency: {
      gemm: 1,
      gemv: sig(Math.min(1, bestGemv / d2dGBps), 3),
      attention: sig(Math.min(1, attnGBps / d2dGBps), 3),
    },
    launchOverheadUs: sig(median(b.launchNs) / 1e3, 3),
    reservedBytes: 0,
    gds: false,
    kernels,
    measuredOn: { api: 'vulkan', device: probe.name ?? 'unnamed', type: probe.type ?? 'other', software },
    // What its attention shader reads: plans for this machine (the plan panels', `fulcrum plan
    // --hardware this`) keep attention on the CPU for another KV format, as the executor's do.
    ...kvFormatsOf(listNativeDevices().found.find((d) => d.name === 'vulkan')),
  };
  const link: LinkProfile = {
    name: `host↔${probe.name} (Vulkan staging)`,
    h2dPinnedGBps: h2d, h2dPageableGBps: h2d, d2hPinnedGBps: d2h, d2hPageableGBps: d2h,
    latencyUs: sig(median(b.launchNs) / 1e3, 3),
  };
  return { gpu, link, notes };
}
