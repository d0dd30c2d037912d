// Online workload generation and the continuous-batching loop.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { generateWorkload } from '../../engine/plan/online/workload';
import { seededRandom } from '../../engine/model/seeded-random';
import { runOnline } from '../../engine/plan/online/loop';
import { profilePredictors, type OnlineCosts } from '../../engine/plan/neo/costs';
import { NeoScheduler } from '../../engine/plan/neo/scheduler';

test('seeded: the same seed gives the same workload, another seed a different one', () => {
  const spec = { rate: 4, count: 50, prompt: { kind: 'uniform-10pct' as const, mean: 500 }, output: { kind: 'exponential' as const, mean: 100, min: 1, max: 2000 }, seed: 11 };
  assert.deepEqual(generateWorkload(spec), generateWorkload(spec));
  assert.notDeepEqual(generateWorkload(spec), generateWorkload({ ...spec, seed: 12 }));
  const r = seededRandom(1);
  for (let i = 0; i < 1000; i++) { const x = r(); assert.ok(x >= 0 && x < 1); }
});

test('Poisson arrivals at the rate; NEO §5.1 lengths within ±10 % of the mean', () => {
  const w = generateWorkload({ rate: 5, count: 4000, prompt: { kind: 'uniform-10pct', mean: 1000 }, output: { kind: 'fixed', tokens: 64 }, seed: 2 });
  const span = (w[w.length - 1]!.arrivalMs - w[0]!.arrivalMs) / 1e3;
  const rate = (w.length - 1) / span;
  assert.ok(Math.abs(rate - 5) < 0.3, `measured rate ${rate}`);
  for (const r of w) {
    assert.ok(r.promptTokens >= 900 && r.promptTokens <= 1100);
    assert.equal(r.outputTokens, 64);
  }
  const burst = generateWorkload({ rate: Infinity, count: 10, prompt: { kind: 'fixed', tokens: 5 }, output: { kind: 'fixed', tokens: 5 }, seed: 1 });
  assert.ok(burst.every((r) => r.arrivalMs === 0));
});

test('bad workload specs name the field', () => {
  assert.throws(() => generateWorkload({ rate: 0, count: 1, prompt: { kind: 'fixed', tokens: 1 }, output: { kind: 'fixed', tokens: 1 }, seed: 1 }), /rate must be > 0/);
  assert.throws(() => generateWorkload({ rate: 1, count: 0, prompt: { kind: 'fixed', tokens: 1 }, output: { kind: 'fixed', tokens: 1 }, seed: 1 }), /count must be an integer/);
});

const flat: OnlineCosts = {
  name: 'flat', nLayers: 2, linearMs: () => 1, gpuPrefillAttnMs: () => 0, gpuDecodeAttnMs: () => 0, cpuAttnMs: (kv) => kv / 1000,
  headMs: () => 0, kvBytesPerTokenLayer: 1, qkvoBytesPerToken: 1, pcieGBps: 1e6, gpuKvTokens: 1600, cpuKvTokens: 0, maxBatchTokens: 1000,
};

test('loop: one request alone takes one iteration per token; per-token latency as NEO §5.1 defines it', () => {
  const P = profilePredictors(flat);
  const s = new NeoScheduler('gpu-only', flat, P);
  // Each iteration: 2 layers × 1 ms linear = 2 ms; 10 tokens (prefill gives the first) = 20 ms.
  const r = runOnline([{ id: 0, arrivalMs: 0, promptTokens: 10, outputTokens: 10, generated: 0, where: 'waiting', aoLayer: 0 }], s, flat);
  assert.equal(r.iterations, 10);
  assert.equal(r.makespanMs, 20);
  assert.equal(r.perTokenLatencyMs, 2);
  assert.equal(r.throughputTokensPerS, 500);
});

test('loop: a request that fits nowhere fails with a clear message instead of hanging', () => {
  const P = profilePredictors(flat);
  const s = new NeoScheduler('gpu-only', flat, P);
  const huge = [{ id: 7, arrivalMs: 0, promptTokens: 5000, outputTokens: 4, generated: 0, where: 'waiting' as const, aoLayer: 0 }];
  assert.throws(() => runOnline(huge, s, flat), /id 7, 5000 prompt tokens.*KV capacity/);
});
