// Every policy's plan executes on the loopback device (an accelerator emulated on the host that
// runs the CPU kernels), with a memory budget small enough that the plan must split the model
// between the CPU and the device, and gives exactly the CPU's logits: prefill and greedy decode,
// on stories260K (trained, F32) and synthetic llama (GQA, Q8_0) and qwen2 (biases, NeoX RoPE)
// models. The device's peak memory stays within its budget, and each run's measured trace shows
// work on at least two lanes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';

import { GgmlType } from '../../engine/model/ggml-types';
import { readGguf } from '../../engine/model/gguf/index';
import { readHparams } from '../../engine/model/hparams';
import { shapeFromGguf } from '../../engine/model/shape';
import { writeSyntheticModel } from '../../engine/model/synthetic';
import { hardwarePreset } from '../../engine/hardware/presets';
import { planRequest } from '../../engine/plan/api';
import { Engine } from '../../engine/runtime/engine';
import { cpuForThreads, deviceWorkspaceBytes, loopbackHardware } from '../../engine/runtime/devices';
import { lowerPlan } from '../../engine/runtime/lowering';
import { stepBreakdown } from '../../engine/runtime/trace';
import { argmax } from '../../engine/runtime/sampler';
import type { NativeModel } from '../../engine/native/model';
import { sharedPath, skipUnlessShared, tempDir } from '../helpers/shared';
import { BASE, checkModel, CTX, LINK_GBPS, THREADS, WORKLOAD } from '../helpers/policy-runs';

test('every policy on loopback equals the CPU on stories260K', { skip: skipUnlessShared(sharedPath('models', 'stories260K.gguf')) }, async () => {
  await checkModel('stories260K', sharedPath('models', 'stories260K.gguf'), [1, 415, 251, 263, 91, 30, 12]);
});

for (const arch of ['llama', 'qwen2'] as const) {
  test(`every policy on loopback equals the CPU on a synthetic ${arch} Q8_0 model (GQA)`, async () => {
    const { dir, cleanup } = tempDir();
    try {
      const file = path.join(dir, `${arch}.gguf`);
      writeSyntheticModel(file, { architecture: arch, nLayers: 4, nEmbd: 128, nHeads: 4, nKvHeads: 2, nFf: 256, nVocab: 512, contextLength: CTX, seed: 7, weightType: GgmlType.Q8_0 });
      await checkModel(`${arch} Q8_0`, file, [1, 5, 9, 200, 17, 33, 101, 7, 64]);
    } finally {
      cleanup();
    }
  });
}

test('a device that fails mid-generation falls back to the CPU without losing the request', { skip: skipUnlessShared(sharedPath('models', 'stories260K.gguf')) }, async () => {
  const file = sharedPath('models', 'stories260K.gguf');
  const cpu = await Engine.load(file, { threads: THREADS, contextLength: CTX, device: 'cpu' });
  const want = await cpu.generate('Once upon a time', { maxTokens: 24, temperature: 0 });
  cpu.dispose();
  const fallbacks: string[] = [];
  const engine = await Engine.load(file, { threads: THREADS, contextLength: CTX, device: 'loopback', vramBytes: 8 << 20, policy: 'gpu-only', hardware: BASE, onFallback: (r) => fallbacks.push(r) });
  try {
    assert.equal(engine.execution.fallback, undefined);
    // gpu-only with room for everything: every layer and the head on the device (the Model Layers panel's "Runs on").
    const nLayers = readHparams(readGguf(file)).nLayers;
    assert.deepEqual(engine.runsOn(), Object.fromEntries([...Array.from({ length: nLayers }, (_, i) => [String(i), 'GPU']), ['-1', 'GPU']]));
    engine.failDeviceAfter(200);  // lost a few decode steps in
    const got = await engine.generate('Once upon a time', { maxTokens: 24, temperature: 0 });
    assert.equal(got.text, want.text);
    assert.equal(fallbacks.length, 1, 'told once');
    assert.match(fallbacks[0]!, /loopback: device lost/);
    assert.match(engine.execution.split, /CPU only/);
    assert.ok(Object.values(engine.runsOn()).every((w) => w === 'CPU'), 'after the fallback every layer runs on the CPU');
  } finally {
    engine.dispose();
  }
});

