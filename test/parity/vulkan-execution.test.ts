// Every policy's plan executes on the Vulkan device — in CI Mesa's lavapipe, one thread, with
// the Khronos validation layer on (any validation message fails) — at a memory budget small
// enough that the plan splits the model between the CPU and the GPU, on stories260K (trained,
// F32) and synthetic llama (GQA, Q4_0) and qwen2 (biases, NeoX RoPE, Q8_0) models. Every logit
// agrees within |Δ| ≤ 0.02 + 0.02 · max|logit|: the GPU multiplies f32 activations where the CPU
// quantizes them to the weights' Q8 activation format, sums in another order, and keeps
// attention's probabilities in f32. Greedy output equals the CPU's for 32 tokens on stories260K.
// The synthetic models' random weights give near-ties, so there the device is fed the CPU's
// tokens (teacher forcing) and its greedy choice must equal the CPU's wherever the CPU's margin
// between the two tokens exceeds the measured logit difference. The device's peak
// memory stays within its budget; a lost device and a refused allocation fall back to the CPU
// without losing the request; a weight format without a Vulkan kernel runs on the CPU, noted.
// Skips, saying why, where there is no Vulkan device or validation layer.
process.env.LP_NUM_THREADS = '1';
process.env.VK_INSTANCE_LAYERS = 'VK_LAYER_KHRONOS_validation';

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';

import { GgmlType } from '../../engine/model/ggml-types';
import { readGguf } from '../../engine/model/gguf/index';
import type { NativeModel } from '../../engine/native/model';
import { writeSyntheticModel } from '../../engine/model/synthetic';
import { Engine } from '../../engine/runtime/engine';
import { argmax } from '../../engine/runtime/sampler';
import { vulkanProbe } from '../../engine/hardware/vulkan-profile';
import { sharedPath, skipUnlessShared, tempDir } from '../helpers/shared';
import { thisMachineProfile } from '../../engine/profile/profiler';
import { checkModel, CTX, deviceComparison, planHardware, THREADS, withinDeviceTolerance } from '../helpers/policy-runs';

const LAYER_JSON = ['/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json', '/usr/share/vulkan/explicit_layer.d/VkLayer_KHRONOS_validation.json'];
const probe = vulkanProbe();
const skip = !LAYER_JSON.some(existsSync) ? 'the Khronos validation layer is not installed (apt-get install vulkan-validationlayers)'
  : !probe.available ? `no Vulkan device: ${probe.reason}` : false;
const STORIES = sharedPath('models', 'stories260K.gguf');

const VULKAN = { device: 'vulkan' as const, steps: 32, compare: (l: string, g: Float32Array[], w: Float32Array[]) => withinDeviceTolerance(l, g, w, true) };
const VULKAN_FORCED = { device: 'vulkan' as const, steps: 32, teacherForced: true, compare: (l: string, g: Float32Array[], w: Float32Array[]) => withinDeviceTolerance(l, g, w, false) };

function noValidationMessages(): void {
  const p = vulkanProbe() as { validationMessages?: number; lastValidationMessage?: string };
  assert.equal(p.validationMessages, 0, `validation: ${p.lastValidationMessage}`);
}

test('every policy on Vulkan matches the CPU on stories260K (32 greedy tokens)', { skip: skip || skipUnlessShared(STORIES) }, async () => {
  await checkModel('stories260K', STORIES, [1, 415, 251, 263, 91, 30, 12], VULKAN);
  console.log(`  worst logit difference: ${deviceComparison.worst.toFixed(3)} × the bound; device: ${probe.name}`);
  noValidationMessages();
});

