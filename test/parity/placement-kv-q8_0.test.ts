// A Q8_0 KV cache (kvFormat 'Q8_0') under every placement path the lowering can produce, on the
// loopback device (which runs the CPU's attention kernels, so it reads Q8_0 KV): KV on the device,
// streamed to it page by page, recomputed there by KVPR (its kv_store quantizes as the CPU's does),
// attention on the CPU beside device matmuls. Every path must give the CPU's Q8_0 logits bit for
// bit, prefill and decode, as test/parity/placement.test.ts asks of the F16 cache.
// tiny-fim-coder: head size 32, one Q8_0 block per row (stories260K's 8 cannot be stored as Q8_0).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Engine } from '../../engine/runtime/engine';
import { listNativeDevices, type NativeModel } from '../../engine/native/model';
import { placementCases } from '../helpers/placements';
import { planHardware, withinDeviceTolerance } from '../helpers/policy-runs';
import { vulkanProbe } from '../../engine/hardware/vulkan-profile';
import { sharedPath, skipUnlessShared } from '../helpers/shared';

const MODEL = sharedPath('models', 'tiny-fim-coder.q8_0.gguf');
const skip = skipUnlessShared(MODEL);

test('Q8_0 KV cache: every placement path on the loopback device gives the CPU logits bit for bit', { skip }, async () => {
  const engine = await Engine.load(MODEL, { threads: 1, contextLength: 256, device: 'cpu', kvFormat: 'Q8_0' });
  try {
    const native = (engine as unknown as { native: NativeModel }).native;
    assert.equal(native.kvFormat, 'Q8_0');
    const layers = engine.hparams.nLayers;
    // 80 prompt tokens: the KVPR prefix (70) spans two KV pages and decode steps then recompute it.
    const prompt = Int32Array.from({ length: 80 }, (_, i) => 1 + ((i * 37) % 500));
    const decode = [42, 7, 311];
    const run = (): Float32Array[] => {
      const all = native.eval(prompt, 0, true);
      return [all, ...decode.map((t, i) => native.eval(Int32Array.of(t), prompt.length + i, false))];
    };
    const expected = run();
    for (const c of placementCases(layers)) {
      native.setPlacement(c.placement, { kind: 'loopback', capacityBytes: 64 << 20, threads: 1, linkBytesPerSecond: 5e9 });
      const got = run();
      got.forEach((g, i) => assert.deepEqual(g, expected[i], `${c.name}: ${i === 0 ? 'prefill' : `decode step ${i}`} logits differ`));
    }
  } finally {
    engine.dispose();
  }
});

test('Q8_0 KV cache: the logits stay close to the F16 cache\'s', { skip }, async () => {
  const load = (kvFormat: 'F16' | 'Q8_0') => Engine.load(MODEL, { threads: 1, contextLength: 256, device: 'cpu', kvFormat });
  const [f16, q8] = [await load('F16'), await load('Q8_0')];
  try {
    const prompt = Int32Array.from({ length: 120 }, (_, i) => 1 + ((i * 53) % 700));
    const a = (f16 as unknown as { native: NativeModel }).native.eval(prompt, 0, true);
    const b = (q8 as unknown as { native: NativeModel }).native.eval(prompt, 0, true);
    const vocab = f16.hparams.nVocab;
    let agree = 0, worst = 0;
    for (let p = 0; p < prompt.length; p++) {
      let num = 0, den = 0, ia = 0, ib = 0;
      for (let j = 0; j < vocab; j++) {
        const x = a[p * vocab + j]!, y = b[p * vocab + j]!;
        num += (x - y) ** 2;
        den += x * x;
        if (x > a[p * vocab + ia]!) ia = j;
        if (y > b[p * vocab + ib]!) ib = j;
      }
      worst = Math.max(worst, Math.sqrt(num / den));
      if (ia === ib) agree++;
    }
    // Measured: relative L2 distance of a position's logits at most 1.7e-2, the top token the
    // same at all 120 positions; an unquantized cache gives 0, a misread one ~1.
    assert.ok(worst > 0, 'Q8_0 and F16 logits are identical: the cache was not quantized');
    assert.ok(worst < 0.05, `a position's logits moved by ${worst} (relative L2) with the Q8_0 cache`);
    assert.ok(agree >= 0.9 * prompt.length, `the top token agrees at ${agree} of ${prompt.length} positions`);
    console.log(`  Q8_0 vs F16 KV: worst relative L2 ${worst.toExponential(2)}, top token agrees at ${agree}/${prompt.length}`);
  } finally {
    f16.dispose();
    q8.dispose();
  }
});

