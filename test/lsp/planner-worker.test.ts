// The planner runs on a worker thread of the engine: other requests are answered while it plans,
// $/cancelRequest stops a planning job, a newer what-if request (supersedes: 'what-if') cancels the
// older one, and the what-if helpers (fulcrum/presets, fulcrum/exportPlan) answer.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { LSPErrorCodes } from 'vscode-languageserver-protocol';
import { planRequest } from '../../engine/plan/api';
import type { Plan } from '../../engine/plan/types';
import type { LlamaCppExport, ModelInfo, PresetsResult } from '../../engine/server/protocol';
import { CancellationTokenSource, LspSession, rejection } from './lsp-session';

// An 80-layer model on a paper machine: an explain (several full re-plans) takes a while.
const SLOW = { model: 'llama-3.1-70b:Q4_K', hardware: 'paper000', workload: 'batch=1,prompt=4096,gen=64' };
const FAST = { model: 'llama-3.1-8b:Q4_K', hardware: 'rtx4060-laptop-8gb+ryzen9-7950x', workload: 'batch=1,prompt=8192,gen=64,vram=4G' };

describe('planner worker thread', () => {
  let lsp: LspSession;
  before(async () => {
    lsp = LspSession.start();
    await lsp.initialize();
    await lsp.request<Plan>('fulcrum/plan', FAST); // starts the worker
  });
  after(async () => { await lsp.stop(); });

  test('other requests are answered while a plan is being computed', async () => {
    const t0 = performance.now();
    let explainDone = 0;
    const explain = lsp.request<Plan>('fulcrum/explain', SLOW).then((p) => { explainDone = performance.now() - t0; return p; });
    await new Promise((r) => setTimeout(r, 20));
    const info = await lsp.request<ModelInfo>('fulcrum/modelInfo');
    const infoDone = performance.now() - t0;
    const plan = await explain;
    assert.equal(info.state, 'no-model');
    assert.ok(plan.explanation.whatIf.length > 0);
    console.log(`explain of ${SLOW.model}: ${explainDone.toFixed(0)} ms; fulcrum/modelInfo meanwhile answered after ${infoDone.toFixed(0)} ms`);
    assert.ok(infoDone < explainDone, `modelInfo (${infoDone.toFixed(0)} ms) waited for the explain (${explainDone.toFixed(0)} ms)`);
  });

  test('a newer what-if request cancels the older one; the newer one is answered', async () => {
    const older = lsp.request<Plan>('fulcrum/explain', { ...SLOW, supersedes: 'what-if' });
    const newer = lsp.request<Plan>('fulcrum/explain', { ...FAST, supersedes: 'what-if' });
    const err = await rejection(older);
    assert.equal(err.code, LSPErrorCodes.RequestCancelled);
    assert.match(err.message, /superseded/);
    const plan = await newer;
    assert.equal(plan.model.name, 'Llama-3.1-8B (Q4_K)');
  });

  test('$/cancelRequest stops a running plan, and the next one still works', async () => {
    const source = new CancellationTokenSource();
    const running = lsp.request<Plan>('fulcrum/explain', SLOW, source);
    await new Promise((r) => setTimeout(r, 30));
    source.cancel();
    const err = await rejection(running);
    assert.equal(err.code, LSPErrorCodes.RequestCancelled);
    const plan = await lsp.request<Plan>('fulcrum/plan', FAST);
    // The worker answers what the planner API answers in-process.
    assert.equal(plan.chosenPolicy, planRequest(FAST).chosenPolicy);
  });

  test('fulcrum/presets lists GPU presets; fulcrum/exportPlan gives llama.cpp flags; bad params are named', async () => {
    const presets = await lsp.request<PresetsResult>('fulcrum/presets');
    assert.ok(presets.gpus.some((g) => g.key === 'rtx4060-laptop-8gb' && g.memoryBytes === 8 * 2 ** 30));
    const plan = await lsp.request<Plan>('fulcrum/plan', { ...FAST, policy: 'layer-split' });
    const exported = await lsp.request<LlamaCppExport>('fulcrum/exportPlan', { plan, format: 'llama.cpp' });
    assert.match(exported.commandLine, /^-ngl \d+ -c 8256$/);
    const bad = await rejection(lsp.request('fulcrum/exportPlan', { plan, format: 'vllm' }));
    assert.match(bad.message, /params.format must be 'llama.cpp'/);
    const badGroup = await rejection(lsp.request('fulcrum/plan', { ...FAST, supersedes: 3 }));
    assert.match(badGroup.message, /params.supersedes must be a non-empty string/);
  });
});