for (const [arch, type, name] of [['llama', GgmlType.Q4_0, 'Q4_0'], ['qwen2', GgmlType.Q8_0, 'Q8_0']] as const) {
  test(`every policy on Vulkan matches the CPU on a synthetic ${arch} ${name} model (GQA)`, { skip }, async () => {
    const { dir, cleanup } = tempDir();
    try {
      const file = path.join(dir, `${arch}.gguf`);
      writeSyntheticModel(file, { architecture: arch, nLayers: 4, nEmbd: 128, nHeads: 4, nKvHeads: 2, nFf: 256, nVocab: 512, contextLength: CTX, seed: 7, weightType: type });
      await checkModel(`${arch} ${name}`, file, [1, 5, 9, 200, 17, 33, 101, 7, 64], VULKAN_FORCED);
      console.log(`  worst logit difference so far: ${deviceComparison.worst.toFixed(3)} × the bound; near-ties decided otherwise: ${deviceComparison.nearTies}`);
      noValidationMessages();
    } finally {
      cleanup();
    }
  });
}

test('a Vulkan device lost mid-generation falls back to the CPU without losing the request', { skip: skip || skipUnlessShared(STORIES) }, async () => {
  const cpu = await Engine.load(STORIES, { threads: THREADS, contextLength: CTX, device: 'cpu' });
  const want = await cpu.generate('Once upon a time', { maxTokens: 24, temperature: 0 });
  cpu.dispose();
  const fallbacks: string[] = [];
  const engine = await Engine.load(STORIES, { threads: THREADS, contextLength: CTX, device: 'vulkan', vramBytes: 8 << 20, policy: 'gpu-only', hardware: planHardware('vulkan'), onFallback: (r) => fallbacks.push(r) });
  try {
    assert.equal(engine.execution.fallback, undefined);
    assert.equal(engine.execution.device, 'vulkan');
    engine.failDeviceAfter(200);
    const got = await engine.generate('Once upon a time', { maxTokens: 24, temperature: 0 });
    assert.equal(got.text, want.text);
    assert.equal(fallbacks.length, 1, 'told once');
    assert.match(fallbacks[0]!, /vulkan: device lost/);
    assert.match(engine.execution.split, /CPU only/);
  } finally {
    engine.dispose();
  }
  noValidationMessages();
});

test('a plan over the Vulkan budget is refused before allocating, with the numbers; the model runs on the CPU', { skip: skip || skipUnlessShared(STORIES) }, async () => {
  const engine = await Engine.load(STORIES, {
    threads: THREADS, contextLength: CTX, device: 'vulkan', vramBytes: 256 << 10, policy: 'gpu-only', hardware: planHardware('vulkan'),
    workload: { batch: 1, prompt: 960, gen: 64, vramBytes: 8 << 20 },
  });
  try {
    assert.match(engine.execution.fallback ?? '', /^vulkan: cannot allocate [0-9.]+ MiB for .+: [0-9.]+ MiB of the device's 0\.25 MiB VRAM budget are in use/);
    assert.equal(engine.deviceStats(), null);
    const r = await engine.generate('Once upon a time', { maxTokens: 4, temperature: 0 });
    assert.equal(r.generatedTokens, 4);
  } finally {
    engine.dispose();
  }
});

test('matmuls on a weight format without a Vulkan kernel run on the CPU, and the plan notes say so', { skip }, async () => {
  const { dir, cleanup } = tempDir();
  try {
    const file = path.join(dir, 'q5.gguf');
    writeSyntheticModel(file, { architecture: 'llama', nLayers: 2, nEmbd: 128, nHeads: 4, nKvHeads: 2, nFf: 256, nVocab: 512, contextLength: CTX, seed: 3, weightType: GgmlType.Q5_0 });
    const cpu = await Engine.load(file, { threads: THREADS, contextLength: CTX, device: 'cpu' });
    const want = await cpu.generate('a b c', { maxTokens: 8, temperature: 0 });
    cpu.dispose();
    const engine = await Engine.load(file, { threads: THREADS, contextLength: CTX, device: 'vulkan', vramBytes: 64 << 20, policy: 'gpu-only', hardware: planHardware('vulkan') });
    try {
      assert.equal(engine.execution.fallback, undefined);
      assert.ok(engine.execution.notes.some((n) => /Q5_0\): the vulkan device has no kernel for this format; it runs on the CPU/.test(n)), engine.execution.notes.join('\n'));
      const got = await engine.generate('a b c', { maxTokens: 8, temperature: 0 });
      assert.equal(got.text, want.text);
    } finally {
      engine.dispose();
    }
  } finally {
    cleanup();
  }
  noValidationMessages();
});

