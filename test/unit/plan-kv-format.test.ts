// A GPU whose attention cannot read the KV cache's format (GpuProfile.kvFormats: the Vulkan
// shader reads F16) with a Q8_0 cache: no plan runs attention or keeps KV on the GPU. auto passes
// over the policies that would, an explicitly asked one says why, and LIA (attention on the CPU
// is its point) keeps the matmuls of as many layers as fit on the GPU with attention on the CPU.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hardwarePreset } from '../../engine/hardware/presets';
import type { HardwareProfile } from '../../engine/hardware/types';
import { modelPreset } from '../../engine/model/model-presets';
import { planRequest } from '../../engine/plan/api';
import { kvFormatConflict } from '../../engine/plan/kv-format';
import { validateProfile } from '../../engine/hardware/validate';
import type { Plan, PlanStage } from '../../engine/plan/types';

const ATTENTION = new Set(['scores', 'softmax', 'wv']);
const base = hardwarePreset('rtx4060-laptop-8gb+ryzen9-7950x');
const f16Only: HardwareProfile = { ...base, gpu: { ...base.gpu!, kvFormats: ['F16'] } };
const model = (kvFormat: string) => ({ ...modelPreset('qwen2.5-coder-1.5b'), kvFormat });
const workload = { batch: 1, prompt: 1024, gen: 64 };

function attentionOnGpu(stage: PlanStage): boolean {
  return stage.layers.some((l) => l.kv.device !== 'cpu' || l.ops.some((o) => ATTENTION.has(o.kind) && o.device !== 'cpu'));
}
function matmulsOnGpu(plan: Plan): number {
  return plan.stages.decode.layers.filter((l) => l.ops.some((o) => o.weights !== undefined && o.device === 'gpu')).length;
}

test('Q8_0 KV on a GPU that reads F16 only: auto chooses a plan with attention and KV on the CPU, and the matmuls on the GPU', () => {
  const plan = planRequest({ model: model('Q8_0'), hardware: f16Only, workload, policy: 'auto' });
  assert.equal(attentionOnGpu(plan.stages.decode), false, 'decode attention on the CPU');
  assert.equal(attentionOnGpu(plan.stages.prefill), false, 'prefill attention on the CPU');
  assert.ok(matmulsOnGpu(plan) > 0, `the GPU still runs matmuls (${plan.chosenPolicy})`);
  assert.equal(kvFormatConflict(plan, { model: model('Q8_0'), hardware: f16Only }), undefined);
  // The policies passed over say why.
  const evaluated = (plan.details as { evaluated: { policy: string; applicable: boolean; reason: string }[] }).evaluated;
  const gpuOnly = evaluated.find((e) => e.policy === 'gpu-only')!;
  assert.equal(gpuOnly.applicable, false);
  assert.match(gpuOnly.reason, /attention \(or keeps the KV\) on the GPU in layer 0 .*reads F16 KV only while this model's KV cache is Q8_0/);
  // With F16 KV the same GPU takes attention as before.
  const f16 = planRequest({ model: model('F16'), hardware: f16Only, workload, policy: 'auto' });
  assert.ok(attentionOnGpu(f16.stages.decode), `F16: attention on the GPU (${f16.chosenPolicy})`);
});

test('a policy asked for by name that runs attention on the GPU is refused, naming the layer and the formats', () => {
  for (const policy of ['gpu-only', 'layer-split', 'neo', 'apex']) {
    assert.throws(() => planRequest({ model: model('Q8_0'), hardware: f16Only, workload: { ...workload, batch: policy === 'neo' || policy === 'apex' ? 8 : 1 }, policy }),
      new RegExp(`^Error: policy ${policy} cannot run here: it runs attention \\(or keeps the KV\\) on the GPU in layer \\d+ of the (decode|prefill) stage, and the GPU's attention reads F16 KV only while this model's KV cache is Q8_0 \\(kvFormat\\); use policy lia or auto`), policy);
    // The same policy with F16 KV plans.
    assert.ok(planRequest({ model: model('F16'), hardware: f16Only, workload: { ...workload, batch: policy === 'neo' || policy === 'apex' ? 8 : 1 }, policy }).stages.decode.layers.length > 0, policy);
  }
});

test('LIA with Q8_0 KV on an F16-only GPU: resident layers keep their matmuls on the GPU, attention and KV on the host', () => {
  const plan = planRequest({ model: model('Q8_0'), hardware: f16Only, workload, policy: 'lia' });
  assert.equal(attentionOnGpu(plan.stages.decode) || attentionOnGpu(plan.stages.prefill), false);
  const withF16 = planRequest({ model: model('F16'), hardware: f16Only, workload, policy: 'lia' });
  // The 1.5B model fits the 8 GB GPU whole: with F16 every sublayer runs there; with Q8_0 the
  // weights still do, the KV moves to host memory (the plan's GPU bytes drop by the KV).
  assert.equal(matmulsOnGpu(plan), plan.stages.decode.layers.length);
  assert.ok(plan.memory.gpuBytes < withF16.memory.gpuBytes, `GPU bytes ${plan.memory.gpuBytes} < ${withF16.memory.gpuBytes}`);
  assert.ok(plan.memory.hostBytes > withF16.memory.hostBytes, 'the KV is in host memory');
  assert.ok(plan.predicted.tokensPerSecond > 0 && Number.isFinite(plan.predicted.tokensPerSecond));
  assert.match(plan.explanation.summary, /Attention runs on the CPU over host KV in every layer, resident ones too: the GPU's attention reads F16 KV only, and this model's KV cache is Q8_0/);
});

test('a GPU profile without kvFormats (presets, loopback) reads every format: plans are unchanged', () => {
  const a = planRequest({ model: model('Q8_0'), hardware: base, workload, policy: 'auto' });
  assert.ok(attentionOnGpu(a.stages.decode), `attention on the GPU as before (${a.chosenPolicy})`);
});

test('a profile\'s gpu.kvFormats is checked when read', () => {
  const json = JSON.parse(JSON.stringify(f16Only)) as Record<string, unknown> & { gpu: Record<string, unknown> };
  assert.deepEqual(validateProfile(json).gpu?.kvFormats, ['F16']);
  for (const bad of [[], 'F16', [16]]) {
    assert.throws(() => validateProfile({ ...json, gpu: { ...json.gpu, kvFormats: bad } }, 'p.json'), /^Error: p\.json: gpu\.kvFormats must be a non-empty array of KV format names/);
  }
});
