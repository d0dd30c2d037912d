// Two placements per plan, chosen per step (issue 21 item 1): prompt steps of at least `rows` rows
// run the prefill placement, decode steps the decode one, both sharing the decode placement's KV.
// On stories260K, hand-written pairs — the CPU decoding while prompt matmuls stream their weights
// to the device (llama.cpp's large-batch offload), and the reverse — give the CPU's logits bit for
// bit for a long prompt and the decode steps after it on the loopback; the trace shows which
// placement each step used (prompt steps: prefill ops only; decode steps: decode ops only).
process.env.LP_NUM_THREADS = '1';
process.env.VK_INSTANCE_LAYERS = 'VK_LAYER_KHRONOS_validation';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';

import { GgmlType } from '../../engine/model/ggml-types';
import { readGguf } from '../../engine/model/gguf/index';
import { readHparams } from '../../engine/model/hparams';
import { writeSyntheticModel } from '../../engine/model/synthetic';
import { vulkanProbe } from '../../engine/hardware/vulkan-profile';
import { vulkanWorkspaceBytes } from '../../engine/runtime/devices';
import { CTX, LINK_GBPS, planHardware, WORKLOAD, withinDeviceTolerance } from '../helpers/policy-runs';

import { Engine } from '../../engine/runtime/engine';
import type { NativeLayerPlacement, NativeModel, NativePlacement } from '../../engine/native/model';
import { ops } from '../helpers/placements';
import { sharedPath, skipUnlessShared, tempDir } from '../helpers/shared';

const MODEL = sharedPath('models', 'stories260K.gguf');
const LAYERS = 5;
const every = (f: (i: number) => NativeLayerPlacement): NativeLayerPlacement[] => Array.from({ length: LAYERS }, (_, i) => f(i));
const cpuDecode: NativePlacement = { layers: every(() => ({ ops: ops('host'), kv: 'host' })), head: { loc: 'host' } };
const streamedPrefill: NativePlacement = { layers: every(() => ({ ops: { ...ops('device', { weights: 'streamed' }), Attention: { loc: 'host' } }, kv: 'host' })), head: { loc: 'host' } };
const deviceDecode: NativePlacement = { layers: every(() => ({ ops: ops('device'), kv: 'device' })), head: { loc: 'device' } };
const splitPrefill: NativePlacement = { layers: every((i) => ({ ops: i < 2 ? { ...ops('host'), Attention: { loc: 'device' } } : ops('device', { deviceFraction: 0.5 }), kv: 'device' })), head: { loc: 'host' } };

test('prompt steps run the prefill placement, decode steps the decode one: the CPU\'s logits bit for bit', { skip: skipUnlessShared(MODEL) }, async () => {
  const engine = await Engine.load(MODEL, { threads: 1, contextLength: 256, device: 'cpu' });
  try {
    const native = (engine as unknown as { native: NativeModel }).native;
    const prompt = Int32Array.from({ length: 150 }, (_, i) => 1 + ((i * 37) % 500));
    const decode = [42, 7, 311, 5];
    const run = () => {
      native.clearKv(0);
      const chunks = [native.eval(prompt.subarray(0, 64), 0, false), native.eval(prompt.subarray(64, 128), 64, false), native.eval(prompt.subarray(128), 128, false)];
      return [...chunks, ...decode.map((t, i) => native.eval(Int32Array.of(t), prompt.length + i, false))];
    };
    const expected = run();
    for (const [name, d, p] of [['CPU decode, streamed prefill', cpuDecode, streamedPrefill], ['device decode, split prefill', deviceDecode, splitPrefill]] as const) {
      native.setPlacement(d, { kind: 'loopback', capacityBytes: 16 << 20, threads: 1, linkBytesPerSecond: 5e9 }, { placement: p, rows: 16 });
      const compiled = native.compiledOps();
      const stages = new Set(compiled.map((o) => o.stage));
      assert.deepEqual([...stages].sort(), ['decode', 'prefill'], `${name}: both placements compiled`);
      native.tracing = true;
      const got = run();
      got.forEach((g, i) => assert.deepEqual(g, expected[i], `${name}: ${i < 3 ? `prompt chunk ${i}` : `decode step ${i - 2}`} logits differ`));
      const trace = native.takeTrace();
      native.tracing = false;
      const stageOfStep = new Map<number, Set<string>>();
      for (let k = 0; k < trace.length; k += 4) {
        const step = trace[k]!, op = compiled[trace[k + 1]!]!;
        stageOfStep.set(step, (stageOfStep.get(step) ?? new Set()).add(op.stage));
      }
      const steps = [...stageOfStep.keys()].sort((a, b) => a - b);
      const used = steps.map((s) => [...stageOfStep.get(s)!].join('+'));
      // 150 prompt tokens: chunks of 64, 64 and 22 rows (device steps hold 64 rows), all ≥ 16; then 4 decode steps of one row.
      assert.deepEqual(used, ['prefill', 'prefill', 'prefill', 'decode', 'decode', 'decode', 'decode'], `${name}: placement per step`);
      const prefillKinds = new Set(compiled.filter((o) => o.stage === 'prefill').map((o) => o.kind));
      if (name.startsWith('CPU')) {
        assert.ok(prefillKinds.has('copy_weight'), `${name}: prompt steps stream weights to the device`);
        assert.ok(compiled.filter((o) => o.stage === 'decode').every((o) => o.lane === 'cpu'), `${name}: decode stays on the CPU`);
      }
    }
    native.setPlacement(null, null);
    assert.deepEqual(run(), expected, 'back on the CPU alone');
  } finally {
    engine.dispose();
  }
});