test('a placement over the device budget is refused with the numbers, and the model stays on the CPU', { skip: skipUnlessShared(sharedPath('models', 'stories260K.gguf')) }, async () => {
  const file = sharedPath('models', 'stories260K.gguf');
  // Plan for 8 MiB (everything resident), execute on a 256 KiB arena: the device refuses.
  const engine = await Engine.load(file, {
    threads: THREADS, contextLength: CTX, device: 'loopback', vramBytes: 256 << 10, policy: 'gpu-only', hardware: BASE,
    workload: { ...WORKLOAD, vramBytes: 8 << 20 },
  });
  try {
    assert.match(engine.execution.fallback ?? '', /^loopback: cannot allocate [0-9.]+ MiB for .+: [0-9.]+ MiB of the device's 0\.25 MiB are in use/);
    assert.equal(engine.deviceStats(), null, 'no device is left attached');
    assert.ok(Object.values(engine.runsOn()).every((w) => w === 'CPU'), 'the refused placement is not reported as running');
    const r = await engine.generate('Once upon a time', { maxTokens: 4, temperature: 0 });
    assert.equal(r.generatedTokens, 4);
  } finally {
    engine.dispose();
  }
});

// NEO and APEX are about batches: with four sequences, the plan keeps some requests' KV on the
// device and the others' on the host, where the CPU attends over them while the device attends
// over the rest. Their batched steps equal each sequence alone on the CPU.
for (const policy of ['neo', 'apex']) {
  test(`${policy} at batch 4 splits the requests' KV between device and host and equals the CPU`, { skip: skipUnlessShared(sharedPath('models', 'stories260K.gguf')) }, async () => {
    const file = sharedPath('models', 'stories260K.gguf');
    const prompts = [4, 11, 19, 30].map((len, s) => Array.from({ length: len }, (_, i) => 1 + ((i * 29 + s * 5) % 511)));
    const cpu = await Engine.load(file, { threads: THREADS, contextLength: CTX, device: 'cpu' });
    const cpuNative = (cpu as unknown as { native: NativeModel }).native;
    const alone = prompts.map((p) => {
      cpuNative.clearKv(0);
      const first = cpuNative.eval(Int32Array.from(p), 0, false);
      return [first, cpuNative.eval(Int32Array.of(argmax(first)), p.length, false)];
    });
    cpu.dispose();
    const hp = readHparams(readGguf(file));
    const size = readGguf(file).tensors.reduce((s, t) => s + t.byteSize, 0);
    let found = false;
    for (let f = 1; f <= 6 && !found; f += 0.1) {
      const vram = Math.round(size * f + deviceWorkspaceBytes(hp, 512));
      const workload = { batch: 4, prompt: 960, gen: 64, vramBytes: vram };
      let engine: Engine;
      try {
        engine = await Engine.load(file, { threads: THREADS, contextLength: CTX, device: 'loopback', vramBytes: vram, policy, hardware: BASE, linkGBps: LINK_GBPS, workload, maxSequences: 4 });
      } catch {
        continue; // the policy does not apply at this budget
      }
      try {
        const native = (engine as unknown as { native: NativeModel }).native;
        const attention = native.compiledOps().filter((o) => o.kind === 'attention');
        if (!engine.deviceStats() || !attention.some((o) => o.loc === 'host') || !attention.some((o) => o.loc === 'device')) continue;
        found = true;
        const first = await native.evalBatchAsync(prompts.map((p, s) => ({ seq: s, tokens: Int32Array.from(p), startPos: 0 })));
        const second = await native.evalBatchAsync(prompts.map((p, s) => ({ seq: s, tokens: Int32Array.of(argmax(first[s]!)), startPos: p.length })));
        for (let s = 0; s < 4; s++) {
          assert.deepEqual([first[s], second[s]], alone[s], `${policy}: sequence ${s} differs from the CPU`);
        }
        console.log(`  ${policy} batch 4: vram ${(vram / 1024).toFixed(0)} KiB, split ${engine.execution.split}`);
      } finally {
        engine.dispose();
      }
    }
    assert.ok(found, `${policy}: no budget splits the requests' KV between device and host`);
  });
}

test('a completion on a device that fails mid-way finishes on the CPU with the same text', { skip: skipUnlessShared(sharedPath('models', 'stories260K.gguf')) }, async () => {
  const { runCompletion } = await import('../../engine/completion/runner');
  const file = sharedPath('models', 'stories260K.gguf');
  const prompt = [1, 415, 251, 263, 91, 30, 12, 99, 7];
  const cpu = await Engine.load(file, { threads: THREADS, contextLength: CTX, device: 'cpu' });
  const want = await runCompletion(cpu, prompt, { maxTokens: 20, stopIds: new Set() });
  cpu.dispose();
  const fallbacks: string[] = [];
  const engine = await Engine.load(file, { threads: THREADS, contextLength: CTX, device: 'loopback', vramBytes: 8 << 20, policy: 'gpu-only', hardware: BASE, onFallback: (r) => fallbacks.push(r) });
  try {
    engine.failDeviceAfter(150);
    const got = await runCompletion(engine, prompt, { maxTokens: 20, stopIds: new Set() });
    assert.deepEqual(got.tokens, want.tokens);
    assert.equal(fallbacks.length, 1);
    assert.match(engine.execution.split, /CPU only/);
  } finally {
    engine.dispose();
  }
});
