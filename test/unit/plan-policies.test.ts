// Policies: applicability, placement, memory fit, auto's choice and tie rule, API parsing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { hardwarePreset } from '../../engine/hardware/presets';
import { modelPreset } from '../../engine/model/model-presets';
import { makeContext } from '../../engine/plan/context';
import { AUTO, POLICIES, getPolicy } from '../../engine/plan/registry';
import { evaluatePolicies, pickBest } from '../../engine/plan/auto';
import { fitLayers } from '../../engine/plan/layer-split';
import { evaluateCandidate, searchSplits, splitEntries } from '../../engine/plan/split-search';
import { parseBytes, parseWorkload, planRequest, resolveHardware } from '../../engine/plan/api';
import { layerWeightBytes, kvBytesPerToken } from '../../engine/model/shape';
import type { OpTimes } from '../../engine/cost/types';
import { tempDir } from '../helpers/shared';

const GiB = 2 ** 30;

test('small model on a big GPU: gpu-only, all resident; split-points and kvpr say why they do not apply', () => {
  const ctx = makeContext(modelPreset('qwen2.5-coder-1.5b'), hardwarePreset('rtx4090+ryzen9-7950x'), { batch: 1, prompt: 1024, gen: 64 });
  const plan = getPolicy('gpu-only').plan(ctx);
  assert.ok(plan.stages.decode.layers.every((l) => l.weights === 'gpu' && l.kv.device === 'gpu' && l.ops.every((o) => o.device === 'gpu')));
  assert.ok(plan.memory.fits);
  assert.match(getPolicy('split-points').applicable(ctx).reason, /fit in VRAM/);
  assert.equal(getPolicy('kvpr').applicable(ctx).ok, false);
  const auto = AUTO.plan(ctx);
  assert.equal(auto.policy, 'auto');
  assert.equal(auto.chosenPolicy, 'gpu-only'); // layer-split ties (all layers fit) → simpler wins
  assert.equal(auto.explanation.decisions[0]!.id, 'policy');
});

test('layer-split: the most layers that fit, counted from weights + KV, last layers on the GPU', () => {
  const model = modelPreset('llama-3.1-8b');
  const ctx = makeContext(model, hardwarePreset('rtx4060-laptop-8gb+ryzen9-7950x'), { batch: 1, prompt: 4096, gen: 128 });
  const fit = fitLayers(ctx);
  const per = layerWeightBytes(model) + (kvBytesPerToken(model) / model.nLayers) * (4096 + 128);
  assert.ok(fit.gpuLayers > 0 && fit.gpuLayers < model.nLayers);
  assert.ok(fit.gpuLayers * per <= ctx.vramBytes);
  assert.ok((fit.gpuLayers + 1) * per > ctx.vramBytes - 0); // one more does not fit with the workspace
  const plan = getPolicy('layer-split').plan(ctx);
  const onGpu = plan.stages.decode.layers.map((l) => l.ops[0]!.device === 'gpu');
  assert.equal(onGpu.filter(Boolean).length, fit.gpuLayers);
  assert.ok(onGpu.slice(model.nLayers - fit.gpuLayers).every(Boolean), 'llama.cpp offloads the last layers');
  assert.equal(plan.explanation.binding, 'vram-capacity');
  // A smaller VRAM budget can only lower the layer count.
  const less = fitLayers(makeContext(model, hardwarePreset('rtx4060-laptop-8gb+ryzen9-7950x'), { batch: 1, prompt: 4096, gen: 128, vramBytes: 4 * GiB }));
  assert.ok(less.gpuLayers < fit.gpuLayers);
});

test('cpu-only without a GPU; GPU policies not applicable', () => {
  const ctx = makeContext(modelPreset('deepseek-coder-1.3b'), hardwarePreset('ryzen9-7950x'), { batch: 1, prompt: 512, gen: 32 });
  for (const p of POLICIES.filter((x) => x.name !== 'cpu-only' && ['gpu-only', 'layer-split', 'split-points', 'kvpr'].includes(x.name))) {
    assert.equal(p.applicable(ctx).ok, false, p.name);
  }
  const auto = AUTO.plan(ctx);
  assert.equal(auto.chosenPolicy, 'cpu-only');
  assert.ok(auto.stages.decode.layers.every((l) => l.ops.every((o) => o.device === 'cpu')));
  assert.ok(auto.predicted.tokensPerSecond > 0);
});

