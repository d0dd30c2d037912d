// This machine as the profiler sees it: its facts (CPU, memory, GPUs through the native CUDA
// probe, the kernels' ISA level) and their fingerprint. Taken once per process: the CUDA probe
// initialises the driver, which is not free.
import { benchAddon, nativeIsaLevel, nativePhysicalCores, type CudaProbe } from './bench-native';
import { vulkanProbe, type VulkanProbe } from './vulkan-profile';
import { collectMachineFacts, fingerprintOf, type MachineFacts } from './fingerprint';

export interface ThisMachine {
  facts: MachineFacts;
  fingerprint: string;
  cuda: CudaProbe;
  vulkan: VulkanProbe;
}

let cached: ThisMachine | undefined;

/** Throws when the native addon is missing (its probe and ISA level are part of the key). */
export function currentFingerprint(): ThisMachine {
  if (cached) return cached;
  const cuda = benchAddon().cudaProbe();
  const vulkan = vulkanProbe();
  const gpus = cuda.devices.map((d) => `${d.name} (${Math.round(d.totalBytes / 2 ** 30)} GiB)`);
  // The Vulkan device is part of the key: a profile made before it (or its driver) was there is stale.
  if (vulkan.available) gpus.push(`Vulkan ${vulkan.name} (${vulkan.type})`);
  const facts = collectMachineFacts({ gpus, isaLevel: nativeIsaLevel() ?? 'unknown', physicalCores: nativePhysicalCores() });
  cached = { facts, fingerprint: fingerprintOf(facts), cuda, vulkan };
  return cached;
}
