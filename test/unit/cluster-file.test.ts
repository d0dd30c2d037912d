// Issue 27 item 1: cluster files (`--hardware FILE.json` with hosts and a network). The example
// files in examples/clusters/ plan and export; bad files fail with errors naming the file and field.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { NETWORK_PRESETS } from '../../engine/hardware/cluster';
import { isClusterFile, readClusterFile } from '../../engine/hardware/cluster-file';
import { hardwarePreset } from '../../engine/hardware/presets';
import { exportLlamaCppCluster, exportVllmCluster } from '../../engine/plan/multihost/export';
import { clusterRequest, isClusterHardware } from '../../engine/plan/multihost/request';
import { repoRoot } from '../helpers/shared';

const EXAMPLES = path.join(repoRoot, 'examples', 'clusters');
const GiB = 1024 ** 3;
const dir = mkdtempSync(path.join(os.tmpdir(), 'fulcrum-cluster-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Writes `body` (an object, or raw text) to a file in the temp folder; returns its path. */
function file(name: string, body: unknown): string {
  const p = path.join(dir, name);
  writeFileSync(p, typeof body === 'string' ? body : JSON.stringify(body));
  return p;
}

const GOOD_HOST = { cpu: 'ryzen9-7950x', gpus: ['rtx4090'] };

test('the two-box example: two named 4090 hosts with 64 GiB each on 10 GbE, addresses kept', () => {
  const f = path.join(EXAMPLES, 'two-4090-boxes.json');
  assert.ok(isClusterFile(f) && isClusterHardware(f));
  const c = readClusterFile(f);
  assert.equal(c.name, 'two 4090 boxes');
  assert.deepEqual(c.hosts.map((h) => h.name), ['box-a (rtx4090+ryzen9-7950x)', 'box-b (rtx4090+ryzen9-7950x)']);
  assert.deepEqual(c.hosts.map((h) => h.memory.totalBytes), [64 * GiB, 64 * GiB]);
  assert.equal(c.hosts[0]!.gpu!.name, 'NVIDIA GeForce RTX 4090');
  assert.deepEqual(c.network, NETWORK_PRESETS['10gbe']);
  assert.deepEqual(c.addresses, ['10.0.0.11', '10.0.0.12']);
});

test('a cluster file plans like the same spec, and the exports use its addresses', () => {
  const f = path.join(EXAMPLES, 'two-4090-boxes.json');
  const params = { model: 'llama-3.1-70b:Q4_K', workload: 'batch=1,prompt=2048,gen=128' };
  const fromFile = clusterRequest({ ...params, hardware: f });
  const fromSpec = clusterRequest({ ...params, hardware: '2x(rtx4090+ryzen9-7950x)@10GbE' });
  assert.deepEqual(fromFile.plan.stages.map((s) => [s.firstLayer, s.endLayer]), fromSpec.plan.stages.map((s) => [s.firstLayer, s.endLayer]));
  assert.equal(fromFile.plan.stepMs, fromSpec.plan.stepMs, '64 GiB per host changes nothing for a GPU-only split');
  const llama = exportLlamaCppCluster(fromFile.plan, 'model.gguf').commands.join('\n');
  assert.match(llama, /--rpc 10\.0\.0\.12:50052 /);
  assert.match(exportVllmCluster(fromFile.plan, fromFile.model, 'model').commands[0]!, /--address=10\.0\.0\.11:6379/);
  // Without addresses (a spec) the placeholders stay.
  assert.match(exportLlamaCppCluster(fromSpec.plan, 'model.gguf').commands.join('\n'), /--rpc HOST1:50052 /);
});

test('the mixed-lab example: a measured network, a host without GPU, per-host memory', () => {
  const c = readClusterFile(path.join(EXAMPLES, 'mixed-lab.json'));
  assert.deepEqual(c.network, { name: '25 GbE, measured with iperf3', gbps: 2.9, latencyUs: 25 });
  assert.equal(c.hosts.length, 3);
  assert.equal(c.hosts[2]!.gpu, undefined);
  assert.equal(c.hosts[1]!.memory.totalBytes, 32 * GiB);
  assert.equal(c.hosts[0]!.memory.totalBytes, hardwarePreset('ryzen9-7950x').memory.totalBytes, 'no memoryGiB: the host preset\'s memory');
});

test('count repeats a host; a host can be a hardware profile file beside the cluster file', () => {
  file('box.json', hardwarePreset('rtx3060-12gb+ryzen9-7950x'));
  const c = readClusterFile(file('counted.json', { network: { preset: '25GbE' }, hosts: [{ ...GOOD_HOST, count: 2 }, { name: 'measured', profile: 'box.json' }] }));
  assert.equal(c.name, 'counted', 'no name: the file name');
  assert.equal(c.hosts.length, 3);
  assert.equal(c.hosts[2]!.name, 'measured (rtx3060-12gb+ryzen9-7950x)');
  assert.equal(c.addresses, undefined);
});

test('a single-host profile file is not a cluster file', () => {
  const single = file('single.json', hardwarePreset('paper000'));
  assert.ok(!isClusterFile(single));
  assert.ok(!isClusterHardware(single));
});

test('bad cluster files: each error names the file and the field', () => {
  const cases: [string, unknown, RegExp][] = [
    ['no-network.json', { hosts: [GOOD_HOST] }, /no-network\.json: missing field 'network'/],
    ['no-cpu.json', { network: { preset: '10GbE' }, hosts: [GOOD_HOST, { gpus: ['rtx4090'] }] }, /no-cpu\.json: hosts\[1\]: missing field 'cpu'/],
    ['no-latency.json', { network: { bandwidthGBps: 1 }, hosts: [GOOD_HOST] }, /no-latency\.json: network: missing field 'latencyUs'/],
    ['negative.json', { network: { bandwidthGBps: -1.25, latencyUs: 50 }, hosts: [GOOD_HOST] }, /negative\.json: network\.bandwidthGBps must be positive \(got -1\.25\)/],
    ['zero.json', { network: { bandwidthGBps: 0, latencyUs: 50 }, hosts: [GOOD_HOST] }, /zero\.json: network\.bandwidthGBps must be positive/],
    ['bad-gpu.json', { network: { preset: '10GbE' }, hosts: [GOOD_HOST, { cpu: 'ryzen9-7950x', gpus: ['rtx9090'] }] }, /bad-gpu\.json: hosts\[1\]\.gpus\[0\]: unknown GPU preset 'rtx9090' \(known: t4, /],
    ['bad-cpu.json', { network: { preset: '10GbE' }, hosts: [{ cpu: 'pentium' }] }, /bad-cpu\.json: hosts\[0\]\.cpu: unknown host preset 'pentium'/],
    ['bad-net.json', { network: { preset: '5GbE' }, hosts: [GOOD_HOST] }, /bad-net\.json: network\.preset: unknown network '5GbE'/],
    ['typo.json', { network: { bandwidthGbps: 1, latencyUs: 5 }, hosts: [GOOD_HOST] }, /typo\.json: unknown field 'network\.bandwidthGbps'/],
    ['two-gpus.json', { network: { preset: '10GbE' }, hosts: [{ cpu: 'ryzen9-7950x', gpus: ['rtx4090', 'rtx4090'] }] }, /two-gpus\.json: hosts\[0\]\.gpus: 2 GPUs on one host/],
    ['memory.json', { network: { preset: '10GbE' }, hosts: [{ ...GOOD_HOST, memoryGiB: -8 }] }, /memory\.json: hosts\[0\]\.memoryGiB must be positive/],
    ['count.json', { network: { preset: '10GbE' }, hosts: [{ ...GOOD_HOST, count: 2.5 }] }, /count\.json: hosts\[0\]\.count must be an integer/],
    ['count-address.json', { network: { preset: '10GbE' }, hosts: [{ ...GOOD_HOST, count: 2, address: 'a' }] }, /count-address\.json: hosts\[0\]: 'address' names one host/],
    ['no-hosts.json', { network: { preset: '10GbE' }, hosts: [] }, /no-hosts\.json: hosts must be a non-empty list/],
    ['both.json', { network: { preset: '10GbE' }, hosts: [{ ...GOOD_HOST, profile: 'x.json' }] }, /both\.json: hosts\[0\]: 'cpu' and 'profile' exclude each other/],
    ['missing-profile.json', { network: { preset: '10GbE' }, hosts: [{ profile: 'absent.json' }] }, /missing-profile\.json: hosts\[0\]\.profile 'absent\.json': ENOENT/],
  ];
  for (const [name, body, error] of cases) assert.throws(() => readClusterFile(file(name, body)), error, name);
  assert.throws(() => readClusterFile(file('broken.json', '{"hosts": [')), /broken\.json: not JSON/);
});

test('a bad cluster file reaches the plan request as the same clear error', () => {
  const f = file('plan-bad.json', { network: { bandwidthGBps: -3, latencyUs: 5 }, hosts: [GOOD_HOST] });
  assert.throws(() => clusterRequest({ model: 'llama-3.1-8b', hardware: f, workload: '' }), /plan-bad\.json: network\.bandwidthGBps must be positive \(got -3\)/);
});
