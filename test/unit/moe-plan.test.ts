// MoE in the planner: presets' sizes, expected distinct experts, --expert-stats parsing, the
// moe-offload policy (placement by routing frequency, memory, simulator), auto, the explanation
// and the llama.cpp export (--cpu-moe / --n-cpu-moe / -ot …_exps).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expectedDistinct, meanExpectedDistinct, parseExpertStats, withGgufExperts } from '../../engine/cost/moe';
import type { GgufFile } from '../../engine/model/gguf/types';
import { layerWork } from '../../engine/cost/ops';
import { modelPreset } from '../../engine/model/model-presets';
import { expertBytes, layerWeightBytes, modelWeightBytes } from '../../engine/model/shape';
import { explainRequest, planRequest, resolve } from '../../engine/plan/api';
import { exportLlamaCpp } from '../../engine/plan/export-llamacpp';
import { moeBudget } from '../../engine/plan/moe-offload';
import { simulatePlan } from '../../engine/plan/sim/simulate';
import { getPolicy } from '../../engine/plan/registry';
import { liaShapeOf } from '../../engine/plan/lia/terms';

const LAPTOP = 'rtx4060-laptop-8gb+ryzen9-7950x';
const WL = 'batch=1,prompt=1024,gen=64';

test('Qwen3-Coder-30B-A3B preset: 30.5 B parameters in total, 3.3 B active (the model card)', () => {
  const m = modelPreset('qwen3-coder-30b-a3b');
  assert.equal(m.moe?.nExpert, 128);
  assert.equal(m.moe?.nExpertUsed, 8);
  assert.equal(m.headDim, 128);
  const params = modelWeightBytes(m) / 2; // F16
  assert.ok(Math.abs(params - 30.5e9) / 30.5e9 < 0.02, `total ${params / 1e9} B`);
  // Active: attention + router + 8 experts per layer, embeddings and head.
  const active = (m.nLayers * (layerWeightBytes(m) - 120 * expertBytes(m)) + 2 * m.nVocab * m.nEmbd * 2) / 2;
  assert.ok(Math.abs(active - 3.3e9) / 3.3e9 < 0.05, `active ${active / 1e9} B`);
});

test('dense presets of the new families: StarCoder2 has no gate, Gemma head dim 256, Qwen3-4B tied', () => {
  const sc = layerWork(modelPreset('starcoder2-7b'), { batch: 1, newTokens: 1, context: 0 });
  assert.deepEqual(sc.filter((o) => ['gate', 'up', 'down'].includes(o.kind)).map((o) => o.name), ['Up', 'Down']);
  const g = modelPreset('codegemma-7b');
  assert.equal(g.headDim, 256);
  assert.equal(g.nHeads * g.headDim, 4096); // q dim ≠ d = 3072
  // Qwen3-8B ≈ 8.2 B parameters (model card), Phi-3-mini ≈ 3.8 B.
  for (const [key, want] of [['qwen3-8b', 8.2e9], ['phi-3-mini', 3.8e9], ['starcoder2-15b', 16e9]] as const) {
    const p = modelWeightBytes(modelPreset(key)) / 2;
    assert.ok(Math.abs(p - want) / want < 0.05, `${key}: ${p / 1e9} B`);
  }
  assert.equal(modelPreset('qwen3-4b').tiedEmbeddings, true);
  // LIA's layer model counts StarCoder2's FFN as up + down (no gate), like OPT.
  assert.equal(liaShapeOf(modelPreset('starcoder2-7b')).fc1Matrices, 1);
  assert.equal(liaShapeOf(modelPreset('qwen3-8b')).fc1Matrices, 2);
});

test('expected distinct experts: k for one token, E·(1−(1−k/E)^b) uniform, E for large batches', () => {
  const m = modelPreset('qwen3-coder-30b-a3b');
  assert.ok(Math.abs(meanExpectedDistinct(m, 1) - 8) < 1e-9);
  assert.ok(Math.abs(meanExpectedDistinct(m, 4) - 128 * (1 - Math.pow(1 - 8 / 128, 4))) < 1e-9);
  assert.ok(meanExpectedDistinct(m, 4096) > 127.99);
  // Skewed routing reads fewer distinct experts than uniform at the same batch.
  const skew = [1, 1, 1, 1, ...new Array(124).fill(4 / 124)];
  assert.ok(expectedDistinct(skew, 8) < meanExpectedDistinct(m, 8));
  // The op's bytes: one token reads 8 experts' matrices.
  const w = layerWork(modelPreset('qwen3-coder-30b-a3b:Q4_K'), { batch: 1, newTokens: 1, context: 100 }).find((o) => o.kind === 'experts')!;
  assert.ok(Math.abs(w.weightBytes - 8 * expertBytes(modelPreset('qwen3-coder-30b-a3b:Q4_K'))) < 1);
});

function statsFile(nLayers: number, counts: (layer: number) => number[], tokens: number, extra: object = {}): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'fulcrum-moe-'));
  const file = path.join(dir, 'stats.json');
  writeFileSync(file, JSON.stringify({ format: 'fulcrum-expert-stats', version: 1, nExpert: 128, nExpertUsed: 8, tokens, layers: Array.from({ length: nLayers }, (_, l) => ({ layer: l, counts: counts(l) })), ...extra }));
  return file;
}

