// From load options to what executes: the device (engine/runtime/devices.ts), the plan of the
// requested policy for this machine with that device, and its lowering to a native placement
// (engine/runtime/lowering.ts).
import { totalmem } from 'node:os';
import type { GgufFile } from '../model/gguf';
import type { ModelHparams } from '../model/hparams';
import { shapeFromGguf } from '../model/shape';
import { planRequest } from '../plan/api';
import type { NativeDevice, NativePlacement, NativePrefillPlacement } from '../native/model';
import { prefillPlacement } from './prefill-placement';
import { cpuForThreads, defaultLinkGBps, deviceWorkspaceBytes, DEFAULT_LOOPBACK_VRAM, loopbackDevice, loopbackHardware, resolveDevice, vulkanHardware, vulkanWorkspaceBytes } from './devices';
import { lowerPlan, sequenceKvAssignment } from './lowering';
import { sizeText } from '../plan/predict';
import type { ExecutionInfo, ExecutionOptions } from './types';

export interface ExecutionSetup {
  info: ExecutionInfo;
  placement: NativePlacement | null;
  device: NativeDevice | null;
  /** Where each sequence keeps its KV in layers placed by sequence (NEO/APEX); empty otherwise. */
  sequenceKv: ('host' | 'device')[];
  /** The plan's prefill placement and from how many rows a step runs it (absent: prompt steps run the decode placement). */
  prefill?: NativePrefillPlacement;
}

