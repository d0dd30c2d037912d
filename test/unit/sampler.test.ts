import { test } from 'node:test';
import assert from 'node:assert/strict';

import { applyRepeatPenalty, argmax, Prng, resolveSampling, Sampler, SamplingOptionError, topKIds } from '../../engine/runtime/sampler';
import { StopStringFilter } from '../../engine/runtime/stop-strings';

test('greedy picks the argmax, after the repetition penalty', () => {
  const logits = Float32Array.from([1, 5, 4.9, -2]);
  assert.equal(new Sampler({ temperature: 0 }).sample(logits.slice(), []), 1);
  // Token 1 was just generated: 5 / 1.1 = 4.545 < 4.9.
  assert.equal(new Sampler({ temperature: 0, repeatPenalty: 1.1 }).sample(logits.slice(), [1]), 2);
});

test('repetition penalty divides positive and multiplies negative logits, once per token', () => {
  const l = Float32Array.from([2, -2, 3]);
  applyRepeatPenalty(l, [0, 1, 0, 0], 2, 64);
  assert.deepEqual(Array.from(l), [1, -4, 3]);
  const m = Float32Array.from([2, 2]);
  applyRepeatPenalty(m, [0, 1], 2, 1); // only the last token is in the window
  assert.deepEqual(Array.from(m), [2, 1]);
});

test('topKIds returns the k largest, highest first, ties by id', () => {
  const l = Float32Array.from([0.1, 3, 2, 3, -1, 2.5]);
  assert.deepEqual(topKIds(l, 3), [1, 3, 5]);
  assert.deepEqual(topKIds(l, 0), [1, 3, 5, 2, 0, 4]);
  assert.equal(argmax(l), 1);
});

test('the PRNG is deterministic per seed and uniform enough', () => {
  const a = new Prng(42), b = new Prng(42), c = new Prng(43);
  const xs = Array.from({ length: 1000 }, () => a.next());
  assert.deepEqual(xs, Array.from({ length: 1000 }, () => b.next()));
  assert.notDeepEqual(xs.slice(0, 10), Array.from({ length: 10 }, () => c.next()));
  const mean = xs.reduce((s, x) => s + x, 0) / xs.length;
  assert.ok(Math.abs(mean - 0.5) < 0.05, `mean ${mean}`);
  assert.ok(xs.every((x) => x >= 0 && x < 1));
});

test('same seed, same tokens; sampling follows the distribution', () => {
  const logits = Float32Array.from([Math.log(0.5), Math.log(0.3), Math.log(0.2)]);
  const opts = { temperature: 1, topK: 0, topP: 1, minP: 0, seed: 7 };
  const s1 = new Sampler(opts), s2 = new Sampler(opts);
  const draws1 = Array.from({ length: 3000 }, () => s1.sample(logits.slice(), []));
  const draws2 = Array.from({ length: 3000 }, () => s2.sample(logits.slice(), []));
  assert.deepEqual(draws1, draws2);
  const freq = [0, 1, 2].map((id) => draws1.filter((d) => d === id).length / draws1.length);
  assert.ok(Math.abs(freq[0]! - 0.5) < 0.04 && Math.abs(freq[1]! - 0.3) < 0.04 && Math.abs(freq[2]! - 0.2) < 0.04, `freq ${freq}`);
});

test('top-k, top-p and min-p cut the candidates', () => {
  const logits = Float32Array.from([Math.log(0.5), Math.log(0.3), Math.log(0.15), Math.log(0.05)]);
  const draw = (o: object) => {
    const s = new Sampler({ temperature: 1, topK: 0, topP: 1, minP: 0, seed: 1, ...o });
    return new Set(Array.from({ length: 500 }, () => s.sample(logits.slice(), [])));
  };
  assert.deepEqual(draw({ topK: 2 }), new Set([0, 1]));
  assert.deepEqual(draw({ topP: 0.7 }), new Set([0, 1])); // 0.5 + 0.3 ≥ 0.7
  assert.deepEqual(draw({ minP: 0.25 }), new Set([0, 1, 2])); // 0.15 ≥ 0.25 × 0.5
  assert.deepEqual(draw({ minP: 0.5 }), new Set([0, 1]));
  assert.deepEqual(draw({ topK: 1 }), new Set([0]));
});

test('low temperature sharpens towards the argmax', () => {
  const logits = Float32Array.from([1, 0.5, 0]);
  const s = new Sampler({ temperature: 0.01, topK: 0, topP: 1, minP: 0, seed: 3 });
  assert.ok(Array.from({ length: 200 }, () => s.sample(logits.slice(), [])).every((id) => id === 0));
});

test('bad sampling options are rejected with the option named', () => {
  assert.throws(() => resolveSampling({ temperature: -1 }), SamplingOptionError);
  assert.throws(() => resolveSampling({ topP: 1.5 }), /topP/);
  assert.throws(() => resolveSampling({ repeatPenalty: Number.NaN }), /repeatPenalty/);
});

test('stop strings: text is held back while it may start a stop string, and cut before it', () => {
  const f = new StopStringFilter(['\n\n', 'END']);
  assert.deepEqual(f.push('hello'), { text: 'hello', stopped: false });
  assert.deepEqual(f.push(' E'), { text: ' ', stopped: false }); // 'E' may start 'END'
  assert.deepEqual(f.push('x'), { text: 'Ex', stopped: false });
  assert.deepEqual(f.push('\n'), { text: '', stopped: false });
  assert.deepEqual(f.push('\nmore'), { text: '', stopped: true });
  assert.equal(f.text, 'hello Ex');
  const g = new StopStringFilter(['END']);
  assert.deepEqual(g.push('aEN'), { text: 'a', stopped: false });
  assert.deepEqual(g.push('D tail'), { text: '', stopped: true });
  const h = new StopStringFilter(['zz']);
  h.push('abz');
  assert.equal(h.flush(), 'z');
});
