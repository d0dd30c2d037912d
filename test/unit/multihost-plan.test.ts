// Issue 27: multi-host hardware specs and the pipeline planner over hosts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isClusterSpec, networkMs, NETWORK_PRESETS, parseClusterSpec } from '../../engine/hardware/cluster';
import { modelPreset } from '../../engine/model/model-presets';
import { parseWorkload } from '../../engine/plan/api';
import { planCluster } from '../../engine/plan/multihost/pipeline';

test('cluster spec: Nx(host)@network and comma lists', () => {
  const c = parseClusterSpec('2x(rtx4090+ryzen9-7950x)@10GbE');
  assert.equal(c.hosts.length, 2);
  assert.equal(c.hosts[0]!.gpu!.name, 'NVIDIA GeForce RTX 4090');
  assert.equal(c.network.name, '10 Gigabit Ethernet');
  const m = parseClusterSpec('(rtx4090+ryzen9-7950x),(t4+ryzen9-7950x),1x(a10+ryzen9-7950x)@25gbe');
  assert.deepEqual(m.hosts.map((h) => h.gpu!.name), ['NVIDIA GeForce RTX 4090', 'NVIDIA T4', 'NVIDIA A10']);
  assert.ok(isClusterSpec('2x(t4+ryzen9-7950x)@1GbE'));
  assert.ok(!isClusterSpec('rtx4090+ryzen9-7950x'));
});

test('cluster spec: errors name the bad part', () => {
  assert.throws(() => parseClusterSpec('2x(rtx4090+ryzen9-7950x)@5GbE'), /unknown network '5GbE'/);
  assert.throws(() => parseClusterSpec('2x(rtx9999+ryzen9-7950x)@10GbE'), /host 'rtx9999\+ryzen9-7950x'/);
  assert.throws(() => parseClusterSpec('2x(rtx4090+ryzen9-7950x@10GbE'), /unbalanced '\('/);
  assert.throws(() => parseClusterSpec('0x(rtx4090+ryzen9-7950x)@10GbE'), /host count 0/);
  assert.throws(() => parseClusterSpec('(),(t4+ryzen9-7950x)@10GbE'), /empty host part/);
});

test('network time: latency plus bytes over bandwidth', () => {
  const n = NETWORK_PRESETS['10gbe']!;
  assert.ok(Math.abs(networkMs(n, 1.125e9) - (0.05 + 1000)) < 1e-6);
});

test('two identical hosts split a 70B model evenly and charge one link', () => {
  const p = planCluster(modelPreset('llama-3.1-70b'), parseClusterSpec('2x(rtx4090+ryzen9-7950x)@10GbE'), parseWorkload(''));
  assert.equal(p.stages.length, 2);
  assert.deepEqual(p.stages.map((s) => [s.firstLayer, s.endLayer]), [[0, 40], [40, 80]]);
  assert.equal(p.activationBytes, 8192 * 2);
  assert.ok(Math.abs(p.networkMsPerToken - networkMs(NETWORK_PRESETS['10gbe']!, 16384)) < 1e-9);
  assert.ok(Math.abs(p.stepMs - (p.stages[0]!.stepMs + p.stages[1]!.stepMs + p.networkMsPerToken)) < 1e-9);
  assert.match(p.explanation.join('\n'), /layers 0–39 on host 0/);
  assert.match(p.explanation.join('\n'), /network \(10 Gigabit Ethernet\) adds 0\.0\d\d ms per token/);
});

test('a faster host gets more layers', () => {
  const p = planCluster(modelPreset('llama-3.1-70b'), parseClusterSpec('(h100-pcie+ryzen9-7950x),(t4+ryzen9-7950x)@100GbE'), parseWorkload(''));
  const n = p.stages.map((s) => s.endLayer - s.firstLayer);
  assert.equal(n[0]! + n[1]!, 80);
  assert.ok(n[0]! > n[1]!, `h100 host got ${n[0]}, t4 host ${n[1]}`);
});

