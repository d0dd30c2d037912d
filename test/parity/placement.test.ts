// The executor under hand-written placements, on stories260K: every path the lowering can
// produce — whole model on the device, weights streamed layer by layer, intra-op row splits
// (device and CPU rows of one matmul at once), layers split between devices, attention on the
// CPU beside device matmuls, KV streamed to the device, and KVPR's recomputation of a KV prefix
// from stored activations — gives logits bit-identical to the CPU, for a prefill of several
// tokens and for decode steps after it, and compiles to the ops that path needs.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Engine } from '../../engine/runtime/engine';
import type { NativeLayerPlacement, NativeModel } from '../../engine/native/model';
import { ops, placementCases } from '../helpers/placements';
import { sharedPath, skipUnlessShared } from '../helpers/shared';

const MODEL = sharedPath('models', 'stories260K.gguf');
const LAYERS = 5;

const every = (f: (i: number) => NativeLayerPlacement): NativeLayerPlacement[] => Array.from({ length: LAYERS }, (_, i) => f(i));
const CASES = placementCases(LAYERS);

test('every placement path gives the CPU logits bit for bit (prefill and decode)', { skip: skipUnlessShared(MODEL) }, async () => {
  const engine = await Engine.load(MODEL, { threads: 1, contextLength: 256, device: 'cpu' });
  try {
    const native = (engine as unknown as { native: NativeModel }).native;
    // 80 prompt tokens: the KVPR prefix (70) spans two KV pages and decode steps then recompute it.
    const prompt = Int32Array.from({ length: 80 }, (_, i) => 1 + ((i * 37) % 500));
    const decode = [42, 7, 311];
    const run = () => {
      const all = native.eval(prompt, 0, true);
      const steps = decode.map((t, i) => native.eval(Int32Array.of(t), prompt.length + i, false));
      return [all, ...steps];
    };
    const expected = run();
    for (const c of CASES) {
      native.setPlacement(c.placement, { kind: 'loopback', capacityBytes: 16 << 20, threads: 1, linkBytesPerSecond: 5e9 });
      const kinds = new Set(native.compiledOps().map((o) => o.kind));
      for (const k of c.expectKinds) assert.ok(kinds.has(k), `${c.name}: compiled ops lack ${k}`);
      const got = run();
      got.forEach((g, i) => assert.deepEqual(g, expected[i], `${c.name}: ${i === 0 ? 'prefill' : `decode step ${i}`} logits differ`));
      const stats = native.deviceStats!;
      assert.ok(stats.peakBytes > 0 && stats.peakBytes <= stats.capacityBytes, `${c.name}: device peak ${stats.peakBytes}`);
    }
    native.setPlacement(null, null);
    assert.equal(native.deviceStats, null);
    assert.deepEqual(run(), expected, 'back on the CPU alone');
  } finally {
    engine.dispose();
  }
});

test('bad placements are refused with the reason', { skip: skipUnlessShared(MODEL) }, async () => {
  const engine = await Engine.load(MODEL, { threads: 1, contextLength: 256, device: 'cpu' });
  try {
    const native = (engine as unknown as { native: NativeModel }).native;
    const dev = { kind: 'loopback' as const, capacityBytes: 16 << 20 };
    assert.throws(() => native.setPlacement({ layers: every(() => ({ ops: ops('device'), kv: 'device' })).slice(1), head: { loc: 'host' } }, dev), /4 layers given, the model has 5/);
    assert.throws(() => native.setPlacement({ layers: every(() => ({ ops: { ...ops('device'), Attention: { loc: 'host' } }, kv: 'device' })), head: { loc: 'host' } }, dev), /runs attention on the CPU; put the KV on the host/);
    assert.throws(() => native.setPlacement({ layers: every(() => ({ ops: ops('device', { deviceFraction: 1.5 }), kv: 'device' })), head: { loc: 'host' } }, dev), /device fraction 1\.5.* outside \[0, 1\]/);
    assert.throws(() => native.setPlacement({ layers: every(() => ({ ops: ops('device'), kv: 'device' })), head: { loc: 'host' } }, null), /no device was given/);
    assert.throws(() => native.setPlacement({ layers: every(() => ({ ops: ops('device'), kv: 'device' })), head: { loc: 'host' } }, { kind: 'loopback', capacityBytes: 100 }), /capacity 100 bytes is below 4 KiB/);
    // Still usable on the CPU after every refusal.
    assert.equal(native.eval(Int32Array.of(1, 2, 3), 0, false).length, 512);
  } finally {
    engine.dispose();
  }
});
