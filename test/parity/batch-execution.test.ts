// Multi-sequence steps: four sequences of different lengths, each with its own KV, evaluated in
// the same steps (prefill together, then decode together), give exactly the logits each gets
// alone on the CPU — on the CPU, and on the loopback device under placements that keep the KV
// on the device, split layers, stream the KV, recompute it (KVPR), and place it by sequence
// (NEO/APEX: device-KV sequences attend on the device while host-KV ones attend on the CPU).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Engine } from '../../engine/runtime/engine';
import { argmax } from '../../engine/runtime/sampler';
import { nativePlanOps, type NativeLayerPlacement, type NativeLoc, type NativeModel, type NativePlacement } from '../../engine/native/model';
import { aloneLogits, withSyntheticQwen2 } from '../helpers/alone-logits';
import { sharedPath, skipUnlessShared } from '../helpers/shared';

const SEQS = 4;
const DECODE_STEPS = 4;

function ops(loc: NativeLoc): NativeLayerPlacement['ops'] {
  return Object.fromEntries(nativePlanOps().map((o) => [o, { loc }]));
}

function placements(nLayers: number): { name: string; placement: NativePlacement; kv?: NativeLoc[]; swap?: NativeLoc[] }[] {
  const every = (f: (i: number) => NativeLayerPlacement) => Array.from({ length: nLayers }, (_, i) => f(i));
  return [
    { name: 'all on the device', placement: { layers: every(() => ({ ops: ops('device'), kv: 'device' })), head: { loc: 'device' } } },
    { name: 'layers split', placement: { layers: every((i) => ({ ops: ops(i % 2 ? 'device' : 'host'), kv: i % 2 ? 'device' : 'host' })), head: { loc: 'host' } } },
    { name: 'KV streamed', placement: { layers: every(() => ({ ops: ops('device'), kv: 'host' })), head: { loc: 'device', weights: 'streamed' } } },
    { name: 'KVPR', placement: { layers: every(() => ({ ops: ops('device'), kv: 'host', recomputePrefix: 12 })), head: { loc: 'device' } } },
    { name: 'KV by sequence (NEO)', placement: { layers: every(() => ({ ops: ops('device'), kv: 'host', kvBySequence: true })), head: { loc: 'device' } }, kv: ['device', 'host', 'device', 'host'] },
    { name: 'KV by sequence, swapped mid-generation', placement: { layers: every(() => ({ ops: ops('device'), kv: 'host', kvBySequence: true })), head: { loc: 'device' } }, kv: ['device', 'host', 'device', 'host'], swap: ['host', 'device', 'host', 'host'] },
    { name: 'KV by sequence, all on the CPU side', placement: { layers: every(() => ({ ops: ops('device'), kv: 'host', kvBySequence: true })), head: { loc: 'host' } }, kv: ['host', 'host', 'host', 'host'] },
  ];
}

async function check(file: string, vocab: number, nLayers: number): Promise<void> {
  const prompts = [3, 9, 17, 30].map((len, s) => Array.from({ length: len }, (_, i) => 1 + ((i * 31 + s * 7) % (vocab - 1))));
  const engine = await Engine.load(file, { threads: 1, contextLength: 128, device: 'cpu', maxSequences: SEQS });
  try {
    const native = (engine as unknown as { native: NativeModel }).native;
    // Each sequence alone (sequence 0 of the model, from scratch).
    const alone = aloneLogits(native, prompts, DECODE_STEPS);
    const together = (swap?: NativeLoc[]): Float32Array[][] => {
      const out: Float32Array[][] = prompts.map(() => []);
      const first = native.evalBatch(prompts.map((p, s) => ({ seq: s, tokens: Int32Array.from(p), startPos: 0 })));
      first.forEach((l, s) => out[s]!.push(l));
      for (let i = 0; i < DECODE_STEPS; i++) {
        // NEO moves requests between the pools between iterations.
        if (swap && i === 2) {
          const before = native.deviceStats!.bytesInUse;
          swap.forEach((loc, s) => native.swapSequenceKv(s, loc));
          const after = native.deviceStats!.bytesInUse;
          // More sequences leave the device than arrive: its KV pages go back to the budget.
          assert.ok(after < before, `swap: device bytes ${before} -> ${after}`);
        }
        const step = native.evalBatch(prompts.map((p, s) => ({ seq: s, tokens: Int32Array.of(argmax(out[s]![i]!)), startPos: p.length + i })));
        step.forEach((l, s) => out[s]!.push(l));
      }
      return out;
    };
    for (let s = 0; s < SEQS; s++) native.clearKv(0, s);
    assert.deepEqual(together(), alone, 'CPU: batched steps differ from each sequence alone');
    for (const c of placements(nLayers)) {
      native.setPlacement(c.placement, { kind: 'loopback', capacityBytes: 32 << 20, threads: 1 });
      c.kv?.forEach((loc, s) => native.setSequenceKv(s, loc));
      const got = together(c.swap);
      for (let s = 0; s < SEQS; s++) assert.deepEqual(got[s], alone[s], `${c.name}: sequence ${s} (prompt ${prompts[s]!.length}) differs`);
      const kinds = new Set(native.compiledOps().map((o) => o.kind));
      if (c.kv) assert.ok(native.compiledOps().filter((o) => o.kind === 'attention').length >= 2 * nLayers, `${c.name}: attention on both sides`);
      if (/KVPR/.test(c.name)) assert.ok(kinds.has('recompute_kv'));
    }
    native.setPlacement(null, null);
    assert.throws(() => native.evalBatch([{ seq: 0, tokens: Int32Array.of(1), startPos: 0 }, { seq: 0, tokens: Int32Array.of(2), startPos: 0 }]), /sequence 0 appears twice/);
    assert.throws(() => native.evalBatch([{ seq: 4, tokens: Int32Array.of(1), startPos: 0 }]), /sequence 4 is outside \[0, 4\)/);
    assert.throws(() => native.evalBatch([{ seq: 1, tokens: Int32Array.of(1), startPos: 5 }]), /sequence 1: start position 5 leaves a gap/);
  } finally {
    engine.dispose();
  }
}

test('four sequences of different lengths in one step equal each alone (stories260K)', { skip: skipUnlessShared(sharedPath('models', 'stories260K.gguf')) }, async () => {
  await check(sharedPath('models', 'stories260K.gguf'), 512, 5);
});

test('four sequences of different lengths in one step equal each alone (synthetic qwen2 Q8_0, GQA)', async () => {
  await withSyntheticQwen2((file) => check(file, 512, 3));
});
