// The extension's pure helpers around plans: the status bar's split text and the what-if
// settings → planner inputs mapping (GPU presets on 'this' become 'this+GPU').
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { planRequest } from '../../engine/plan/api';
import { gpuLayerCount, splitText } from '../../extension/plan-summary';
import { isPresetModel, whatIfHardware, whatIfInputs, withFormat } from '../../extension/whatif-params';

const BASE = { model: 'llama-3.1-8b:Q4_K', hardware: 'rtx4060-laptop-8gb+ryzen9-7950x', workload: 'batch=1,prompt=8192,gen=64,vram=4G' };

test('split text: GPU layers of the plan and where the KV cache lives', () => {
  const split = planRequest({ ...BASE, policy: 'layer-split' });
  const n = split.stages.decode.layers.length;
  const gpu = gpuLayerCount(split);
  assert.ok(gpu > 0 && gpu < n);
  assert.equal(splitText(split), `GPU ${gpu}/${n} · KV GPU ${gpu}/${n}`);
  assert.equal(splitText(planRequest({ ...BASE, policy: 'cpu-only' })), 'CPU only');
  assert.equal(splitText(planRequest({ ...BASE, workload: 'batch=1,prompt=1024,gen=64', policy: 'gpu-only' })), `GPU ${n}/${n} · KV GPU`);
  assert.match(splitText(planRequest({ ...BASE, policy: 'kvpr' })), /^GPU \d+\/32 \+streamed · KV host$/);
});

test('what-if hardware: a GPU preset on this → this+GPU; on GPU+HOST the GPU is swapped', () => {
  assert.equal(whatIfHardware('this', 'rtx4060-laptop-8gb'), 'this+rtx4060-laptop-8gb');
  assert.equal(whatIfHardware('this+t4', 'rtx4090'), 'this+rtx4090');
  assert.equal(whatIfHardware('rtx4060-laptop-8gb+ryzen9-7950x', 'rtx4090'), 'rtx4090+ryzen9-7950x');
  assert.equal(whatIfHardware('ryzen9-7950x', 'rtx4090'), 'rtx4090+ryzen9-7950x');
  assert.equal(whatIfHardware('paper000', null), 'paper000');
});

test('what-if inputs: workload from the controls, the format only for preset models', () => {
  const s = { vramGiB: 6.5, prompt: 4096, gen: 32, batch: 2, format: 'Q8_0', gpu: null };
  assert.deepEqual(whatIfInputs({ ...BASE, policy: 'auto' }, s, true), { ...BASE, policy: 'auto', model: 'llama-3.1-8b:Q8_0', workload: 'batch=2,prompt=4096,gen=32,vram=6.5G' });
  assert.equal(whatIfInputs({ ...BASE, model: '/m/x.gguf', policy: 'auto' }, s, false).model, '/m/x.gguf');
  assert.equal(whatIfInputs({ ...BASE, policy: 'auto' }, { ...s, vramGiB: null }, true).workload, 'batch=2,prompt=4096,gen=32');
  assert.equal(withFormat('qwen2.5-coder-7b', 'Q4_K'), 'qwen2.5-coder-7b:Q4_K');
  assert.ok(isPresetModel('llama-3.1-8b:Q4_K'));
  assert.ok(!isPresetModel('/models/a.gguf'));
  assert.ok(!isPresetModel('a.GGUF'));
});
