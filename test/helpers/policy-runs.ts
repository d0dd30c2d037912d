// Running every policy's plan on an executing device (loopback or vulkan) at the smallest memory
// budget at which the plan splits the model, against the CPU: shared by the loopback tests
// (exact) and the Vulkan tests (within a tolerance, on lavapipe).
import assert from 'node:assert/strict';

import { readGguf } from '../../engine/model/gguf/index';
import { readHparams } from '../../engine/model/hparams';
import { shapeFromGguf } from '../../engine/model/shape';
import { hardwarePreset } from '../../engine/hardware/presets';
import { planRequest } from '../../engine/plan/api';
import { Engine } from '../../engine/runtime/engine';
import { cpuForThreads, deviceWorkspaceBytes, loopbackHardware, vulkanWorkspaceBytes } from '../../engine/runtime/devices';
import { lowerPlan } from '../../engine/runtime/lowering';
import { stepBreakdown, type MeasuredTrace } from '../../engine/runtime/trace';
import { argmax } from '../../engine/runtime/sampler';
import { finishedBefore, mayOverlap, opLists } from './op-order';

export const POLICIES = ['gpu-only', 'layer-split', 'split-points', 'lia', 'kvpr', 'neo', 'apex'];
export const CTX = 1024;
// The plans are made for a long prompt (KV of ~1k positions), so that KV placement matters.
export const WORKLOAD = { batch: 1, prompt: 960, gen: 64 };
export const THREADS = 1;
// Deterministic plans: a fixed host (paper 000's Ryzen) with the loopback device as its GPU.
export const BASE = hardwarePreset('ryzen9-7950x');
export const LINK_GBPS = 10;

/** Whether a lowered plan splits: some work on the device and some on the host (ops, weights or KV). */
function splits(file: string, policy: string, vram: number, device: 'loopback' | 'vulkan'): boolean {
  const gguf = readGguf(file);
  const hp = readHparams(gguf);
  // The workspace the engine reserves on this device (Vulkan's gather pools and page tables too).
  const workspaceBytes = deviceWorkspaceBytes(hp, 512) + (device === 'vulkan' ? vulkanWorkspaceBytes(hp, CTX) : 0);
  // As Engine.load plans it: this engine's thread count (cpuForThreads), the device as its GPU.
  const hardware = loopbackHardware({ ...BASE, cpu: cpuForThreads(BASE.cpu, THREADS) }, { vramBytes: vram, linkGBps: LINK_GBPS, linkLatencyUs: 0, deviceThreads: 1, workspaceBytes });
  let plan;
  try {
    plan = planRequest({ model: shapeFromGguf(gguf), hardware, workload: { ...WORKLOAD, vramBytes: vram }, policy });
  } catch {
    return false; // the policy does not apply at this budget
  }
  const l = lowerPlan(plan, hp.nLayers);
  if (!l.usesDevice) return false;
  const ops = [...l.placement.layers.flatMap((x) => Object.values(x.ops)), l.placement.head];
  return ops.some((o) => o?.loc === 'host' || o?.weights === 'streamed' || (o?.deviceFraction ?? 1) < 1) || l.placement.layers.some((x) => x.kv === 'host');
}

/**
 * Logits of `steps` greedy steps after `prompt`. With `follow` (another run's logits), the tokens
 * fed are that run's greedy choices, so both runs see the same inputs at every step (teacher
 * forcing: one near-tie decided differently then cannot make the rest of the comparison moot).
 */
export async function greedy(engine: Engine, prompt: number[], steps: number, follow?: Float32Array[]): Promise<Float32Array[]> {
  const out: Float32Array[] = [];
  const tokens = [...prompt];
  for (let i = 0; i < steps; i++) {
    const logits = await engine.logits(tokens);
    out.push(logits);
    tokens.push(argmax(follow ? follow[i]! : logits));
  }
  return out;
}

/**
 * How a device's logits are compared with the CPU's: `exact` (loopback runs the CPU kernels), or
 * (Vulkan) the greedy tokens equal and every logit within `tol(cpu logits)` of the CPU's.
 */