test('split-points on a model bigger than VRAM: resident layers first, the rest split; beats GPU-only streaming', () => {
  const ctx = makeContext(modelPreset('opt-30b'), hardwarePreset('paper000'), { batch: 50, prompt: 512, gen: 32 });
  const sp = getPolicy('split-points').plan(ctx);
  const g = getPolicy('gpu-only').plan(ctx);
  assert.ok(sp.predicted.stepMs < g.predicted.stepMs);
  const R = sp.details!.residentLayers as number;
  assert.ok(R > 0 && R < 48);
  const streamed = sp.stages.decode.layers[R]!;
  assert.ok(streamed.ops.some((o) => o.device === 'cpu') && streamed.ops.some((o) => o.device !== 'cpu'));
  assert.ok(sp.memory.fits);
});

test('split search equals brute force over evaluateCandidate on random tables', () => {
  let seed = 7;
  const rnd = (): number => { seed = (seed * 1103515245 + 12345) % 2 ** 31; return seed / 2 ** 31; };
  for (let trial = 0; trial < 20; trial++) {
    const n = 3 + Math.floor(rnd() * 10);
    const ops: OpTimes[] = Array.from({ length: n }, (_, k) => ({ name: `op${k}`, kind: 'custom', cpu: rnd() * 10, h2d: rnd() * 10, gpu: rnd() }));
    const entries = splitEntries(ops);
    const nb = 1 + Math.floor(rnd() * 3);
    const r = searchSplits(entries, { batches: nb });
    let best = Infinity;
    for (let i = 0; i <= n; i++) for (let j = i; j <= n; j++) best = Math.min(best, evaluateCandidate(entries, i, j, [], { batches: nb }).L);
    assert.ok(Math.abs(r.best.L - best) < 1e-9, `trial ${trial}`);
  }
});

test('auto: picks the lowest simulated time, ties within 1 % to the simpler policy, records every candidate', () => {
  const ctx = makeContext(modelPreset('qwen2.5-coder-32b:Q4_K'), hardwarePreset('rtx3060-12gb+ryzen9-7950x'), { batch: 1, prompt: 4096, gen: 64 });
  const evals = evaluatePolicies(ctx, POLICIES);
  const best = pickBest(evals)!;
  for (const e of evals) if (e.applicable && Number.isFinite(e.score)) assert.ok(best.score <= e.score * 1.01 + 1e-9, e.policy.name);
  const plan = AUTO.plan(ctx);
  assert.equal(plan.chosenPolicy, best.policy.name);
  const listed = (plan.details!.evaluated as { policy: string }[]).map((e) => e.policy);
  assert.deepEqual(listed, POLICIES.map((p) => p.name));
  // Ties: an identical copy of a policy registered later never wins.
  const twin = { ...POLICIES[0]!, name: 'cpu-only' as const };
  const tieEvals = evaluatePolicies(ctx, [POLICIES[0]!, twin]);
  assert.equal(pickBest(tieEvals)!.policy, POLICIES[0]);
});

