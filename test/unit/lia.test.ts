// LIA (paper 002) units: policy vectors, the Eq. (4)–(9) terms on a hand-checked case, overlap,
// residency, the op→sublayer mapping and the policy's Plan.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FULL_CPU, FULL_GPU, PARTIAL_CPU, evaluatePolicy, parsePolicyVector, policyVector, searchTerms, type SublayerTerms } from '../../engine/plan/lia/cost';
import { optLayerShape } from '../../engine/plan/lia/sublayers';
import { residentLayers } from '../../engine/plan/lia/residency';
import { sublayerOfOps } from '../../engine/plan/lia/terms';
import { policy as lia } from '../../engine/plan/lia';
import { makeContext } from '../../engine/plan/context';
import { modelPreset } from '../../engine/model/model-presets';
import { hardwarePreset } from '../../engine/hardware/presets';

test('policy vectors: paper notation round-trips; bad text is rejected with the expected form', () => {
  assert.equal(policyVector(PARTIAL_CPU), '(0,1,1,0,0,0)');
  assert.equal(policyVector(FULL_CPU), '(1,1,1,1,1,1)');
  assert.equal(policyVector(FULL_GPU), '(0,0,0,0,0,0)');
  for (let p = 0; p < 64; p++) assert.equal(parsePolicyVector(policyVector(p)), p);
  assert.throws(() => parsePolicyVector('(0,1,2,0,0,0)'), /\(0,1,1,0,0,0\)/);
  assert.throws(() => parsePolicyVector('0,1'), /policy vector/);
});

// Unit terms: x = 1 ms, y = 10 ms, CPU 100 ms, GPU 1 ms, store 5 ms on every sublayer.
const unit = (): SublayerTerms[] => ['qkv', 'scores', 'weightedValues', 'outProj', 'fc1', 'fc2'].map((name, i) => ({
  name: name as SublayerTerms['name'], xMs: 1, yMs: 10, yIsWeight: i !== 1 && i !== 2, cpuMs: 100, gpuMs: 1, storeMs: i === 0 ? 5 : 0,
}));

test('Eqs. (4)–(9) with corrected polarity: decode (0,1,1,0,0,0) by hand', () => {
  const t = evaluatePolicy(unit(), 'decode', PARTIAL_CPU);
  const s = t.sublayers;
  // Sublayer 1 on GPU: weights over PCIe (5), no activation move (p0 = p6 = 0), KV stored (9).
  assert.deepEqual([s[0]!.loadX, s[0]!.loadY, s[0]!.store, s[0]!.comp], [0, 10, 5, 1]);
  // Sublayer 2 on CPU: activation moves (4); KV is already in host memory (no load).
  assert.deepEqual([s[1]!.loadX, s[1]!.loadY, s[1]!.comp], [1, 0, 100]);
  assert.deepEqual([s[2]!.loadX, s[2]!.loadY], [0, 0]);
  // Sublayer 4 back on the GPU: activation (4) and weights (5); residual from sublayer 1 is on the GPU.
  assert.deepEqual([s[3]!.loadX, s[3]!.loadY, s[3]!.loadR], [1, 10, 0]);
  assert.equal(t.serialMs, (10 + 5 + 1) + (1 + 100) + 100 + (1 + 10 + 1) + (10 + 1) + (10 + 1));
  // Overlap: 40 ms of weights prefetch on h2d (+1 ms activation to sublayer 4) while the chain
  // (compute + 2 hand-offs) runs; d2h carries sublayer 2's input and the KV store.
  assert.equal(t.lanes.h2d, 40 + 1);
  assert.equal(t.lanes.d2h, 1 + 5);
  assert.equal(t.overlappedMs, Math.max(1 + (1 + 100) + 100 + (1 + 1) + 1 + 1, 41, 6));
  assert.ok(t.overlappedMs <= t.serialMs);
});