export interface RunOptions {
  device: 'loopback' | 'vulkan';
  steps: number;
  /** Feed the CPU's greedy tokens to the device run (see greedy). */
  teacherForced?: boolean;
  compare: (label: string, got: Float32Array[], want: Float32Array[]) => void;
  /** The policies to run (default POLICIES). */
  policies?: string[];
}

export async function checkModel(label: string, file: string, prompt: number[], run: RunOptions = { device: 'loopback', steps: 6, compare: exact }): Promise<void> {
  const size = readGguf(file).tensors.reduce((s, t) => s + t.byteSize, 0);
  const cpu = await Engine.load(file, { threads: THREADS, contextLength: CTX, device: 'cpu' });
  const expected = await greedy(cpu, prompt, run.steps);
  cpu.dispose();
  const executed: string[] = [];
  const hp = readHparams(readGguf(file));
  const policies = run.policies ?? POLICIES;
  for (const policy of policies) {
    // The smallest budget at which the policy applies, splits the model, and its plan fits the
    // device (the planners' memory accounting is coarser than the executor's buffers).
    const fractions = [0.15, 0.25, 0.35, 0.5, 0.65, 0.8, ...Array.from({ length: 40 }, (_, i) => 1 + i * 0.1), ...Array.from({ length: 8 }, (_, i) => 6 + 2 * i)];
    let engine: Engine | undefined;
    let got: Float32Array[] = [];
    let vram = 0;
    for (const f of fractions) {
      vram = Math.round(size * f + deviceWorkspaceBytes(hp, 512) + (run.device === 'vulkan' ? vulkanWorkspaceBytes(hp, CTX) : 0));
      if (!splits(file, policy, vram, run.device)) continue;
      let e: Engine;
      try {
        e = await Engine.load(file, { threads: THREADS, contextLength: CTX, device: run.device, vramBytes: vram, policy, hardware: planHardware(run.device), linkGBps: LINK_GBPS, workload: { ...WORKLOAD, vramBytes: vram } });
      } catch (err) {
        if (/does not (fit|apply)/.test((err as Error).message)) continue;  // the planner refuses this budget
        throw err;
      }
      if (e.execution.fallback === undefined && e.deviceStats()) {
        e.setTracing(true);
        got = await greedy(e, prompt, run.steps, run.teacherForced ? expected : undefined);
        // KV pages are taken as positions are written: a budget can still run out mid-run (the
        // engine then finishes on the CPU, tested below); try a larger one.
        if (e.execution.fallback === undefined) { engine = e; break; }
      }
      e.dispose();
    }
    if (!engine) {
      console.log(`  ${label} ${policy}: no budget makes this policy split this model and fit the device`);
      continue;
    }
    try {
      run.compare(`${label} ${policy}`, got, expected);
      const stats = engine.deviceStats();
      assert.ok(stats, `${label} ${policy}: the device was dropped: ${engine.execution.fallback}`);
      assert.ok(stats.peakBytes <= stats.capacityBytes, `${label} ${policy}: device peak ${stats.peakBytes} > budget ${stats.capacityBytes}`);
      const trace = engine.takeTrace();
      const lanes = new Set(trace.events.map((e) => trace.ops[e.op]!.lane));
      assert.ok(lanes.size >= 2, `${label} ${policy}: work on ${[...lanes].join(', ')} only`);
      const steps = [...new Set(trace.events.map((e) => e.step))];
      const b = stepBreakdown(trace, steps, readHparams(readGguf(file)).nLayers);
      console.log(`  ${label} ${policy}: vram ${(vram / 1024).toFixed(0)} KiB, split ${engine.execution.split}, peak ${(stats.peakBytes / 1024).toFixed(0)} KiB, lanes ${[...lanes].join('/')}, overlap ${b.overlapMs.toFixed(3)} ms/step`);
      const kinds = new Set(trace.ops.map((o) => o.kind));
      if (/streamed/.test(engine.execution.split)) {
        // The next layer's weights are copied while this layer computes: the executor lets a layer's
        // weight copy run beside the layer before's compute. Read from the dependencies, not from
        // the measured overlap logged above: a tiny layer's copy can end before the compute starts.
        assert.ok(copiesAhead(trace), `${label} ${policy}: weights are streamed, but every layer's weight copy waits for the compute of the layer before`);
      }
      if (/KV recompute/.test(engine.execution.split)) assert.ok(kinds.has('recompute_kv') && kinds.has('save_acts'), 'KVPR recomputes K and V from stored activations');
      if (/streamed/.test(engine.execution.split)) assert.ok(kinds.has('copy_weight'), 'streamed weights are copied layer by layer');
      executed.push(policy);
    } finally {
      engine.dispose();
    }
  }
  // Every policy finds a budget at which it splits these models.
  for (const p of policies) assert.ok(executed.includes(p), `${label}: ${p} did not execute split`);
}