test('workload and size parsing; errors name the key', () => {
  assert.deepEqual(parseWorkload('batch=4,prompt=512,gen=32,vram=8G,rate=2.5'), { batch: 4, prompt: 512, gen: 32, vramBytes: 8 * GiB, rate: 2.5 });
  assert.equal(parseBytes('6144M', 'vram'), 6 * GiB);
  assert.throws(() => parseWorkload('batch=x'), /batch must be a non-negative integer/);
  assert.throws(() => parseWorkload('beam=2'), /unknown key 'beam'/);
  assert.throws(() => parseWorkload('vram=8Q'), /vram '8Q' is not a size/);
  assert.throws(() => planRequest({ model: 'llama-2-7b', hardware: 'paper000', workload: 'batch=0' }), /batch must be an integer in \[1/);
  // 'this' with an empty profile cache: a clear message, no guessed profile.
  const saved = process.env.XDG_CACHE_HOME;
  const { dir, cleanup } = tempDir();
  process.env.XDG_CACHE_HOME = dir;
  try { assert.throws(() => resolveHardware('this'), /run `fulcrum profile` first/); } finally {
    if (saved === undefined) delete process.env.XDG_CACHE_HOME; else process.env.XDG_CACHE_HOME = saved;
    cleanup();
  }
  assert.throws(() => planRequest({ model: 'llama-2-7b', hardware: 'paper000', workload: 'batch=1', policy: 'magic' }), /unknown policy 'magic'/);
});

test('GGUF model input plans (stories260K from ../shared)', { skip: (() => { try { readFileSync(path.resolve(__dirname, '../../../shared/models/stories260K.gguf')); return false; } catch { return 'shared/models/stories260K.gguf absent'; } })() }, () => {
  const plan = planRequest({ model: path.resolve(__dirname, '../../../shared/models/stories260K.gguf'), hardware: 'rtx4090+ryzen9-7950x', workload: 'batch=1,prompt=64,gen=16' });
  assert.equal(plan.model.nLayers, 5);
  assert.equal(plan.chosenPolicy, 'gpu-only');
});

test('plans validate against engine/plan/plan.schema.json', async (t) => {
  type AjvCtor = new (o: object) => { compile(s: object): ((d: unknown) => boolean) & { errors?: unknown } };
  let Ajv: AjvCtor;
  // ajv is present through the dev tool chain (not a direct dependency): skip when it is not.
  try { Ajv = (await import('ajv/dist/2020')).default as unknown as AjvCtor; } catch { t.skip('ajv not installed'); return; }
  const schema = JSON.parse(readFileSync(path.resolve(__dirname, '../../engine/plan/plan.schema.json'), 'utf8'));
  const validate = new Ajv({ strict: false, allErrors: true }).compile(schema);
  const cases: [string, string, string][] = [
    ['opt-30b', 'paper000', 'batch=50,prompt=512,gen=32'],
    ['llama-3.1-8b:Q4_K', 'rtx4060-laptop-8gb+ryzen9-7950x', 'batch=1,prompt=4096,gen=64'],
    ['opt-6.7b', 'kvpr-a100', 'batch=64,prompt=512,gen=32,vram=15G'],
    ['qwen3-coder-30b-a3b:Q4_K', 'rtx4060-laptop-8gb+ryzen9-7950x', 'batch=1,prompt=1024,gen=64'],
  ];
  for (const [model, hardware, workload] of cases) {
    for (const policy of ['auto', ...POLICIES.map((p) => p.name)]) {
      let plan;
      try { plan = planRequest({ model, hardware, workload, policy }); } catch (e) { assert.match((e as Error).message, /does not apply/); continue; }
      const json = JSON.parse(JSON.stringify(plan));
      assert.ok(validate(json), `${policy} ${model}: ${JSON.stringify(validate.errors)}`);
    }
  }
});

test('split search: an op with neither cpu nor h2d time is a clear error', () => {
  assert.throws(() => searchSplits(splitEntries([{ name: 'Q', kind: 'q', cpu: 1, h2d: 1 }, { name: 'X', kind: 'custom' }])), /op X has neither a cpu nor an h2d time/);
});

test('split-points reports the lossy compression variant (Eq. 8–9 on modelled 4-bit transfers) but never picks it', () => {
  const ctx = makeContext(modelPreset('opt-30b'), hardwarePreset('paper000'), { batch: 50, prompt: 512, gen: 32 });
  const plan = getPolicy('split-points').plan(ctx);
  const alt = plan.explanation.decisions[0]!.alternatives.find((a) => a.label.includes('compressed'));
  assert.ok(alt, 'compressed variant listed');
  assert.ok(alt.predictedMs < plan.predicted.layerMs * 2);
  assert.doesNotMatch(String(plan.details!.variant), /compressed/);
  // Already-quantised weights get no compression variant (they stream compressed already).
  const q = getPolicy('split-points').plan(makeContext(modelPreset('opt-30b:Q4_0'), hardwarePreset('paper000'), { batch: 50, prompt: 512, gen: 32, vramBytes: 8 * GiB }));
  assert.ok(!q.explanation.decisions[0]!.alternatives.some((a) => a.label.includes('compressed')));
});

test("--hardware this loads the profiler's cached measured profile", async (t) => {
  const { currentFingerprint } = await import('../../engine/hardware/machine');
  const { writeCachedProfile } = await import('../../engine/hardware/cache');
  let fp: string;
  try { fp = currentFingerprint().fingerprint; } catch (e) { t.skip(`no machine fingerprint (native addon not built?): ${(e as Error).message}`); return; }
  const saved = process.env.XDG_CACHE_HOME;
  const { dir, cleanup } = tempDir();
  process.env.XDG_CACHE_HOME = dir;
  try {
    const p = hardwarePreset('ryzen9-7950x');
    p.name = 'this machine';
    p.source = { kind: 'measured', citation: 'test', fingerprint: fp };
    writeCachedProfile(p);
    const loaded = resolveHardware('this');
    assert.equal(loaded.name, 'this machine');
    assert.equal(loaded.source.kind, 'measured');
    const plan = planRequest({ model: 'qwen2.5-coder-1.5b:Q4_K', hardware: 'this', workload: 'batch=1,prompt=512,gen=32' });
    assert.equal(plan.hardware.source, 'measured');
  } finally {
    if (saved === undefined) delete process.env.XDG_CACHE_HOME; else process.env.XDG_CACHE_HOME = saved;
    cleanup();
  }
});
