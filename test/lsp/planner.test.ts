// fulcrum/plan, fulcrum/explain, fulcrum/simulate and fulcrum/profile over LSP: the server
// wires the planner's request API (engine/plan/api.ts) and the profiler
// (engine/profile/profiler.ts); these check the wiring, params and errors, not the planner.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { ErrorCodes, LSPErrorCodes } from 'vscode-languageserver-protocol';
import type { SimulateResult } from '../../engine/plan/api';
import type { Plan } from '../../engine/plan/types';
import type { ModelSummary } from '../../engine/runtime/types';
import { sharedPath } from '../helpers/shared';
import { CancellationTokenSource, LspSession, rejection } from './lsp-session';

const MODEL = sharedPath('models', 'stories260K.gguf');
const PRESET = { model: 'llama-3.1-8b:Q4_K', hardware: 'paper000', workload: 'batch=1,prompt=512,gen=64' };

describe('planner requests over LSP', () => {
  let lsp: LspSession;
  before(async () => {
    lsp = LspSession.start();
    await lsp.initialize();
  });
  after(async () => { await lsp.stop(); });

  test('fulcrum/plan returns the same plan as the planner API', async () => {
    const { planRequest } = await import('../../engine/plan/api');
    const plan = await lsp.request<Plan>('fulcrum/plan', PRESET);
    const direct = planRequest(PRESET);
    assert.equal(plan.chosenPolicy, direct.chosenPolicy);
    assert.deepEqual(plan.predicted, JSON.parse(JSON.stringify(direct.predicted)));
  });

  test('fulcrum/explain fills in the explanation', async () => {
    const plan = await lsp.request<Plan>('fulcrum/explain', PRESET);
    assert.ok(plan.explanation.summary.length > 0);
    assert.ok(Array.isArray(plan.explanation.whatIf));
  });

  test('fulcrum/simulate returns totals, and a Chrome trace on request', async () => {
    const result = await lsp.request<SimulateResult>('fulcrum/simulate', { ...PRESET, trace: true });
    assert.ok(result.simulation.totalMs > 0 && result.simulation.tokensPerSecond > 0);
    assert.ok((result.trace?.traceEvents.length ?? 0) > 0);
  });

  test('bad planner params are InvalidParams or RequestFailed with the reason', async () => {
    const noModel = await rejection(lsp.request('fulcrum/plan', { hardware: 'paper000' }));
    assert.equal(noModel.code, ErrorCodes.InvalidParams);
    assert.match(noModel.message, /params\.model is required when no model is loaded/);
    const badType = await rejection(lsp.request('fulcrum/simulate', { ...PRESET, trace: 'yes' }));
    assert.equal(badType.code, ErrorCodes.InvalidParams);
    const badPreset = await rejection(lsp.request('fulcrum/plan', { ...PRESET, hardware: 'no-such-machine' }));
    assert.equal(badPreset.code, LSPErrorCodes.RequestFailed);
    assert.match(badPreset.message, /fulcrum\/plan: unknown hardware preset 'no-such-machine'/);
  });

  test('the loaded model is the default model of a plan', { skip: existsSync(MODEL) ? false : `shared file ${MODEL} is absent` }, async () => {
    const summary = await lsp.request<ModelSummary>('fulcrum/loadModel', { path: MODEL, threads: 1 });
    const plan = await lsp.request<Plan>('fulcrum/plan', { hardware: 'paper000', workload: 'batch=1,prompt=128,gen=32' });
    assert.equal(plan.model.name, summary.name);
  });

  test('fulcrum/profile is cancellable and validates its params', async () => {
    const bad = await rejection(lsp.request('fulcrum/profile', { quick: 'yes' }));
    assert.equal(bad.code, ErrorCodes.InvalidParams);
    // Measuring takes seconds of both cores; the test only checks that a cancelled profile
    // is answered as cancelled and writes nothing.
    const source = new CancellationTokenSource();
    const pending = lsp.request('fulcrum/profile', { quick: true, refresh: true }, source);
    source.cancel();
    const err = await rejection(pending);
    assert.equal(err.code, LSPErrorCodes.RequestCancelled);
    assert.ok((await lsp.request<{ state: string }>('fulcrum/modelInfo')).state, 'still serving');
  });
});
