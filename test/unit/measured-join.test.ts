// Issue 21 item 6, "measured means measured": measured native op times joined to the plan's ops.
// A fused kernel (one native op covering several plan ops: the op table's `covers`) stays one
// measured entry spanning them, never split by the predicted ratio; the heatmap lays it out as
// one cell across their columns and leaves the covered cells without a measured time.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { joinPlanOps } from '../../engine/runtime/trace';
import { nativeOpTable } from '../../engine/native/op-table';
import { planRequest } from '../../engine/plan/api';
import { layoutHeatmap, opBusyMs } from '../../webviews/plan/heatmap';

const TABLE = nativeOpTable().planOps;
const LLAMA = ['attn_norm', 'Q', 'K', 'V', 'RoPE', 'Scores', 'Softmax', 'WV', 'Output', 'ffn_norm', 'Gate', 'Up', 'Down'];

test('the op table\'s fused kernel: Attention covers Scores, Softmax and WV', () => {
  assert.deepEqual(TABLE.find((o) => o.name === 'Attention')!.covers, ['Scores', 'Softmax', 'WV']);
});

test('joinPlanOps: one entry per measured native op; a fused kernel spans its plan ops with its whole time', () => {
  const opMs: Record<string, number> = { attn_norm: 0.1, Q: 1, K: 0.5, V: 0.5, RoPE: 0.05, Attention: 3, Output: 1, ffn_norm: 0.1, Gate: 2, Up: 2, Down: 2 };
  const j = joinPlanOps(LLAMA, opMs, TABLE);
  assert.deepEqual(j.map((o) => o.name), ['attn_norm', 'Q', 'K', 'V', 'RoPE', 'Attention', 'Output', 'ffn_norm', 'Gate', 'Up', 'Down']);
  const att = j.find((o) => o.name === 'Attention')!;
  assert.deepEqual(att.covers, ['Scores', 'Softmax', 'WV']);
  assert.equal(att.ms, 3, 'the kernel\'s time as measured, not shares of it');
  for (const part of ['Scores', 'Softmax', 'WV']) assert.ok(!j.some((o) => o.name === part), `${part} has no time of its own`);
  for (const o of j.filter((x) => !x.covers)) assert.equal(o.ms, opMs[o.name]);
  // Paper-000 names: LN.0 / FC.0 / FC.1 are the native attn_norm / Up / Down, one to one.
  const opt = joinPlanOps(['LN.0', 'Q', 'Scores', 'Softmax', 'WV', 'FC.0', 'FC.1'], { attn_norm: 0.2, Q: 1, Attention: 4, Up: 3, Down: 3 }, TABLE);
  assert.deepEqual(opt, [
    { name: 'LN.0', ms: 0.2 }, { name: 'Q', ms: 1 }, { name: 'Attention', ms: 4, covers: ['Scores', 'Softmax', 'WV'] }, { name: 'FC.0', ms: 3 }, { name: 'FC.1', ms: 3 },
  ]);
  // A plan whose attention is one op: the kernel times that op alone (no span).
  assert.deepEqual(joinPlanOps(['Q', 'Scores'], { Q: 1, Attention: 2 }, TABLE), [{ name: 'Q', ms: 1 }, { name: 'Scores', ms: 2 }]);
  // A plan op nothing measured gets no entry rather than a zero.
  assert.deepEqual(joinPlanOps(['Q', 'Mystery'], { Q: 1 }, TABLE), [{ name: 'Q', ms: 1 }]);
});

test('the heatmap lays a fused kernel out as one measured span over its columns, compared with their summed prediction', () => {
  const plan = planRequest({ model: 'llama-3.1-8b:Q4_K', hardware: 'rtx4060-laptop-8gb+ryzen9-7950x', workload: 'batch=1,prompt=8192,gen=64,vram=4G', policy: 'auto' });
  const stage = plan.stages.decode;
  const measured = {
    source: 'test input',
    layers: stage.layers.map((l) => ({ index: l.index, ops: joinPlanOps(l.ops.map((o) => o.name), Object.fromEntries([...l.ops.map((o) => [o.name, 1]), ['Attention', 7]]), TABLE) })),
  };
  const layout = layoutHeatmap(stage, measured);
  assert.equal(layout.spans.length, stage.layers.length);
  for (const sp of layout.spans) {
    const l = stage.layers.find((x) => x.index === sp.layer)!;
    const parts = l.ops.filter((o) => ['Scores', 'Softmax', 'WV'].includes(o.name));
    assert.equal(sp.name, 'Attention');
    assert.deepEqual(sp.covers, ['Scores', 'Softmax', 'WV']);
    assert.deepEqual(sp.columns, parts.map((o) => layout.columns.indexOf(o.name)));
    assert.equal(sp.measuredMs, 7);
    assert.ok(Math.abs(sp.predictedMs - parts.reduce((s, o) => s + opBusyMs(o), 0)) < 1e-12);
    assert.equal(sp.width, 3 * layout.cellWidth);
    // The covered cells carry no measured time: nothing measured them apart.
    for (const c of layout.cells.filter((c) => c.layer === sp.layer && sp.covers.includes(c.op.name))) assert.equal(c.measuredMs, undefined);
    for (const c of layout.cells.filter((c) => c.layer === sp.layer && c.op.name === 'Q')) assert.equal(c.measuredMs, 1);
  }
});
