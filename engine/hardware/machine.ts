// This machine as the profiler sees it: its facts (CPU, memory, the Vulkan device the executor
// would run on, the kernels' ISA level) and their fingerprint. Taken once per process: the
// Vulkan probe initialises the driver, which is not free.
import { nativeIsaLevel, nativePhysicalCores } from './bench-native';
import { vulkanProbe, type VulkanProbe } from './vulkan-profile';
import { collectMachineFacts, fingerprintOf, type MachineFacts } from './fingerprint';

export interface ThisMachine {
  facts: MachineFacts;
  fingerprint: string;
  vulkan: VulkanProbe;
}

let cached: ThisMachine | undefined;

/** Throws when the native addon is missing (its probe and ISA level are part of the key). */
export function currentFingerprint(): ThisMachine {
  if (cached) return cached;
  const vulkan = vulkanProbe();
  // The GPU is the device that executes (Vulkan), and it is part of the key: a profile made
  // before it (or its driver) was there is stale.
  const gpus = vulkan.available ? [`Vulkan ${vulkan.name} (${vulkan.type})`] : [];
  const facts = collectMachineFacts({ gpus, isaLevel: nativeIsaLevel() ?? 'unknown', physicalCores: nativePhysicalCores() });
  cached = { facts, fingerprint: fingerprintOf(facts), vulkan };
  return cached;
}
