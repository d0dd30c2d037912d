// Short steps on the JS thread (engine/runtime/inline-steps.ts), on a real model file: the same
// logits bits as on the worker thread, the event loop served between inline steps, a step over
// the budget sending the next one to the worker, prompt chunks always on the worker, and errors
// of an inline step arriving as rejections that leave the model usable.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { readGguf } from '../../engine/model/gguf';
import { readHparams } from '../../engine/model/hparams';
import { createNativeModel } from '../../engine/native/model';
import { nativeConfig } from '../../engine/runtime/native-config';
import { argmax } from '../../engine/runtime/sampler';
import { INLINE_MAX_ROWS, withInlineSteps } from '../../engine/runtime/inline-steps';
import { Engine } from '../../engine/runtime/engine';
import { withSyntheticQwen2 } from '../helpers/alone-logits';

const CONTEXT = 96;

function load(file: string, budgetMs: number) {
  const gguf = readGguf(file);
  const hp = readHparams(gguf);
  const native = createNativeModel(file, gguf.tensors.map((t) => ({ name: t.name, type: t.type, dims: t.dims, offset: t.absOffset })), nativeConfig(gguf, hp, CONTEXT, 1));
  return { model: withInlineSteps(native, budgetMs), nVocab: hp.nVocab };
}

const prompt = Array.from({ length: 20 }, (_, i) => 1 + ((i * 37) % 500));

/** Greedy decode of `steps` tokens after the prompt; every step's logits copied. */
async function decode(model: ReturnType<typeof load>['model'], nVocab: number, steps: number, onStep?: () => void): Promise<Float32Array[]> {
  const out = new Float32Array(nVocab);
  await model.evalAsync(Int32Array.from(prompt), 0, false, out);
  const seen: Float32Array[] = [];
  let pos = prompt.length;
  for (let i = 0; i < steps; i++) {
    await model.evalAsync(Int32Array.of(argmax(out)), pos++, false, out);
    seen.push(out.slice());
    onStep?.();
  }
  return seen;
}

/**
 * A model whose budget lets every short step run inline, with the prompt evaluated and one short
 * step after it (on the worker: nothing was measured before it), so the next short step runs inline.
 */
async function withPrimedModel(check: (model: ReturnType<typeof load>['model'], out: Float32Array) => Promise<void>): Promise<void> {
  await withSyntheticQwen2(async (file) => {
    const { model, nVocab } = load(file, Number.MAX_VALUE);
    try {
      const out = new Float32Array(nVocab);
      await model.evalAsync(Int32Array.from(prompt), 0, false, out);
      await model.evalAsync(Int32Array.of(5), prompt.length, false, out);
      await check(model, out);
    } finally {
      model.dispose();
    }
  });
}

test('inline steps give the worker thread\'s bits; the first short step and prompt chunks go to the worker', async () => {
  await withSyntheticQwen2(async (file) => {
    const worker = load(file, 0);
    const inline = load(file, Number.MAX_VALUE);
    try {
      const a = await decode(worker.model, worker.nVocab, 12);
      const b = await decode(inline.model, inline.nVocab, 12);
      for (let s = 0; s < a.length; s++) {
        for (let i = 0; i < a[s]!.length; i++) if (!Object.is(a[s]![i], b[s]![i])) assert.fail(`step ${s} logit ${i}: inline ${b[s]![i]}, worker ${a[s]![i]}`);
      }
      assert.deepEqual({ inline: worker.model.inlineSteps.stats.inline, worker: worker.model.inlineSteps.stats.worker }, { inline: 0, worker: 13 }, 'budget 0: every step on the worker');
      // The 20-token prompt is more than INLINE_MAX_ROWS rows; the first decode step has nothing measured before it.
      assert.ok(prompt.length > INLINE_MAX_ROWS);
      assert.deepEqual({ inline: inline.model.inlineSteps.stats.inline, worker: inline.model.inlineSteps.stats.worker }, { inline: 11, worker: 2 });
    } finally {
      worker.model.dispose();
      inline.model.dispose();
    }
  });
});

test('the event loop gets a turn before every inline step', async () => {
  await withSyntheticQwen2(async (file) => {
    const { model, nVocab } = load(file, Number.MAX_VALUE);
    const events: string[] = [];
    let ticking = true;
    const tick = (): void => {
      if (!ticking) return;
      events.push('tick');
      setImmediate(tick);
    };
    try {
      setImmediate(tick);
      await decode(model, nVocab, 10, () => events.push('step'));
      ticking = false;
      assert.equal(model.inlineSteps.stats.inline, 9);
      const steps = events.map((e, i) => (e === 'step' ? i : -1)).filter((i) => i >= 0);
      for (let k = 1; k < steps.length; k++) {
        assert.ok(events.slice(steps[k - 1]! + 1, steps[k]!).includes('tick'), `no turn of the event loop between steps ${k - 1} and ${k}: ${events.join(' ')}`);
      }
    } finally {
      ticking = false;
      model.dispose();
    }
  });
});

test('a short step over the budget sends the next one to the worker; under it, back inline', async () => {
  await withPrimedModel(async (model, out) => {
    await model.evalAsync(Int32Array.of(6), prompt.length + 1, false, out);
    const s = model.inlineSteps.stats;
    assert.deepEqual([s.inline, s.worker], [1, 2]);
    assert.ok(s.lastShortMs !== undefined && s.lastShortMs > 0);
    model.inlineSteps.budgetMs = s.lastShortMs / 1e6;  // the last step took longer than this
    await model.evalAsync(Int32Array.of(7), prompt.length + 2, false, out);
    await model.evalAsync(Int32Array.of(8), prompt.length + 3, false, out);
    assert.deepEqual([s.inline, s.worker], [1, 4], 'steps after one over the budget run on the worker');
    model.inlineSteps.budgetMs = Number.MAX_VALUE;
    await model.evalAsync(Int32Array.of(9), prompt.length + 4, false, out);
    assert.deepEqual([s.inline, s.worker], [2, 4], 'under the budget again: inline');
  });
});

test('a failing inline step rejects with the model\'s error and the model goes on', async () => {
  await withPrimedModel(async (model, out) => {
    const before = model.inlineSteps.stats.inline;
    const step = model.evalAsync(Int32Array.of(5), CONTEXT + 10, false, out);
    assert.ok(step instanceof Promise, 'an inline step still answers with a promise');
    await assert.rejects(step, (e: Error) => /\b106\b|context|position/i.test(e.message));
    assert.equal(model.inlineSteps.stats.inline, before + 1, 'the failing step ran inline');
    await model.evalAsync(Int32Array.of(6), prompt.length + 1, false, out);
    assert.ok(out.every(Number.isFinite));
  });
});

test('a budget that is not a non-negative number is refused by name, before the engine loads anything', async () => {
  assert.throws(() => withInlineSteps({} as never, -1), /inline step budget must be a non-negative number of ms, got -1/);
  assert.throws(() => withInlineSteps({} as never, Number.NaN), /got NaN/);
  await withSyntheticQwen2(async (file) => {
    await assert.rejects(Engine.load(file, { threads: 1, contextLength: CONTEXT, inlineStepBudgetMs: -2 }), /inlineStepBudgetMs: inline step budget must be a non-negative number of ms, got -2/);
  });
});