test('auto on a software Vulkan device (lavapipe) measures it and keeps the work on the CPU', { skip: skip || (probe.type !== 'cpu' ? 'the Vulkan device is a real GPU' : false) || skipUnlessShared(STORIES) }, async () => {
  const engine = await Engine.load(STORIES, { threads: THREADS, contextLength: CTX, device: 'auto', hardware: thisMachineProfile });
  try {
    assert.equal(engine.execution.device, 'cpu', engine.execution.deviceReason);
    assert.match(engine.execution.deviceReason, /llvmpipe.*keeps every op on the CPU/);
    const hw = engine.execution.planParams?.hardware;
    const gpu = typeof hw === 'object' ? hw.gpu : undefined;
    assert.ok(gpu?.kernels?.length, 'the plan was made with the measured Vulkan kernels');
    console.log(`  ${engine.execution.deviceReason}`);
  } finally {
    engine.dispose();
  }
});

// NEO and APEX at batch 4 on the GPU: some requests' KV on the device, the others' on the host
// where the CPU attends over them while the GPU attends over the rest, in the same steps.
for (const policy of ['neo', 'apex']) {
  test(`${policy} at batch 4 on Vulkan splits the requests' KV between GPU and host and matches each request alone on the CPU`, { skip: skip || skipUnlessShared(STORIES) }, async () => {
    const prompts = [4, 11, 19, 30].map((len, s) => Array.from({ length: len }, (_, i) => 1 + ((i * 29 + s * 5) % 511)));
    const cpu = await Engine.load(STORIES, { threads: THREADS, contextLength: CTX, device: 'cpu' });
    const cpuNative = (cpu as unknown as { native: NativeModel }).native;
    const alone = prompts.map((p) => {
      cpuNative.clearKv(0);
      const first = cpuNative.eval(Int32Array.from(p), 0, false);
      return [first, cpuNative.eval(Int32Array.of(argmax(first)), p.length, false)];
    });
    cpu.dispose();
    const size = readGguf(STORIES).tensors.reduce((s, t) => s + t.byteSize, 0);
    let found = false;
    for (let f = 1; f <= 8 && !found; f += 0.25) {
      const vram = Math.round(size * f + (2 << 20));
      let engine: Engine;
      try {
        engine = await Engine.load(STORIES, { threads: THREADS, contextLength: CTX, device: 'vulkan', vramBytes: vram, policy, hardware: planHardware('vulkan'), workload: { batch: 4, prompt: 960, gen: 64, vramBytes: vram }, maxSequences: 4 });
      } catch {
        continue;  // the policy does not apply at this budget
      }
      try {
        const native = (engine as unknown as { native: NativeModel }).native;
        const attention = native.compiledOps().filter((o) => o.kind === 'attention');
        if (!engine.deviceStats() || !attention.some((o) => o.loc === 'host') || !attention.some((o) => o.loc === 'device')) continue;
        found = true;
        const first = await native.evalBatchAsync(prompts.map((p, s) => ({ seq: s, tokens: Int32Array.from(p), startPos: 0 })));
        const second = await native.evalBatchAsync(prompts.map((p, s) => ({ seq: s, tokens: Int32Array.of(argmax(first[s]!)), startPos: p.length })));
        for (let s = 0; s < 4; s++) withinDeviceTolerance(`${policy} sequence ${s}`, [first[s]!, second[s]!], alone[s]!, true);
        const stats = engine.deviceStats()!;
        assert.ok(stats.peakBytes <= stats.capacityBytes);
        console.log(`  ${policy} batch 4: vram ${(vram / 1024).toFixed(0)} KiB, split ${engine.execution.split}`);
      } finally {
        engine.dispose();
      }
    }
    assert.ok(found, `${policy}: no budget splits the requests' KV between GPU and host`);
    noValidationMessages();
  });
}