test('Eq. (7): in prefill, K/V move only when the attention sublayer runs away from QKV', () => {
  const same = evaluatePolicy(unit(), 'prefill', FULL_GPU).sublayers[1]!;
  assert.equal(same.loadY, 0); // K from sublayer 1 on the same device
  const moved = evaluatePolicy(unit(), 'prefill', parsePolicyVector('(0,1,0,0,0,0)')).sublayers[1]!;
  assert.equal(moved.loadY, 10);
  // Eq. (6): sublayer 6 on a device other than sublayer 4 loads the residual.
  const r = evaluatePolicy(unit(), 'decode', parsePolicyVector('(0,0,0,0,0,1)')).sublayers[5]!;
  assert.equal(r.loadR, 1);
});

test('search: 64 candidates, sorted by Eq. (2); full CPU wins when the GPU side is all transfer', () => {
  const all = searchTerms(unit().map((t) => ({ ...t, cpuMs: 0.5 })), 'decode');
  assert.equal(all.length, 64);
  for (let i = 1; i < 64; i++) assert.ok(all[i - 1]!.serialMs <= all[i]!.serialMs);
  assert.equal(all[0]!.policy, FULL_CPU);
});

test('Opt-1 residency: fewer whole layers stay resident as the batch grows', () => {
  const shape = optLayerShape(7168);
  const at = (batch: number) => residentLayers({ shape, nLayers: 48, vramBytes: 38 * 2 ** 30, batch, maxContext: 288, promptTokens: 256, prefillPolicy: FULL_GPU, decodePolicy: FULL_CPU }).residentLayers;
  const ks = [1, 16, 64, 256].map(at);
  for (let i = 1; i < ks.length; i++) assert.ok(ks[i]! <= ks[i - 1]!, ks.join(','));
  assert.ok(ks[0]! > ks[3]!);
  assert.equal(residentLayers({ shape, nLayers: 4, vramBytes: 40 * 2 ** 30, batch: 1, maxContext: 64, promptTokens: 32, prefillPolicy: FULL_GPU, decodePolicy: FULL_GPU }).binding, 'all-layers-fit');
});

test('op → sublayer mapping for llama and OPT op lists', () => {
  assert.deepEqual(sublayerOfOps(['norm', 'q', 'k', 'v', 'rope', 'scores', 'softmax', 'wv', 'out', 'norm', 'gate', 'up', 'down']),
    [0, 0, 0, 0, 0, 1, 1, 2, 3, 4, 4, 4, 5]);
  assert.deepEqual(sublayerOfOps(['norm', 'q', 'k', 'v', 'scores', 'softmax', 'wv', 'out', 'norm', 'fc1', 'fc2']),
    [0, 0, 0, 0, 1, 1, 2, 3, 4, 4, 5]);
});

test('lia policy: plan for OPT-30B on SPR-A100 places streamed layers per the chosen vectors', () => {
  const ctx = makeContext(modelPreset('opt-30b:BF16'), hardwarePreset('spr-a100'), { batch: 64, prompt: 256, gen: 32 });
  assert.equal(lia.applicable(ctx).ok, true);
  assert.match(lia.applicable(ctx).reason, /AMX/);
  const plan = lia.plan(ctx);
  assert.equal(plan.policy, 'lia');
  const k = plan.details!.residentLayers as number;
  assert.ok(k > 0 && k < 48, `resident ${k}`);
  const vec = parsePolicyVector(plan.details!.decodePolicy as string);
  const layer = plan.stages.decode.layers[47]!;
  const groups = sublayerOfOps(layer.ops.map((o) => o.kind));
  layer.ops.forEach((o, j) => assert.equal(o.device, ((vec >> groups[j]!) & 1) === 1 ? 'cpu' : 'gpu', o.name));
  for (const o of plan.stages.decode.layers[0]!.ops) assert.equal(o.device, 'gpu');
  const ids = plan.explanation.decisions.map((d) => d.id);
  assert.deepEqual(ids, ['prefill-policy', 'decode-policy', 'cxl', 'layers-on-gpu']);
  assert.ok(plan.explanation.decisions[1]!.alternatives.some((a) => a.note === 'chosen'));
  assert.ok(plan.predicted.totalMs > 0 && Number.isFinite(plan.predicted.totalMs));
});
