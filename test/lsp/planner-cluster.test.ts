// Issue 27 item 1 over LSP: fulcrum/plan, fulcrum/explain and fulcrum/simulate take a cluster
// --hardware (a spec such as 2x(rtx4090+ryzen9-7950x)@10GbE, or a cluster file) and answer with
// the pipeline plan over hosts, as the CLI does; a what-if request (supersedes: 'what-if') may
// change the hosts or the network.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { LSPErrorCodes } from 'vscode-languageserver-protocol';
import type { ClusterPlan } from '../../engine/plan/multihost/pipeline';
import type { ClusterSimulateResult } from '../../engine/plan/multihost/request';
import { repoRoot } from '../helpers/shared';
import { LspSession, rejection } from './lsp-session';

const SPEC = '2x(rtx4090+ryzen9-7950x)@10GbE';
const REQUEST = { model: 'llama-3.1-70b:Q4_K', hardware: SPEC, workload: 'batch=1,prompt=2048,gen=128' };

describe('cluster plans over LSP', () => {
  let lsp: LspSession;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fulcrum-lsp-cluster-'));
  before(async () => {
    lsp = LspSession.start();
    await lsp.initialize();
  });
  after(async () => { await lsp.stop(); rmSync(dir, { recursive: true, force: true }); });

  test('fulcrum/plan with a cluster spec returns the same pipeline plan as the planner API', async () => {
    const { clusterRequest } = await import('../../engine/plan/multihost/request');
    const plan = await lsp.request<ClusterPlan>('fulcrum/plan', REQUEST);
    const direct = clusterRequest(REQUEST).plan;
    assert.equal(plan.kind, 'cluster');
    assert.deepEqual(plan.stages.map((s) => [s.host, s.firstLayer, s.endLayer]), direct.stages.map((s) => [s.host, s.firstLayer, s.endLayer]));
    assert.equal(plan.tokensPerSecond, direct.tokensPerSecond);
    assert.equal(plan.stages[0]!.plan.explanation.whatIf.length, 0, 'a plan request leaves what-ifs out, as for one host');
  });

  test('fulcrum/plan with a cluster file (examples/clusters) plans its named hosts', async () => {
    const plan = await lsp.request<ClusterPlan>('fulcrum/plan', { ...REQUEST, hardware: path.join(repoRoot, 'examples', 'clusters', 'two-4090-boxes.json') });
    assert.equal(plan.hardware, 'two 4090 boxes');
    assert.deepEqual(plan.stages.map((s) => s.hardware), ['box-a (rtx4090+ryzen9-7950x)', 'box-b (rtx4090+ryzen9-7950x)']);
    assert.deepEqual(plan.addresses, ['10.0.0.11', '10.0.0.12']);
  });

  test('fulcrum/explain explains every host\'s plan and adds the cluster\'s what-ifs', async () => {
    const plan = await lsp.request<ClusterPlan>('fulcrum/explain', REQUEST);
    for (const s of plan.stages) {
      assert.ok(s.plan.explanation.decisions.length > 0, `host ${s.host} has its decisions`);
      assert.ok(s.plan.explanation.whatIf.length > 0, `host ${s.host} has its what-ifs`);
    }
    const changes = (plan.whatIf ?? []).map((w) => w.change);
    assert.ok(changes.includes('network 10 Gigabit Ethernet → 1 Gigabit Ethernet'), changes.join('; '));
    const fewer = plan.whatIf!.find((w) => w.change.startsWith('without the last host'))!;
    assert.ok(fewer.speedup < 0, `one 4090 host alone is slower: ${fewer.effect}`);
    const slowerNet = plan.whatIf!.find((w) => w.change.endsWith('→ 1 Gigabit Ethernet'))!;
    assert.ok(slowerNet.speedup < 0 && slowerNet.speedup > -0.05, `1 GbE costs a little per token: ${slowerNet.effect}`);
  });

  test('fulcrum/simulate plays the pipeline with a lane per host and per link', async () => {
    const r = await lsp.request<ClusterSimulateResult>('fulcrum/simulate', { ...REQUEST, trace: true });
    assert.equal(r.plan.kind, 'cluster');
    assert.ok(r.simulation.prefillMs > 0 && r.simulation.decodeStepMs > 0);
    assert.deepEqual(Object.keys(r.simulation.busy).sort(), ['host 0', 'host 1', 'link 0→1']);
    const lanes = r.trace!.traceEvents.filter((e) => e.ph === 'M').map((e) => String((e.args as { name: string }).name));
    assert.equal(lanes.length, 3, lanes.join('; '));
  });

  test('a what-if request may change the hosts and the network of a cluster', async () => {
    const plan = await lsp.request<ClusterPlan>('fulcrum/plan', { ...REQUEST, hardware: '3x(rtx4090+ryzen9-7950x)@25GbE', supersedes: 'what-if' });
    assert.equal(plan.stages.length, 3);
    assert.equal(plan.network.name, '25 Gigabit Ethernet');
  });

  test('a bad cluster file or spec is RequestFailed naming the file and the field', async () => {
    const f = path.join(dir, 'bad.json');
    writeFileSync(f, JSON.stringify({ network: { preset: '10GbE' }, hosts: [{ cpu: 'ryzen9-7950x', gpus: ['rtx9090'] }] }));
    const err = await rejection(lsp.request('fulcrum/plan', { ...REQUEST, hardware: f }));
    assert.equal(err.code, LSPErrorCodes.RequestFailed);
    assert.match(err.message, /bad\.json: hosts\[0\]\.gpus\[0\]: unknown GPU preset 'rtx9090'/);
    const spec = await rejection(lsp.request('fulcrum/explain', { ...REQUEST, hardware: '2x(rtx4090+ryzen9-7950x)@5GbE' }));
    assert.match(spec.message, /unknown network '5GbE'/);
  });
});
