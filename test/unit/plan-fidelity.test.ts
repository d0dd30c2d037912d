// One number per question (issue 14 item 3) and the workload/hardware grammar (items 2, 5):
// `--policy X` and `auto` choosing X print the same figures, `simulate` too; tokens/s counts every
// request; every policy refuses a plan that does not fit in the same way, with the numbers;
// capabilities a preset lacks (GDS on GeForce) are never used; a cost table without times is an
// error; `batches=N`, `requests=N` and `this+GPU` parse and reach the planner.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseCostsJson } from '../../engine/cost/costs-file';
import { loadCachedProfile } from '../../engine/hardware/cache';
import { hardwarePreset, withGpuPreset } from '../../engine/hardware/presets';
import { modelPreset } from '../../engine/model/model-presets';
import { parseWorkload, planRequest, resolveHardware, simulateRequest } from '../../engine/plan/api';
import { makeContext } from '../../engine/plan/context';
import { PlanDoesNotFitError } from '../../engine/plan/predict';
import type { Plan } from '../../engine/plan/types';

type Evaluated = { policy: string; simulated?: { tokensPerSecond: number; stepMs: number; totalMs: number; prefillMs: number } };

function sameFigures(a: Plan['predicted'], b: Plan['predicted'], what: string): void {
  for (const k of ['layerMs', 'stepMs', 'tokensPerSecond', 'prefillMs', 'totalMs'] as const) {
    assert.ok(Math.abs(a[k] - b[k]) <= 1e-9 * Math.max(1, Math.abs(b[k])), `${what}: ${k} ${a[k]} vs ${b[k]}`);
  }
}

test('--policy X, auto choosing X, auto\'s table of alternatives and simulate print the same figures', () => {
  const cases: [string, string, string][] = [
    ['opt-30b', 'paper000', 'batch=8,prompt=512,gen=32'],
    ['llama-3.1-8b', 'rtx4060-laptop-8gb+ryzen9-7950x', 'batch=1,prompt=2048,gen=64'],
    ['llama-3.1-8b', 'g5.4xlarge', 'batch=64,prompt=1000,gen=100'],
  ];
  for (const [model, hardware, workload] of cases) {
    const auto = planRequest({ model, hardware, workload, policy: 'auto' });
    const chosen = planRequest({ model, hardware, workload, policy: auto.chosenPolicy });
    sameFigures(auto.predicted, chosen.predicted, `${hardware}: auto vs --policy ${auto.chosenPolicy}`);
    const sim = simulateRequest({ model, hardware, workload, policy: auto.chosenPolicy });
    assert.equal(sim.simulation.tokensPerSecond, chosen.predicted.tokensPerSecond);
    assert.equal(sim.simulation.decodeStepMs, chosen.predicted.stepMs);
    // Every alternative auto ranked carries the figures `--policy X` prints for it.
    for (const e of (auto.details!.evaluated as Evaluated[]).filter((x) => x.simulated)) {
      const p = planRequest({ model, hardware, workload, policy: e.policy });
      assert.ok(Math.abs(p.predicted.tokensPerSecond - e.simulated!.tokensPerSecond) < 1e-9 * p.predicted.tokensPerSecond, `${hardware} ${e.policy}`);
      assert.ok(Math.abs(p.predicted.totalMs - e.simulated!.totalMs) < 1e-9 * p.predicted.totalMs, `${hardware} ${e.policy}`);
    }
  }
});

test('tokens/s counts every request of the batch (NEO/APEX too): tokens/s = batch / step', () => {
  for (const policy of ['neo', 'apex', 'gpu-only', 'split-points']) {
    const hardware = policy === 'split-points' ? 'paper000' : 'g4dn.4xlarge';
    const model = policy === 'split-points' ? 'opt-30b' : 'llama-2-7b';
    const p = planRequest({ model, hardware, workload: 'batch=32,prompt=512,gen=128', policy });
    assert.ok(Math.abs(p.predicted.tokensPerSecond - (32 * 1000) / p.predicted.stepMs) < 1e-6, `${policy}: ${p.predicted.tokensPerSecond} vs 32 / ${p.predicted.stepMs} ms`);
    assert.ok(Math.abs(p.predicted.totalMs - (p.predicted.prefillMs + 128 * p.predicted.stepMs)) < 1e-6 * p.predicted.totalMs, policy);
  }
});

test('a plan that does not fit is refused the same way by every policy, with the numbers', () => {
  // Llama-3.1-70B in F16 (≈ 131 GiB) on a 128 GiB host with an 8 GiB GPU.
  const req = { model: 'llama-3.1-70b', hardware: 'rtx4060-laptop-8gb+ryzen9-7950x', workload: 'batch=1,prompt=1024,gen=64' };
  for (const policy of ['cpu-only', 'gpu-only', 'layer-split', 'kvpr', 'auto']) {
    assert.throws(() => planRequest({ ...req, policy }), (e: Error) => {
      assert.ok(e instanceof PlanDoesNotFitError, `${policy}: ${e.message}`);
      assert.match(e.message, /does not fit.*needs [0-9.]+ GiB .*of [0-9.]+ GiB/, `${policy}: ${e.message}`);
      return true;
    });
  }
});