/** Loopback: the CPU's logits bit for bit. */
export function exact(label: string, got: Float32Array[], want: Float32Array[]): void {
  for (let i = 0; i < want.length; i++) assert.deepEqual(got[i], want[i], `${label}: logits of step ${i} differ from the CPU's`);
}

/** The worst logit difference seen, as a fraction of its bound, and the near-ties a device decided otherwise. */
export const deviceComparison = { worst: 0, nearTies: 0 };

/**
 * A device with kernels of its own (Vulkan) against the CPU: every logit within
 * 0.02 + 0.02 · max|logit| (the GPU multiplies f32 activations where the CPU quantizes them, sums
 * in another order, keeps attention's probabilities in f32); greedy tokens equal, or with
 * `strictGreedy` false (random weights give near-ties) a different choice only where the CPU's
 * margin between the two tokens is within twice the measured difference.
 */
export function withinDeviceTolerance(label: string, got: Float32Array[], want: Float32Array[], strictGreedy: boolean): void {
  assert.equal(got.length, want.length);
  for (let i = 0; i < want.length; i++) {
    const g = got[i]!, w = want[i]!;
    let peak = 0, diff = 0;
    for (let j = 0; j < w.length; j++) {
      peak = Math.max(peak, Math.abs(w[j]!));
      diff = Math.max(diff, Math.abs(g[j]! - w[j]!));
    }
    const bound = 0.02 + 0.02 * peak;
    deviceComparison.worst = Math.max(deviceComparison.worst, diff / bound);
    assert.ok(diff <= bound, `${label}: step ${i} logits differ by ${diff.toExponential(2)} > ${bound.toExponential(2)}`);
    const a = argmax(g), b = argmax(w);
    if (a === b) continue;
    assert.ok(!strictGreedy, `${label}: greedy token of step ${i} differs from the CPU's (${a} vs ${b})`);
    const margin = w[b]! - w[a]!;
    assert.ok(margin <= 2 * diff, `${label}: step ${i} chose ${a} over the CPU's ${b} although the CPU's margin ${margin.toExponential(2)} exceeds the difference ${diff.toExponential(2)}`);
    deviceComparison.nearTies++;
  }
}

/**
 * The hardware a test plan is made for: a fixed host (paper 000's Ryzen) with the device as its
 * GPU, as fast as the loopback device would be — deterministic plans that split, whatever the
 * executing device's own speed (the Vulkan tests check execution, not lavapipe's speed).
 */
export function planHardware(device: 'loopback' | 'vulkan') {
  if (device === 'loopback') return BASE;
  const hw = loopbackHardware({ ...BASE, cpu: cpuForThreads(BASE.cpu, THREADS) }, { vramBytes: 1 << 30, linkGBps: LINK_GBPS, linkLatencyUs: 0, deviceThreads: 1, workspaceBytes: 0 });
  return { ...hw, gpu: { ...hw.gpu!, name: 'test GPU (Vulkan)' } };
}

/** Whether some layer's weight copy may run while the layer before computes (on the CPU or the device). */
function copiesAhead(trace: MeasuredTrace): boolean {
  return opLists(trace).some((list) => {
    const before = finishedBefore(list);
    return list.some((c, i) => c.kind === 'copy_weight' && c.layer >= 1 && list.some((w, j) =>
      (w.lane === 'cpu' || w.lane === 'device') && w.layer === c.layer - 1 && mayOverlap(list, before, i, j)));
  });
}
