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

test('a cluster that cannot hold the model says how many layers each host holds', () => {
  assert.throws(() => planCluster(modelPreset('llama-3.1-70b'), parseClusterSpec('2x(rtx4060-laptop-8gb+ryzen9-7950x)@1GbE'), parseWorkload('batch=64,prompt=8192')),
    /the hosts hold host 0 \d+, host 1 \d+ of 80 layers/);
});