test('a prefill placement is refused with the reason when it does not match the model', { skip: skipUnlessShared(MODEL) }, async () => {
  const engine = await Engine.load(MODEL, { threads: 1, contextLength: 256, device: 'cpu' });
  try {
    const native = (engine as unknown as { native: NativeModel }).native;
    const dev = { kind: 'loopback' as const, capacityBytes: 16 << 20 };
    assert.throws(() => native.setPlacement(deviceDecode, dev, { placement: { ...splitPrefill, layers: splitPrefill.layers.slice(1) }, rows: 16 }), /4 layers given, the model has 5/);
    assert.throws(() => native.setPlacement(deviceDecode, dev, { placement: splitPrefill, rows: 0 }), /prefill rows must be at least 1/);
    assert.equal(native.eval(Int32Array.of(1, 2, 3), 0, false).length, 512);
  } finally {
    engine.dispose();
  }
});

// A plan whose prefill stage places ops otherwise (paper 000's split points: the prompt's larger
// matmuls go to the device), executed through Engine.load: the cost model's crossover decides from
// how many rows a step runs it, prompt chunks above it run the prefill op list, decode steps the
// decode one; the loopback gives the CPU's logits bit for bit, Vulkan within its tolerance.
for (const device of ['loopback', 'vulkan'] as const) {
  const vulkanSkip = device === 'vulkan' ? (existsSync('/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json') && vulkanProbe().available ? false : 'no Vulkan device or validation layer') : false;
  test(`split-points' prefill placement runs the prompt on ${device}`, { skip: vulkanSkip, timeout: 300_000 }, async () => {
    const { dir, cleanup } = tempDir();
    try {
      const file = path.join(dir, 'm.gguf');
      writeSyntheticModel(file, { architecture: 'llama', nLayers: 4, nEmbd: 128, nHeads: 4, nKvHeads: 2, nFf: 256, nVocab: 512, contextLength: CTX, seed: 7, weightType: GgmlType.Q4_0 });
      const size = readGguf(file).tensors.reduce((s, t) => s + t.byteSize, 0);
      const hp = readHparams(readGguf(file));
      // A budget at which the plan splits the layers' matmuls (found by trying: split-points then streams some).
      const vram = Math.round(size * 3 + 2_500_000 + (device === 'vulkan' ? vulkanWorkspaceBytes(hp, CTX) : 0));
      const seq = Array.from({ length: 104 }, (_, i) => 1 + ((i * 37) % 500));
      const run = async (e: Engine) => { const out: Float32Array[] = []; for (const n of [100, 101, 102, 103, 104]) out.push(await e.logits(seq.slice(0, n))); return out; };
      const cpu = await Engine.load(file, { threads: 1, contextLength: CTX, device: 'cpu' });
      const want = await run(cpu);
      cpu.dispose();
      const engine = await Engine.load(file, { threads: 1, contextLength: CTX, device, vramBytes: vram, policy: 'split-points', hardware: planHardware(device), linkGBps: LINK_GBPS, workload: { ...WORKLOAD, vramBytes: vram } });
      try {
        const note = engine.execution.notes.find((n) => /prompt steps of \d+ rows or more run the plan's prefill placement/.test(n));
        assert.ok(note, `the plan's prefill placement is used: ${engine.execution.notes.join(' | ')}`);
        const rows = Number(/prompt steps of (\d+) rows/.exec(note)![1]);
        assert.ok(rows > 1 && rows <= 64, `threshold ${rows}`);
        engine.setTracing(true);
        const got = await run(engine);
        if (device === 'loopback') got.forEach((g, i) => assert.deepEqual(g, want[i], `logits after ${100 + i} tokens differ from the CPU's`));
        else withinDeviceTolerance('split-points prefill placement', got, want, false);
        const trace = engine.takeTrace();
        const perStep = new Map<number, Set<string>>();
        for (const ev of trace.events) perStep.set(ev.step, (perStep.get(ev.step) ?? new Set()).add(trace.ops[ev.op]!.stage ?? 'decode'));
        const stages = [...perStep.values()].map((s) => [...s].join('+'));
        assert.ok(stages.includes('prefill') && stages.includes('decode') && !stages.some((s) => s.includes('+')), `one placement per step: ${stages.join(', ')}`);
        console.log(`  ${device}: ${note}; steps ran ${stages.join(', ')}`);
      } finally {
        engine.dispose();
      }
    } finally {
      cleanup();
    }
  });
}
