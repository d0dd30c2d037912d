// APEX (paper 004) units: Algorithm 1's mode choice on constructed queues, the 8× CPU-request
// threshold, asynchronous overlap's one-layer-per-iteration progress, and the policy's Plan.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { OnlineCosts } from '../../engine/plan/neo/costs';
import { profilePredictors } from '../../engine/plan/neo/costs';
import type { OnlineQueues } from '../../engine/plan/neo/scheduler';
import { makeRequest } from '../../engine/plan/neo/request';
import { ApexScheduler } from '../../engine/plan/apex/scheduler';
import { executeIteration } from '../../engine/plan/online/execute';
import { policy as apex } from '../../engine/plan/online/apex';
import { makeContext } from '../../engine/plan/context';
import { modelPreset } from '../../engine/model/model-presets';
import { hardwarePreset } from '../../engine/hardware/presets';

/** GPU attention and linear comparable (T_gatt/T_glinear ≈ 1 at 64 GPU requests); CPU `cpuSlow`× slower. */
function costs(cpuSlow: number): OnlineCosts {
  return {
    name: 'toy', nLayers: 8,
    linearMs: (t) => Math.max(1, t / 256),
    gpuPrefillAttnMs: (L) => (L * L) / 1e6,
    gpuDecodeAttnMs: (kv) => kv / 12_800,
    cpuAttnMs: (kv) => (kv * cpuSlow) / 12_800,
    headMs: () => 0.1,
    kvBytesPerTokenLayer: 1024, qkvoBytesPerToken: 256, pcieGBps: 100,
    gpuKvTokens: 64 * 216, cpuKvTokens: 1_000_000, maxBatchTokens: 1024,
  };
}

function queues(nGpu: number, nCpu: number): OnlineQueues {
  const q: OnlineQueues = { waiting: [], gpu: [], cpu: [] };
  for (let i = 0; i < nGpu + nCpu; i++) {
    const r = makeRequest(i, 0, 150, 400);
    r.generated = 50;
    if (i < nGpu) { r.where = 'gpu'; q.gpu.push(r); } else { r.where = 'cpu'; q.cpu.push(r); }
  }
  return q;
}

function sched(cpuSlow: number, ratio?: number): { s: ApexScheduler; c: OnlineCosts } {
  const c = costs(cpuSlow);
  const limits = { nLayers: c.nLayers, gpuKvTokens: c.gpuKvTokens, cpuKvTokens: c.cpuKvTokens, maxBatchTokens: c.maxBatchTokens };
  return { s: new ApexScheduler(limits, profilePredictors(c), ratio === undefined ? {} : { cpuRequestRatio: ratio }), c };
}

test('Algorithm 1: no CPU requests → GPU-only', () => {
  const { s } = sched(20);
  const plan = s.schedule(queues(64, 0));
  assert.equal(plan.mode, 'gpu-only');
  assert.match(s.lastDecision.reason, /GPU-first/);
});

test('Algorithm 1: weak CPU (N_G/N_C ≫ RHS of (6)) with ≥ 8× CPU requests → asynchronous overlap', () => {
  const { s, c } = sched(20);
  const plan = s.schedule(queues(64, 600));
  assert.equal(plan.mode, 'async-overlap');
  assert.equal(plan.batches.length, 1, 'one unified batch');
  const r = s.lastDecision.rates!;
  assert.ok(r.gpuTokensPerMs / r.cpuTokensPerMs > 7.5);
  // AO: the CPU's layer work fits in the GPU iteration; CPU requests advance one layer, no token yet.
  const res = executeIteration(plan, c);
  assert.ok(res.aoAdvanced.length > 0);
  assert.ok(res.cpuMs <= res.ms);
  assert.equal(res.produced.filter((x) => x.where === 'cpu').length, 0);
});

test('§4.2: fewer than 8× CPU requests than GPU requests → no CPU attention this iteration', () => {
  const { s } = sched(20);
  const plan = s.schedule(queues(64, 100));
  assert.equal(plan.mode, 'gpu-only');
  assert.match(s.lastDecision.reason, /8× 64 GPU requests/);
  const { s: s1 } = sched(20, 1);
  assert.equal(s1.schedule(queues(64, 100)).mode, 'async-overlap');
});

test('Algorithm 1: strong CPU (N_G/N_C below the RHS of (6)) → asymmetric pipelining (NEO schedule)', () => {
  const { s } = sched(1.5);
  const plan = s.schedule(queues(64, 300));
  assert.match(s.lastDecision.reason, /inequality \(5\) holds/);
  assert.equal(plan.mode, 'two-batch');
});

test('apex policy: Plan carries the Eq. (6) comparison', () => {
  const ctx = makeContext(modelPreset('llama-3.1-8b'), hardwarePreset('apex-a10'), { batch: 256, prompt: 1000, gen: 400 });
  assert.equal(apex.applicable(ctx).ok, true);
  const plan = apex.plan(ctx);
  assert.equal(plan.policy, 'apex');
  const d = plan.explanation.decisions.find((x) => x.id === 'apex-mode')!;
  assert.match(d.chosen, /N_G\/N_C = [\d.]+ vs .* = [\d.]+ \(Eq\. 6\)/);
});
