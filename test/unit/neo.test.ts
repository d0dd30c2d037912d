// NEO (paper 003) units: interpolated predictors, the T_tr stage formula, and scheduler
// invariants checked on every iteration of simulated runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LinearPredictor, geometricGrid } from '../../engine/plan/neo/interp';
import { type OnlineCosts, profilePredictors } from '../../engine/plan/neo/costs';
import { cpuHidden, stageTimes, twoBatchLayerMs } from '../../engine/plan/neo/batch';
import { NeoScheduler, type NeoVariant, type OnlineQueues } from '../../engine/plan/neo/scheduler';
import { blocksFor, contextTokens, makeRequest } from '../../engine/plan/neo/request';
import { generateWorkload } from '../../engine/plan/online/workload';
import { runOnline } from '../../engine/plan/online/loop';
import { policy as neo } from '../../engine/plan/online/neo';
import { makeContext } from '../../engine/plan/context';
import { modelPreset } from '../../engine/model/model-presets';
import { hardwarePreset } from '../../engine/hardware/presets';

test('LinearPredictor: exact at profiled points, linear between, clamped below, extrapolated above', () => {
  const p = new LinearPredictor('t', [{ x: 10, ms: 2 }, { x: 1, ms: 1 }, { x: 20, ms: 4 }]);
  assert.equal(p.at(1), 1);
  assert.equal(p.at(10), 2);
  assert.equal(p.at(5.5), 1.5);
  assert.equal(p.at(15), 3);
  assert.equal(p.at(0), 1); // below the grid: the smallest profiled time
  assert.equal(p.at(30), 6); // above: along the last segment
  assert.throws(() => new LinearPredictor('e', []), /no profiled points/);
  assert.throws(() => new LinearPredictor('n', [{ x: 1, ms: NaN }]), /point 0/);
  assert.throws(() => new LinearPredictor('d', [{ x: 1, ms: 1 }, { x: 1, ms: 2 }]), /duplicate x=1/);
  const g = geometricGrid(1, 1000, 2);
  assert.equal(g[0], 1);
  assert.equal(g[g.length - 1], 1000);
  for (let i = 1; i < g.length; i++) assert.ok(g[i]! > g[i - 1]!);
});

/** A small synthetic machine: linear ops flat up to 64 tokens, CPU attention 8× slower than GPU. */
function toyCosts(gpuKvTokens = 2000): OnlineCosts {
  return {
    name: 'toy', nLayers: 4,
    linearMs: (t) => Math.max(1, t / 64),
    gpuPrefillAttnMs: (L) => (L * L) / 1e6,
    gpuDecodeAttnMs: (kv) => kv / 50_000,
    cpuAttnMs: (kv) => kv / 6_000,
    headMs: (t) => 0.2 + t / 1000,
    kvBytesPerTokenLayer: 1024, qkvoBytesPerToken: 256, pcieGBps: 10,
    gpuKvTokens, cpuKvTokens: 200_000, maxBatchTokens: 512,
  };
}

test('T_tr per layer = max{T_l0, T_ca1} + max{T_l1 + T_ga0, T_ca0} (§3.2)', () => {
  assert.equal(twoBatchLayerMs({ tl0: 3, tga0: 1, tca0: 2.5, tl1: 1, tca1: 4 }), 4 + 2.5);
  assert.equal(twoBatchLayerMs({ tl0: 3, tga0: 1, tca0: 1, tl1: 1, tca1: 2 }), 3 + 2);
  assert.equal(cpuHidden({ tl0: 3, tga0: 1, tca0: 2, tl1: 1, tca1: 3 }), true);
  assert.equal(cpuHidden({ tl0: 3, tga0: 1, tca0: 2.1, tl1: 1, tca1: 3 }), false);
});

function checkedRun(variant: NeoVariant, costs: OnlineCosts, count: number): ReturnType<typeof runOnline> {
  const P = profilePredictors(costs);
  const limits = { nLayers: costs.nLayers, gpuKvTokens: costs.gpuKvTokens, cpuKvTokens: costs.cpuKvTokens, maxBatchTokens: costs.maxBatchTokens };
  const w = generateWorkload({ rate: 50, count, prompt: { kind: 'uniform', min: 20, max: 200 }, output: { kind: 'uniform', min: 5, max: 150 }, seed: 3 });
  const s = new NeoScheduler(variant, limits, P);
  return runOnline(w, s, costs, {
    onIteration(plan) {
      let gpuBlocks = 0;
      for (const b of plan.batches) {
        for (const r of b.gpuDecodes) gpuBlocks += blocksFor(contextTokens(r) + 1);
        for (const r of b.gpuPrefills) gpuBlocks += blocksFor(r.promptTokens + 1);
        if (variant === 'gpu-only') assert.equal(b.cpuDecodes.length + b.cpuPrefills.length, 0, 'GPU-only never uses the CPU');
        if (variant === 'offload-all') assert.equal(b.gpuDecodes.length, 0, 'full offload keeps no decode on the GPU');
        assert.ok(b.tokens <= limits.maxBatchTokens || b.gpuPrefills.length + b.cpuPrefills.length <= 1, 'activation budget');
      }
      assert.ok(gpuBlocks <= Math.floor(limits.gpuKvTokens / 16), `GPU KV over capacity: ${gpuBlocks} blocks`);
      // Step 4's invariant: a two-batch schedule keeps the CPU hidden behind the GPU (predicted),
      // unless it is the progress-guarantee iteration that only holds one CPU decode.
      if (plan.mode === 'two-batch' && plan.stages && plan.batches.length === 2) assert.ok(cpuHidden(plan.stages));
    },
  });
}