test('the split minimises the predicted step: no neighbouring split of the layers is predicted faster', async () => {
  // A 4090 host and a CPU-only host: balancing stage times gave the CPU host 37 of 80 layers
  // (151 ms of a 199 ms step) although the 4090 holds 48 layers in VRAM at 0.7 ms each.
  const { planRequest } = await import('../../engine/plan/api');
  const { subModel } = await import('../../engine/plan/multihost/pipeline');
  const model = modelPreset('llama-3.1-70b:Q4_K');
  const cluster = parseClusterSpec('(rtx4090+ryzen9-7950x),(rtx3060-12gb+ryzen9-7950x),(epyc-64c)@25GbE');
  const workload = parseWorkload('batch=1,prompt=2048,gen=128');
  const p = planCluster(model, cluster, workload);
  const sizes = cluster.hosts.map((_, i) => { const s = p.stages.find((x) => x.host === i); return s ? s.endLayer - s.firstLayer : 0; });
  /** The predicted step of a split, planned exactly (stages plus one link per used host after the first). */
  const stepOf = (split: number[]): number => {
    let ms = 0; let used = 0;
    split.forEach((n, i) => {
      if (n === 0) return;
      ms += planRequest({ model: subModel(model, n), hardware: cluster.hosts[i]!, workload }).predicted.stepMs;
      used++;
    });
    return ms + (used - 1) * networkMs(cluster.network, p.activationBytes);
  };
  assert.ok(Math.abs(stepOf(sizes) - p.stepMs) < 1e-6, 'the plan\'s step is its split\'s');
  for (const shift of [1, 4, 8]) {
    for (let a = 0; a < sizes.length; a++) {
      for (let b = 0; b < sizes.length; b++) {
        if (a === b || sizes[a]! < shift) continue;
        const other = [...sizes]; other[a]! -= shift; other[b]! += shift;
        let ms: number;
        try { ms = stepOf(other); } catch { continue; } // does not fit
        // 5 %: the planner trades up to that much of the step for balanced stages.
        assert.ok(p.stepMs <= ms * 1.05, `split ${sizes.join('/')} (${p.stepMs.toFixed(1)} ms) vs ${other.join('/')} (${ms.toFixed(1)} ms)`);
      }
    }
  }
});

test('a cluster that cannot hold the model says how many layers each host holds', () => {
  assert.throws(() => planCluster(modelPreset('llama-3.1-70b'), parseClusterSpec('2x(rtx4060-laptop-8gb+ryzen9-7950x)@1GbE'), parseWorkload('batch=64,prompt=8192')),
    /the hosts hold host 0 \d+, host 1 \d+ of 80 layers/);
});

test('cluster timeline: a lane per host and per link; decode step equals the plan\'s; prefill carries the prompt\'s activations', async () => {
  const { simulateCluster } = await import('../../engine/plan/multihost/cluster-trace');
  const model = modelPreset('llama-3.1-70b');
  const p = planCluster(model, parseClusterSpec('3x(rtx4090+ryzen9-7950x)@1GbE'), parseWorkload('batch=1,prompt=2048,gen=16'));
  const sim = simulateCluster(p, model.nEmbd, 4);
  const names = sim.events.filter((e) => e.ph === 'M').map((e) => String(e.args!.name));
  assert.equal(names.filter((n) => n.startsWith('host')).length, 3);
  assert.equal(names.filter((n) => n.startsWith('link')).length, 2);
  assert.ok(Math.abs(sim.decodeStepMs - p.stepMs) < 1e-6);
  const prefillLink = sim.events.find((e) => e.ph === 'X' && e.name.startsWith('prefill activations'))!;
  assert.ok(Math.abs(prefillLink.dur! / 1000 - networkMs(NETWORK_PRESETS['1gbe']!, 2048 * model.nEmbd * 2)) < 1e-6);
  // One token passes the stages in order: spans never overlap.
  const spans = sim.events.filter((e) => e.ph === 'X').sort((a, b) => a.ts - b.ts);
  for (let i = 1; i < spans.length; i++) assert.ok(spans[i]!.ts >= spans[i - 1]!.ts + spans[i - 1]!.dur! - 1e-6);
  assert.ok(Math.abs(sim.totalMs - (sim.prefillMs + 4 * sim.decodeStepMs)) < 1e-6);
});
