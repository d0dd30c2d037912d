// The caller's logits arrays (NativeModel.eval's `out`, evalBatch's `outs`): the same bits as the
// arrays the model makes, written into the array given and returned as it, the same array reused
// token after token; steps that split an input (prompt longer than a step) and batches that mix
// given arrays with none; and bad arrays refused by name, leaving the model usable.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { readGguf } from '../../engine/model/gguf';
import { readHparams } from '../../engine/model/hparams';
import { createNativeModel, type NativeModel } from '../../engine/native/model';
import { nativeConfig } from '../../engine/runtime/native-config';
import { argmax } from '../../engine/runtime/sampler';
import { withSyntheticQwen2 } from '../helpers/alone-logits';

function load(file: string, batchSize: number): { model: NativeModel; nVocab: number } {
  const gguf = readGguf(file);
  const hp = readHparams(gguf);
  const cfg = { ...nativeConfig(gguf, hp, 96, 1), batchSize, maxSequences: 2 };
  return { model: createNativeModel(file, gguf.tensors.map((t) => ({ name: t.name, type: t.type, dims: t.dims, offset: t.absOffset })), cfg), nVocab: hp.nVocab };
}

function sameBits(a: Float32Array, b: Float32Array, what: string): void {
  assert.equal(a.length, b.length, `${what}: length`);
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) assert.fail(`${what}: logit ${i} is ${b[i]}, the model's own array has ${a[i]}`);
}

const prompt = Array.from({ length: 21 }, (_, i) => 1 + ((i * 37) % 500));

test('logits into the caller\'s arrays: same bits, the array given, reused across tokens and split steps', async () => {
  await withSyntheticQwen2(async (file) => {
    // Steps of 8 rows: the 21-token prompt takes three steps, so the rows are gathered from each;
    // the reference takes it in one step, whose rows the LM head writes in place.
    const { model: ref, nVocab } = load(file, 96);
    const { model } = load(file, 8);
    try {
      const all = new Float32Array(prompt.length * nVocab);
      const got = model.eval(Int32Array.from(prompt), 0, true, all);
      assert.equal(got, all, 'eval returns the array it was given');
      sameBits(ref.eval(Int32Array.from(prompt), 0, true), all, 'every row of a 3-step prompt');

      const out = new Float32Array(nVocab);
      let pos = prompt.length;
      let next = argmax(all.subarray((prompt.length - 1) * nVocab));
      for (let i = 0; i < 6; i++, pos++) {
        const expect = await ref.evalAsync(Int32Array.of(next), pos);
        const r = await model.evalAsync(Int32Array.of(next), pos, false, out);
        assert.equal(r, out, 'evalAsync resolves with the array it was given');
        sameBits(expect, out, `decode token ${i}`);
        next = argmax(out);
      }

      // Two sequences, one array given and one not; then a batch whose prompt splits over steps.
      const inputs = [
        { seq: 0, tokens: Int32Array.of(next), startPos: pos },
        { seq: 1, tokens: Int32Array.from(prompt.slice(0, 13)), startPos: 0 },
      ];
      const expect = await ref.evalBatchAsync(inputs);
      const mine = new Float32Array(nVocab);
      const res = await model.evalBatchAsync(inputs, false, [mine, undefined]);
      assert.equal(res[0], mine);
      sameBits(expect[0]!, res[0]!, 'batch input 0 (array given)');
      sameBits(expect[1]!, res[1]!, 'batch input 1 (no array given)');
      const sync = model.evalBatch([{ seq: 1, tokens: Int32Array.of(5), startPos: 13 }], false, [new Float32Array(nVocab)]);
      sameBits(ref.evalBatch([{ seq: 1, tokens: Int32Array.of(5), startPos: 13 }])[0]!, sync[0]!, 'evalBatch into an array');
    } finally {
      ref.dispose();
      model.dispose();
    }
  });
});

test('bad logits arrays are refused by name and leave the model usable', async () => {
  await withSyntheticQwen2(async (file) => {
    const { model, nVocab } = load(file, 8);
    try {
      assert.throws(() => model.eval(Int32Array.of(1), 0, false, new Float32Array(nVocab - 1)), /logits array of input 0 holds 511 floats, its logits are 512 \(nVocab\)/);
      assert.throws(() => model.eval(Int32Array.of(1, 2), 0, true, new Float32Array(nVocab)), /holds 512 floats, its logits are 1024 \(tokens × nVocab\)/);
      assert.throws(() => model.eval(Int32Array.of(1), 0, false, new Float64Array(nVocab) as unknown as Float32Array), /must be a Float32Array/);
      await assert.rejects(async () => model.evalAsync(Int32Array.of(1), 0, false, new Float32Array(3)), /holds 3 floats/);
      assert.throws(() => model.evalBatch([{ seq: 0, tokens: Int32Array.of(1), startPos: 0 }], false, []), /0 logits arrays for 1 inputs/);
      // The model was released after each refusal: it evaluates, from position 0.
      assert.equal(model.eval(Int32Array.of(1), 0).length, nVocab);
      // The caller's buffer detached while the worker runs: an error, no write into freed memory.
      const out = new Float32Array(nVocab);
      const running = model.evalAsync(Int32Array.of(2), 1, false, out);
      structuredClone(out.buffer, { transfer: [out.buffer] });
      await assert.rejects(running, /was detached or resized while the evaluation ran/);
      assert.equal(model.eval(Int32Array.of(3), 2).length, nVocab, 'usable after a detached array');
    } finally {
      model.dispose();
    }
  });
});