/** Every token of every layer picks experts 0–3 and 4 of the other 124 in turn. */
function skewedCounts(tokens: number): number[] {
  const c = new Array<number>(128).fill(0);
  for (let e = 0; e < 4; e++) c[e] = tokens;
  for (let t = 0; t < tokens; t++) for (let j = 0; j < 4; j++) c[4 + ((t * 4 + j) % 124)]!++;
  return c;
}

test('--expert-stats: clear errors naming the field', () => {
  const m = modelPreset('qwen3-coder-30b-a3b');
  const good = { format: 'fulcrum-expert-stats', version: 1, nExpert: 128, nExpertUsed: 8, tokens: 124, layers: Array.from({ length: 48 }, (_, l) => ({ layer: l, counts: skewedCounts(124) })) };
  assert.equal(parseExpertStats(JSON.stringify(good), 'f.json', m).length, 48);
  assert.throws(() => parseExpertStats(JSON.stringify({ ...good, nExpert: 64 }), 'f.json', m), /f\.json: nExpert 64 does not match the model's 128/);
  assert.throws(() => parseExpertStats(JSON.stringify({ ...good, layers: good.layers.slice(1) }), 'f.json', m), /layers must list all 48 layers, got 47/);
  const badSum = structuredClone(good); badSum.layers[3]!.counts[0] = 0;
  assert.throws(() => parseExpertStats(JSON.stringify(badSum), 'f.json', m), /layers\[3\]: counts sum to .* expected nExpertUsed × tokens = 992/);
  const dup = structuredClone(good); dup.layers[5]!.layer = 4;
  assert.throws(() => parseExpertStats(JSON.stringify(dup), 'f.json', m), /layer 4 listed twice/);
  assert.throws(() => parseExpertStats('{', 'f.json', m), /f\.json: not JSON/);
  assert.throws(() => parseExpertStats(JSON.stringify(good), 'f.json', modelPreset('qwen3-8b')), /has no experts/);
});

test('moe-offload on a laptop (8 GB): attention, router and KV on the GPU, experts by VRAM left, last layers first', () => {
  const plan = planRequest({ model: 'qwen3-coder-30b-a3b:Q4_K', hardware: LAPTOP, workload: WL, policy: 'moe-offload' });
  const { ctx } = resolve({ model: 'qwen3-coder-30b-a3b:Q4_K', hardware: LAPTOP, workload: WL });
  const b = moeBudget(ctx);
  assert.ok(b.gpuExperts > 0 && b.gpuExperts < 48 * 128, `gpu experts ${b.gpuExperts}`);
  assert.ok(plan.memory.fits);
  assert.ok(plan.memory.gpuBytes <= plan.memory.gpuCapacityBytes);
  let total = 0;
  for (const l of plan.stages.decode.layers) {
    for (const o of l.ops) if (o.kind !== 'experts') assert.equal(o.device, 'gpu', `L${l.index} ${o.name}`);
    assert.equal(l.kv.device, 'gpu');
    total += l.ops.find((o) => o.kind === 'experts')!.experts!.onGpu.length;
  }
  assert.equal(total, b.gpuExperts);
  // Uniform routing: whole layers from the end, then one partial layer.
  const share = plan.stages.decode.layers.map((l) => l.ops.find((o) => o.kind === 'experts')!.experts!.gpuBytesShare);
  for (let l = 1; l < 48; l++) assert.ok(share[l]! >= share[l - 1]!, `share not rising at ${l}`);
  assert.equal(share[0], 0);
  assert.equal(share[47], 1);
  assert.match(plan.explanation.summary, /experts of layers 0–\d+ stay in host memory/);
  assert.match(plan.explanation.summary, /uniform routing/);
  // More VRAM, more experts on the GPU, faster decode.
  const big = planRequest({ model: 'qwen3-coder-30b-a3b:Q4_K', hardware: LAPTOP, workload: `${WL},vram=12G`, policy: 'moe-offload' });
  assert.ok(big.predicted.stepMs < plan.predicted.stepMs);
  // The simulator plays it: the decode step it finds is the plan's (withSimulatedPrediction).
  const sim = simulatePlan(plan, ctx, getPolicy('moe-offload'));
  assert.ok(Math.abs(sim.decodeStepMs - plan.predicted.stepMs) / plan.predicted.stepMs < 1e-6);
});

test('moe-offload with measured frequencies keeps the hot experts of every layer in VRAM', () => {
  const file = statsFile(48, () => skewedCounts(124), 124);
  const plan = planRequest({ model: 'qwen3-coder-30b-a3b:Q4_K', hardware: LAPTOP, workload: WL, policy: 'moe-offload', expertStats: file });
  for (const l of plan.stages.decode.layers) {
    const e = l.ops.find((o) => o.kind === 'experts')!.experts!;
    for (const hot of [0, 1, 2, 3]) assert.ok(e.onGpu.includes(hot), `L${l.index}: hot expert ${hot} not in VRAM`);
  }
  const uniform = planRequest({ model: 'qwen3-coder-30b-a3b:Q4_K', hardware: LAPTOP, workload: WL, policy: 'moe-offload' });
  assert.ok(plan.predicted.stepMs < uniform.predicted.stepMs, `${plan.predicted.stepMs} vs uniform ${uniform.predicted.stepMs}`);
  assert.match(plan.explanation.summary, /measured routing frequencies/);
  // llama.cpp cannot split a layer's experts: the export keeps whole layers and says so.
  const ex = exportLlamaCpp(plan);
  assert.ok(ex.unsupported.some((u) => /per-expert placement/.test(u)));
  assert.ok(ex.args.includes('--n-cpu-moe') || ex.args.some((a) => /ffn_\(up\|down\|gate\)_exps=CPU/.test(a)));
});

test('auto picks moe-offload for the MoE model on the laptop; lia refuses MoE models', () => {
  const plan = explainRequest({ model: 'qwen3-coder-30b-a3b:Q4_K', hardware: LAPTOP, workload: WL });
  assert.equal(plan.chosenPolicy, 'moe-offload');
  // The what-if of doubling VRAM counts the experts it brings into VRAM.
  assert.match(plan.explanation.whatIf.find((w) => w.change.startsWith('VRAM'))?.effect ?? '', /\+\d+ experts in VRAM/);
  const lia = getPolicy('lia').applicable(resolve({ model: 'qwen3-coder-30b-a3b:Q4_K', hardware: LAPTOP, workload: WL }).ctx);
  assert.equal(lia.ok, false);
  assert.equal(getPolicy('moe-offload').applicable(resolve({ model: 'llama-3.1-8b:Q4_K', hardware: LAPTOP, workload: WL }).ctx).ok, false);
});

test('llama.cpp export: --n-cpu-moe N for the uniform plan, --cpu-moe with no room, nothing when all fit', () => {
  const plan = planRequest({ model: 'qwen3-coder-30b-a3b:Q4_K', hardware: LAPTOP, workload: WL, policy: 'moe-offload' });
  const ex = exportLlamaCpp(plan);
  const hostLayers = plan.stages.decode.layers.filter((l) => l.ops.find((o) => o.kind === 'experts')!.experts!.onGpu.length < 128).length;
  assert.deepEqual(ex.args.slice(0, 4), ['-ngl', '49', '--n-cpu-moe', String(hostLayers)]);
  const tiny = planRequest({ model: 'qwen3-coder-30b-a3b:Q4_K', hardware: LAPTOP, workload: `${WL},vram=1500M`, policy: 'moe-offload' });
  assert.ok(exportLlamaCpp(tiny).args.includes('--cpu-moe'));
  const all = planRequest({ model: 'qwen3-coder-30b-a3b:Q4_K', hardware: 'rtx4090+ryzen9-7950x', workload: WL, policy: 'moe-offload' });
  const exAll = exportLlamaCpp(all);
  assert.ok(!exAll.args.includes('--cpu-moe') && !exAll.args.includes('--n-cpu-moe') && !exAll.args.includes('-ot'), exAll.commandLine);
});

test('GGUF MoE metadata: expert counts, expert FFN size and expert tensor formats; errors name the key', () => {
  const dense = { ...modelPreset('qwen3-4b:Q4_K'), family: 'qwen3moe' as const, nFf: 6144 };
  const kv = (entries: [string, number | string][]): GgufFile['kv'] => new Map(entries.map(([key, value]) => [key, { key, type: typeof value === 'string' ? 8 : 4, value, offset: 0 } as GgufFile['kv'] extends Map<string, infer V> ? V : never]));
  const tensor = (name: string, type: number) => ({ name, dims: [1], type, relOffset: 0, absOffset: 0, nElements: 1, byteSize: 1 }) as unknown as GgufFile['tensors'][number];
  const file: GgufFile = {
    path: 'x.gguf', version: 3, fileSize: 0, alignment: 32, dataOffset: 0,
    kv: kv([['general.architecture', 'qwen3moe'], ['qwen3moe.expert_count', 128], ['qwen3moe.expert_used_count', 8], ['qwen3moe.expert_feed_forward_length', 768]]),
    tensors: [tensor('blk.0.ffn_up_exps.weight', 14), tensor('blk.0.ffn_gate_exps.weight', 12), tensor('blk.0.ffn_down_exps.weight', 14)],
  };
  const m = withGgufExperts(dense, file);
  assert.deepEqual(m.moe, { nExpert: 128, nExpertUsed: 8, sharedFf: 0 });
  assert.equal(m.nFf, 768);
  assert.equal(m.weightFormats.ffn_up, 'Q6_K');
  assert.equal(m.weightFormats.ffn_gate, 'Q4_K');
  assert.equal(withGgufExperts(dense, { ...file, kv: kv([['general.architecture', 'qwen3']]) }), dense);
  assert.throws(() => withGgufExperts(dense, { ...file, kv: kv([['general.architecture', 'qwen3moe'], ['qwen3moe.expert_count', 128]]) }), /qwen3moe\.expert_used_count/);
});