test('capabilities: no GPUDirect Storage on GeForce; pinned-memory limit and PCIe lanes on presets', () => {
  const geforce = hardwarePreset('rtx4060-laptop-8gb+ryzen9-7950x');
  assert.equal(geforce.gpu!.gds, false);
  assert.ok(geforce.nvme, 'the host preset has NVMe drives');
  assert.equal(geforce.link!.pcieLanes, 8);
  assert.equal(geforce.link!.pcieGen, 4);
  const ctx = makeContext(modelPreset('opt-30b'), geforce, { batch: 8, prompt: 512, gen: 32 });
  assert.ok(ctx.cost.layerTimes(ctx.decodeStep, 'decode').ops.every((o) => o.s2d === undefined), 'no S2D times without GDS');
  for (const policy of ['auto', 'split-points']) {
    const plan = planRequest({ model: 'opt-13b', hardware: 'rtx4060-laptop-8gb+ryzen9-7950x', workload: 'batch=8,prompt=512,gen=32', policy });
    for (const l of plan.stages.decode.layers) for (const o of l.ops) assert.notEqual(o.weights, 'nvme', `${policy} uses NVMe→GPU on GeForce`);
  }
  // The paper-000 workstation GPU (RTX A4000) has GDS: the cost model gives it S2D times.
  const a4000 = makeContext(modelPreset('opt-30b'), hardwarePreset('paper000'), { batch: 8, prompt: 512, gen: 32 });
  assert.ok(a4000.cost.layerTimes(a4000.decodeStep, 'decode').ops.some((o) => (o.s2d ?? 0) > 0));
  // A page-lock limit below the streamed weights makes the plan not fit, with the numbers.
  const limited = hardwarePreset('rtx4060-laptop-8gb+ryzen9-7950x');
  limited.memory.pinnedLimitBytes = 4 * 2 ** 30;
  assert.throws(() => planRequest({ model: 'llama-3.1-8b', hardware: limited, workload: 'batch=1,prompt=1024,gen=64', policy: 'gpu-only' }),
    /pinned host memory [0-9.]+ GiB exceeds the limit 4\.00 GiB/);
});

test('a cost table with no times is an error', () => {
  assert.throws(() => parseCostsJson(JSON.stringify({ unit: 'ms', ops: [{ name: 'Q' }, { name: 'FC.0' }] }), 'c.json'), /no op has a time/);
  assert.throws(() => parseCostsJson(JSON.stringify({ unit: 'ms', ops: [{ name: 'Q', cpu: 0, gpu: 0, h2d: 1 }] }), 'c.json'), /every cpu and gpu time is 0/);
  assert.throws(() => planRequest({ model: 'opt-30b', hardware: 'paper000', workload: 'batch=50,prompt=512,gen=32', policy: 'split-points', costs: { unit: 'ms', ops: [{ name: 'Q' }] } }), /no op has a time/);
});

test('workload grammar: batches=N and requests=N; errors name the problem', () => {
  assert.deepEqual(parseWorkload('batch=50,batches=2,prompt=512,gen=32'), { batch: 50, prompt: 512, gen: 32, batches: 2 });
  assert.deepEqual(parseWorkload('batch=4,rate=2,requests=200'), { batch: 4, prompt: 1024, gen: 64, rate: 2, requests: 200 });
  const m = modelPreset('opt-30b');
  const hw = hardwarePreset('paper000');
  assert.throws(() => makeContext(m, hw, parseWorkload('batch=4,batches=8')), /batches must be an integer in \[1, batch = 4\]/);
  assert.throws(() => makeContext(m, hw, parseWorkload('batch=10,batches=4')), /does not split into 4 equal batches/);
  assert.throws(() => makeContext(m, hw, parseWorkload('batch=4,requests=10')), /requests applies to online workloads/);
  assert.throws(() => parseWorkload('batch=4,bogus=1'), /unknown key 'bogus' \(keys: batch, batches, prompt, gen, vram, rate, requests\)/);
});

test('gpu-only is NEO\'s and APEX\'s serving baseline in online simulation', () => {
  const r = simulateRequest({ model: 'llama-2-7b', hardware: 'g4dn.4xlarge', workload: 'batch=16,prompt=100,gen=32,rate=1000000,requests=16', policy: 'gpu-only' });
  assert.ok(r.simulation.online, 'gpu-only prints an online simulation');
  assert.equal(r.simulation.online.requests, 16);
  assert.ok(r.simulation.online.throughputTokensPerS > 0);
  // The plan's online figure is the same run.
  assert.equal(r.plan.predicted.online!.throughputTokensPerS, r.simulation.online.throughputTokensPerS);
});

test('this+GPU: this machine\'s CPU and memory with a GPU preset', () => {
  // Composition on any base profile (a host preset stands in for a measured one here).
  const base = hardwarePreset('ryzen9-7950x');
  const p = withGpuPreset(base, 'rtx4060-laptop-8gb');
  assert.equal(p.gpu!.name, 'NVIDIA GeForce RTX 4060 Laptop 8GB');
  assert.equal(p.link!.pcieLanes, 8);
  assert.deepEqual(p.cpu, base.cpu);
  assert.equal(p.memory.totalBytes, base.memory.totalBytes);
  assert.throws(() => withGpuPreset(base, 'nope'), /unknown GPU preset 'nope' after 'this\+' \(GPUs: /);
  const cached = loadCachedProfile();
  if (!cached) {
    console.log('# skipped the measured part: no cached profile of this machine (run `fulcrum profile`)');
    return;
  }
  const hw = resolveHardware('this+rtx4060-laptop-8gb');
  assert.equal(hw.name, 'this+rtx4060-laptop-8gb');
  assert.equal(hw.source.kind, 'measured');
  assert.deepEqual(hw.cpu, cached.cpu);
  const plan = planRequest({ model: 'deepseek-coder-1.3b', hardware: 'this+rtx4060-laptop-8gb', workload: 'batch=1,prompt=512,gen=64' });
  assert.equal(plan.hardware.name, 'this+rtx4060-laptop-8gb');
});
