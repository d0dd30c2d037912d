// fulcrum/measure: a short traced run of the loaded model through the scheduler, measured per
// layer and op next to the plan of what runs (here this machine's CPU-only plan), with the
// simulated and the measured steps as Chrome traces, over a real LSP connection.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import type { MeasureResult } from '../../engine/server/protocol';
import { sharedPath, skipUnlessShared } from '../helpers/shared';
import { LspSession } from './lsp-session';

const MODEL = sharedPath('models', 'stories260K.gguf');

test('fulcrum/measure: measured per-op times beside the executed plan, and both traces', { skip: skipUnlessShared(MODEL), timeout: 300_000 }, async () => {
  const lsp = LspSession.start();
  try {
    await lsp.initialize({ modelPath: MODEL, threads: 1, device: 'cpu' });
    await lsp.waitFor(() => lsp.states.some((s) => s.state === 'ready'), 'the model to load');
    const r = await lsp.request<MeasureResult>('fulcrum/measure', { promptTokens: 32, decodeSteps: 6 });
    assert.equal(r.plan.chosenPolicy, 'cpu-only', 'the model runs on the CPU: its plan is the CPU-only one');
    assert.equal(r.measured.layers.length, r.plan.stages.decode.layers.length);
    for (const l of r.measured.layers) {
      const planned = r.plan.stages.decode.layers.find((p) => p.index === l.index)!;
      // Every plan op is measured, alone or inside the one fused kernel that covers it (Attention
      // = Scores + Softmax + WV: one measured entry, never split by the prediction).
      const names = planned.ops.map((o) => o.name);
      assert.deepEqual(l.ops.flatMap((o) => o.covers ?? [o.name]), names, 'every plan op is measured once');
      for (const o of l.ops) assert.ok(Number.isFinite(o.ms) && o.ms >= 0, `${o.name} ${o.ms}`);
      const attention = l.ops.find((o) => o.name === 'Attention');
      assert.deepEqual(attention?.covers, ['Scores', 'Softmax', 'WV']);
      assert.ok(l.ops.find((o) => o.name === 'Q')!.ms > 0 && attention!.ms > 0, 'matmuls and attention took time');
    }
    const opsMs = r.measured.layers.reduce((s, l) => s + l.ops.reduce((t, o) => t + o.ms, 0), 0) + (r.measured.headMs ?? 0);
    assert.ok(r.decodeStepMs > 0 && opsMs <= r.decodeStepMs * 1.05, `ops ${opsMs} ms within the step's ${r.decodeStepMs} ms (one lane)`);
    assert.ok(opsMs >= r.decodeStepMs * 0.5, `ops ${opsMs} ms cover most of the step's ${r.decodeStepMs} ms`);
    const measuredSpans = r.measuredTrace.traceEvents.filter((e) => e.ph === 'X');
    assert.ok(measuredSpans.length > 0 && r.predictedTrace.traceEvents.some((e) => e.ph === 'X'));
    assert.match(r.measured.source, /^runtime: \d+ decode steps after a 32-token prompt/);
    console.log(`  decode step measured ${r.decodeStepMs.toFixed(3)} ms, predicted ${r.predictedStepMs.toFixed(3)} ms; ${measuredSpans.length} measured spans`);
  } finally {
    await lsp.stop();
  }
});
