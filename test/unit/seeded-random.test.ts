// The engine's one seeded PRNG: the streams that seeded tests, synthetic models and workloads were
// built on must not move (the figures below were drawn from the four copies it replaced).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mulberry32, seededRandom } from '../../engine/model/seeded-random';
import { Prng } from '../../engine/runtime/sampler';

test('seed 1 and 0xdeadbeef give the mulberry32 streams the copies gave', () => {
  const r = seededRandom(1);
  assert.deepEqual([r(), r(), r(), r()], [0.6270739405881613, 0.002735721180215478, 0.5274470399599522, 0.9810509674716741]);
  const q = seededRandom(0xdeadbeef);
  assert.deepEqual([q(), q()], [0.9413696140982211, 0.26719574979506433]);
});

test('the uint32 stream, the [0, 1) stream and the sampler\'s Prng are one stream', () => {
  const u = mulberry32(42), f = seededRandom(42), p = new Prng(42);
  for (let i = 0; i < 1000; i++) {
    const x = u();
    assert.ok(Number.isInteger(x) && x >= 0 && x < 2 ** 32);
    assert.equal(f(), x / 2 ** 32);
    assert.equal(p.next(), x / 2 ** 32);
  }
  assert.notEqual(seededRandom(1)(), seededRandom(2)());
});
