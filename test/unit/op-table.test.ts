// The op vocabulary the addon owns (engine/native/op-table.ts): every op the cost model predicts
// for the architectures Fulcrum plans is executed by one of the executor's plan ops (else its
// measured time could never join its prediction), the plan ops are the names a placement takes,
// and the device workspace the planner reserves is the addon's own figure.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { headWork, layerWork } from '../../engine/cost/ops';
import { modelPreset } from '../../engine/model/model-presets';
import { nativeOpTable } from '../../engine/native/op-table';
import { planToNative } from '../../engine/runtime/lowering';
import { deviceWorkspaceBytes } from '../../engine/runtime/devices';

const PRESETS = ['llama-3.1-8b', 'qwen2.5-coder-7b', 'qwen3-8b', 'qwen3-coder-30b-a3b', 'starcoder2-7b', 'codegemma-7b', 'gemma-3-12b', 'phi-3-mini', 'opt-6.7b'];

test('every cost-model op of every planned family runs as one native plan op', () => {
  const toNative = planToNative();
  const names = new Set(nativeOpTable().planOps.map((o) => o.name));
  for (const preset of PRESETS) {
    const shape = modelPreset(preset);
    for (const step of [{ batch: 1, newTokens: 512, context: 0 }, { batch: 4, newTokens: 1, context: 1024 }]) {
      for (const op of layerWork(shape, step)) {
        const n = toNative.get(op.name);
        assert.ok(n !== undefined, `${preset}: cost-model op '${op.name}' has no native plan op`);
        assert.ok(names.has(n), `${preset}: '${op.name}' maps to '${n}', not in the op table`);
      }
    }
    assert.equal(headWork(shape, 1).name, 'LM head');
  }
});

test('the op table: plan ops, kinds and lanes as the executor compiles them', () => {
  const t = nativeOpTable();
  assert.deepEqual(t.planOps.map((o) => o.name), ['attn_norm', 'Q', 'K', 'V', 'RoPE', 'Attention', 'Output', 'ffn_norm', 'Gate', 'Up', 'Down']);
  assert.deepEqual(t.planOps.find((o) => o.name === 'Attention')!.covers, ['Scores', 'Softmax', 'WV']);
  assert.deepEqual(t.planOps.filter((o) => o.matmul).map((o) => o.name), ['Q', 'K', 'V', 'Output', 'Gate', 'Up', 'Down']);
  assert.deepEqual(t.lanes, ['cpu', 'device', 'h2d', 'd2h']);
  for (const k of ['embed', 'rmsnorm', 'matmul', 'attention', 'moe_ffn', 'layernorm', 'gelu', 'geglu', 'logit_softcap']) assert.ok(t.opKinds.includes(k), k);
  assert.equal(t.deviceStepRows, 64);
});

test('the device workspace is the addon\'s figure: activations of a device step, logits rows, converted rows, a KV page of slack per layer', () => {
  const hp = { nLayers: 2, nEmbd: 64, nHeads: 4, nKvHeads: 2, headDim: 16, nFf: 128, nVocab: 100 };
  const rows = nativeOpTable().deviceStepRows;
  const acts = rows * (2 * 64 + 2 * 64 + 2 * 32 + 2 * 128) * 4;
  const logits = 16 * 100 * 4;
  const converted = 2 * Math.ceil(rows * 128 * 1.2);
  const slack = 2 * 2 * 64 * 32 * 2;
  assert.equal(deviceWorkspaceBytes(hp as never, 512), acts + logits + converted + slack + (256 << 10));
  // Steps of fewer rows than a device step need less.
  assert.ok(deviceWorkspaceBytes(hp as never, 8) < deviceWorkspaceBytes(hp as never, 512));
});