const probe = vulkanProbe();
const vulkanSkip = skip || (!probe.available ? `no Vulkan device: ${probe.reason}` : false);

test('Q8_0 KV cache on Vulkan: device attention is refused with the reason; attention on the CPU beside device matmuls runs', { skip: vulkanSkip }, async () => {
  const engine = await Engine.load(MODEL, { threads: 1, contextLength: 256, device: 'cpu', kvFormat: 'Q8_0' });
  try {
    const native = (engine as unknown as { native: NativeModel }).native;
    const prompt = Int32Array.from({ length: 40 }, (_, i) => 1 + ((i * 37) % 500));
    const run = (): Float32Array[] => [native.eval(prompt, 0, true), native.eval(Int32Array.of(42), prompt.length, false)];
    const expected = run();
    const cases = placementCases(engine.hparams.nLayers);
    const device = { kind: 'vulkan' as const, capacityBytes: 64 << 20 };
    for (const name of ['everything on the device', 'KV streamed to the device']) {
      assert.throws(() => native.setPlacement(cases.find((c) => c.name === name)!.placement, device),
        /layer 0 runs attention on the device \(vulkan\), whose attention reads F16 KV only, and this model's KV cache is Q8_0 \(kvFormat\)/, name);
    }
    // Still on the CPU after the refusals, with the same logits.
    run().forEach((g, i) => assert.deepEqual(g, expected[i], `after the refusals, step ${i}`));
    native.setPlacement(cases.find((c) => c.name === 'attention on the CPU')!.placement, device);
    withinDeviceTolerance('Q8_0 KV, attention on the CPU beside Vulkan matmuls', run(), expected, false);
  } finally {
    engine.dispose();
  }
});

test('Q8_0 KV cache on Vulkan through the planner: LIA keeps the matmuls on the GPU and attention on the CPU; gpu-only is refused naming why', { skip: vulkanSkip }, async () => {
  const cpu = await Engine.load(MODEL, { threads: 1, contextLength: 256, device: 'cpu', kvFormat: 'Q8_0' });
  const prompt = Int32Array.from({ length: 40 }, (_, i) => 1 + ((i * 37) % 500));
  const run = (engine: Engine): Float32Array[] => {
    const native = (engine as unknown as { native: NativeModel }).native;
    return [native.eval(prompt, 0, true), native.eval(Int32Array.of(42), prompt.length, false)];
  };
  const expected = run(cpu);
  cpu.dispose();
  // The device lists the KV formats its attention reads; the plan is made with them.
  assert.deepEqual(listNativeDevices().found.find((d) => d.name === 'vulkan')?.kvFormats, ['F16']);
  const engine = await Engine.load(MODEL, { threads: 1, contextLength: 256, device: 'vulkan', vramBytes: 64 << 20, kvFormat: 'Q8_0', policy: 'lia', hardware: planHardware('vulkan') });
  try {
    assert.equal(engine.execution.device, 'vulkan');
    assert.equal(engine.execution.fallback, undefined);
    assert.match(engine.execution.split, /^GPU \d+\/\d+ layers.* · KV host/);
    // Every layer's matmuls on the GPU beside attention on the CPU: the Model Layers panel's GPU+CPU.
    assert.ok(Object.entries(engine.runsOn()).every(([i, w]) => i === '-1' || w === 'GPU+CPU'), JSON.stringify(engine.runsOn()));
    const native = (engine as unknown as { native: NativeModel }).native;
    const attention = native.compiledOps().filter((o) => o.kind === 'attention');
    assert.ok(attention.length > 0 && attention.every((o) => o.loc === 'host'), 'attention runs on the CPU');
    assert.ok(native.compiledOps().some((o) => o.kind === 'matmul' && o.loc === 'device'), 'matmuls run on the Vulkan device');
    withinDeviceTolerance('Q8_0 KV, LIA on Vulkan', run(engine), expected, false);
  } finally {
    engine.dispose();
  }
  // A policy that runs attention on the GPU is refused at load with the reason.
  await assert.rejects(Engine.load(MODEL, { threads: 1, contextLength: 256, device: 'vulkan', vramBytes: 64 << 20, kvFormat: 'Q8_0', policy: 'gpu-only', hardware: planHardware('vulkan') }),
    /policy gpu-only cannot run here: it runs attention \(or keeps the KV\) on the GPU in layer 0 of the decode stage, and the GPU's attention reads F16 KV only while this model's KV cache is Q8_0/);
});