test('scheduler invariants on every iteration: GPU KV capacity, budgets, variant rules; every token produced', () => {
  const costs = toyCosts();
  for (const v of ['neo', 'gpu-only', 'offload-all'] as NeoVariant[]) {
    const r = checkedRun(v, costs, 80);
    assert.equal(r.requests, 80);
    assert.ok(r.outputTokens > 80 * 5);
    assert.ok(r.throughputTokensPerS > 0 && r.perTokenLatencyMs > 0);
    assert.equal(r.iterations, r.modes['gpu-only'] + r.modes['two-batch'] + r.modes['async-overlap']);
    if (v === 'neo') assert.ok(r.modes['two-batch'] > 0, 'NEO should pipeline when GPU KV is short');
  }
});

test('GPU-first: with ample GPU KV, NEO never offloads (equal to GPU-only)', () => {
  const costs = toyCosts(1_000_000);
  const a = checkedRun('neo', costs, 40);
  const b = checkedRun('gpu-only', costs, 40);
  assert.equal(a.modes['two-batch'], 0);
  assert.equal(a.throughputTokensPerS, b.throughputTokensPerS);
});

test('one scheduling iteration with 256 decoding requests fills GPU first and balances the CPU', () => {
  const costs = toyCosts(4000);
  const P = profilePredictors(costs);
  const s = new NeoScheduler('neo', { nLayers: 4, gpuKvTokens: 4000, cpuKvTokens: 200_000, maxBatchTokens: 512 }, P);
  const q: OnlineQueues = { waiting: [], gpu: [], cpu: [] };
  for (let i = 0; i < 256; i++) {
    const r = makeRequest(i, 0, 100, 200);
    r.generated = 50;
    if (i < 20) { r.where = 'gpu'; q.gpu.push(r); } else { r.where = 'cpu'; q.cpu.push(r); }
  }
  const plan = s.schedule(q);
  const gpu = plan.batches.reduce((n, b) => n + b.gpuDecodes.length, 0);
  const cpu = plan.batches.reduce((n, b) => n + b.cpuDecodes.length, 0);
  // CAN_SWAP_IN pulls CPU requests back while GPU KV has room (250 blocks; 10 per request).
  assert.ok(gpu >= 20 && gpu <= 24, `gpu decodes ${gpu}`);
  assert.equal(plan.swapIn.length, gpu - 20);
  assert.ok(cpu > 0 && cpu < 256 - gpu, `cpu decodes ${cpu}`);
  assert.equal(plan.skippedCpu, 256 - gpu - cpu);
  if (plan.stages) assert.ok(cpuHidden(plan.stages));
  assert.deepEqual(stageTimes(plan.batches[0]!, plan.batches[1]!, P), plan.stages);
});

test('neo policy: Plan with split attention and KV when GPU KV is short; not applicable when weights do not fit', () => {
  const ctx = makeContext(modelPreset('llama-2-7b'), hardwarePreset('apex-t4'), { batch: 32, prompt: 250, gen: 200 });
  const plan = neo.plan(ctx);
  assert.equal(plan.policy, 'neo');
  assert.ok((plan.details!.cpuRequests as number) > 0);
  assert.equal(plan.stages.decode.layers[0]!.kv.device, 'split');
  const attn = plan.stages.decode.layers[0]!.ops.find((o) => o.kind === 'scores')!;
  if (plan.details!.mode === 'two-batch') {
    assert.equal(attn.device, 'split');
    assert.equal(plan.stages.decode.subBatches?.length, 2);
  }
  for (const o of plan.stages.decode.layers[0]!.ops) if (o.kind === 'q' || o.kind === 'down') assert.equal(o.device, 'gpu');
  assert.ok(plan.predicted.tokensPerSecond > 0);
  const big = makeContext(modelPreset('llama-3.1-70b'), hardwarePreset('apex-t4'), { batch: 1, prompt: 100, gen: 10 });
  assert.match(neo.applicable(big).reason, /keeps all weights on the GPU/);
  const online = neo.plan(makeContext(modelPreset('llama-2-7b'), hardwarePreset('apex-t4'), { batch: 8, prompt: 100, gen: 50, rate: 1 }));
  assert.ok(online.predicted.online && online.predicted.online.throughputTokensPerS > 0);
});