export async function planExecution(file: GgufFile, hp: ModelHparams, contextLength: number, batchSize: number, opts: ExecutionOptions, maxSequences = 1, threads?: number): Promise<ExecutionSetup> {
  let choice = resolveDevice(opts.device ?? 'auto');
  // 'auto' plans a found GPU's share with this machine's profile; a caller that gives none (a
  // library user, a test) gets the CPU, and is told why, rather than a profiling run it did not ask for.
  if (choice.device !== 'cpu' && (opts.device ?? 'auto') === 'auto' && opts.hardware === undefined) {
    choice = { device: 'cpu', reason: `${choice.reason}; no hardware profile was given to plan its share (LoadOptions.hardware), so the model runs on the CPU` };
  }
  if (choice.device === 'cpu') {
    if (opts.policy && opts.policy !== 'auto' && opts.policy !== 'cpu-only') {
      throw new Error(`policy ${opts.policy} needs an accelerator, and the device is the CPU (${choice.reason}); use --device vulkan (a GPU) or --device loopback (the emulated accelerator) to execute it`);
    }
    return { info: { device: 'cpu', deviceReason: choice.reason, policy: 'cpu-only', split: 'CPU only', notes: [] }, placement: null, device: null, sequenceKv: [] };
  }
  const measured = typeof opts.hardware === 'function' ? await opts.hardware() : opts.hardware;
  if (!measured) throw new Error(`executing on the ${choice.device} device needs a plan, and a plan needs this machine's hardware profile: the caller passes it (LoadOptions.hardware)`);
  // The plan is for this engine: its CPU runs `threads` threads.
  const base = threads !== undefined ? { ...measured, cpu: cpuForThreads(measured.cpu, threads) } : measured;
  const vulkan = choice.device === 'vulkan';
  const vramBytes = opts.vramBytes ?? (vulkan ? choice.info!.capacityBytes : DEFAULT_LOOPBACK_VRAM);
  checkVramBudget(vramBytes, opts.vramBytes !== undefined, vulkan ? { name: `the Vulkan device ${choice.info!.description}`, capacityBytes: choice.info!.capacityBytes } : { name: 'this machine\'s memory (the loopback arena lives in it)', capacityBytes: totalmem() });
  // --link 0 means an uncapped link: the native device then copies at memcpy speed, so the plan
  // is made with what one thread copies here (the lane that copies is one thread).
  const uncapped = opts.linkGBps === 0;
  const linkGBps = uncapped ? oneThreadCopyGBps(base) : opts.linkGBps ?? defaultLinkGBps(base);
  const linkLatencyUs = opts.linkLatencyUs ?? 0;
  const deviceThreads = opts.deviceThreads ?? 1;
  const workspaceBytes = deviceWorkspaceBytes(hp, batchSize, true, maxSequences) + (vulkan ? vulkanWorkspaceBytes(hp, contextLength) : 0);
  const hardware = vulkan
    // The device's attention reads only some KV formats (the Vulkan shader: F16): with another
    // format the planner keeps attention and the KV on the CPU (engine/plan/kv-format.ts).
    ? vulkanHardware(base, { vramBytes, workspaceBytes, kvFormats: choice.info!.kvFormats })
    : loopbackHardware(base, { vramBytes, linkGBps, linkLatencyUs, deviceThreads, workspaceBytes, uncapped });
  const notes: string[] = [];
  if (workspaceBytes >= vramBytes) {
    notes.push(`the device budget of ${sizeText(vramBytes)} does not cover the ${sizeText(workspaceBytes)} the executor reserves on the device (${RESERVE_HOLDS}), so no weight or KV can be placed there`);
  }
  const workload = opts.workload ?? { batch: 1, prompt: Math.max(1, Math.min(1024, Math.floor(contextLength / 2))), gen: Math.max(1, Math.min(64, contextLength - Math.min(1024, Math.floor(contextLength / 2)))), vramBytes };
  const planParams = { model: { ...shapeFromGguf(file), kvFormat: opts.kvFormat ?? 'F16' }, hardware, workload, policy: opts.policy ?? 'auto', ...(opts.correction ? { correction: opts.correction } : {}) };
  const plan = planRequest(planParams);
  const lowered = lowerPlan(plan, hp.nLayers);
  const device: NativeDevice | null = !lowered.usesDevice ? null
    : vulkan ? { kind: 'vulkan', capacityBytes: vramBytes } : loopbackDevice({ vramBytes, linkGBps: uncapped ? 0 : linkGBps, linkLatencyUs, deviceThreads });
  // A device the plan leaves idle (auto on a slow or software GPU, or a budget nothing fits in):
  // the model runs on the CPU, and says why rather than naming a split that does not happen.
  const idle = !lowered.usesDevice;
  const idleWhy = workspaceBytes >= vramBytes ? 'the device budget is used up by the executor\'s reserve' : plan.chosenPolicy === 'cpu-only' ? 'predicted faster on the CPU' : 'nothing it places on the device is predicted to pay off';
  const prefill = idle ? { notes: [] } : prefillPlacement(planParams, plan, lowered);
  return {
    ...(prefill.prefill ? { prefill: prefill.prefill } : {}),
    info: {
      device: idle ? 'cpu' : choice.device,
      deviceReason: idle ? `${choice.reason}; the ${plan.chosenPolicy} plan keeps every op on the CPU: ${idleWhy}` : choice.reason,
      policy: plan.chosenPolicy, plan, split: lowered.splitSummary, notes: [...notes, ...lowered.notes, ...prefill.notes], planParams,
    },
    placement: lowered.usesDevice ? lowered.placement : null,
    device,
    sequenceKv: lowered.usesDevice && lowered.placement.layers.some((l) => l.kvBySequence) ? sequenceKvAssignment(plan, maxSequences) : [],
  };
}

/** What the executor's device reserve holds (devices.ts deviceWorkspaceBytes, vulkanWorkspaceBytes). */
export const RESERVE_HOLDS = 'activations, logits, converted activations and a KV page per layer; on Vulkan also the attention pools and norm weights';

/** A device budget must be positive and, when given, no larger than the memory behind it. */
function checkVramBudget(vramBytes: number, given: boolean, behind: { name: string; capacityBytes: number }): void {
  if (!Number.isFinite(vramBytes) || vramBytes < 4096) throw new Error(`--vram must be at least 4096 bytes, got ${vramBytes}`);
  if (given && behind.capacityBytes > 0 && vramBytes > behind.capacityBytes) {
    throw new Error(`--vram ${sizeText(vramBytes)} is more than ${behind.name} has (${sizeText(behind.capacityBytes)}); give at most ${sizeText(behind.capacityBytes)}`);
  }
}

/** What one thread copies on this machine, GB/s: the speed of an uncapped loopback link. */
function oneThreadCopyGBps(hw: import('../hardware/types').HardwareProfile): number {
  const one = hw.cpu.memory.byThreads?.find((t) => t.threads === 1);
  return Math.max(0.1, one?.copyGBps ?? hw.cpu.memory.copyGBps);
}

