// Explanations: the binding resource follows the busiest lane; what-ifs re-plan with one change
// and report its predicted effect.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { explainRequest, planRequest } from '../../engine/plan/api';
import { busiestLane } from '../../engine/plan/binding';

test('binding resource: PCIe for streamed GPU-only, VRAM capacity for layer-split, memory bandwidth when resident', () => {
  const streamed = planRequest({ model: 'opt-30b', hardware: 'paper000', workload: 'batch=50,prompt=512,gen=32', policy: 'gpu-only' });
  assert.equal(streamed.explanation.decisions[0]!.binding, 'vram-capacity');
  assert.equal(busiestLane(streamed.predicted.perLane), 'h2d');
  const split = planRequest({ model: 'llama-3.1-8b', hardware: 'rtx4060-laptop-8gb+ryzen9-7950x', workload: 'batch=1,prompt=4096,gen=64', policy: 'layer-split' });
  assert.equal(split.explanation.binding, 'vram-capacity');
  const resident = planRequest({ model: 'qwen2.5-coder-7b:Q4_K', hardware: 'rtx4090+ryzen9-7950x', workload: 'batch=1,prompt=1024,gen=64', policy: 'gpu-only' });
  assert.equal(resident.explanation.binding, 'gpu-memory-bandwidth');
  const cpu = planRequest({ model: 'qwen2.5-coder-7b:Q4_K', hardware: 'ryzen9-7950x', workload: 'batch=1,prompt=1024,gen=64', policy: 'cpu-only' });
  assert.equal(cpu.explanation.binding, 'cpu-memory-bandwidth');
});

test('what-ifs: more VRAM puts more layers on the GPU and speeds up a capacity-bound plan', () => {
  const plan = explainRequest({ model: 'llama-3.1-8b', hardware: 'rtx4060-laptop-8gb+ryzen9-7950x', workload: 'batch=1,prompt=4096,gen=64', policy: 'layer-split' });
  const vram = plan.explanation.whatIf.find((w) => w.change.startsWith('VRAM'));
  assert.ok(vram, JSON.stringify(plan.explanation.whatIf));
  assert.ok(vram.speedup > 0.1);
  assert.match(vram.effect, /\+\d+ layers resident on GPU/);
  const q = plan.explanation.whatIf.find((w) => w.change.startsWith('weights F16 → Q8_0'));
  assert.ok(q && q.speedup > 0);
  // Sorted best first; every listed change moves the prediction by ≥ 1 %.
  for (let i = 1; i < plan.explanation.whatIf.length; i++) assert.ok(plan.explanation.whatIf[i - 1]!.speedup >= plan.explanation.whatIf[i]!.speedup);
  assert.ok(plan.explanation.whatIf.every((w) => Math.abs(w.speedup) >= 0.01));
  // Decisions carry alternatives with predicted costs.
  const d = plan.explanation.decisions.find((x) => x.id === 'layers-on-gpu')!;
  assert.ok(d.alternatives.length >= 2 && d.alternatives.some((a) => a.note === 'chosen'));
});

test('auto explanation lists every policy with its simulated time or why it did not apply', () => {
  const plan = explainRequest({ model: 'opt-30b', hardware: 'paper000', workload: 'batch=50,prompt=512,gen=32' });
  const d = plan.explanation.decisions[0]!;
  assert.equal(d.id, 'policy');
  assert.equal(d.chosen, plan.chosenPolicy);
  assert.ok(d.alternatives.length >= 5);
  assert.ok(d.alternatives.filter((a) => a.note === 'chosen').length === 1);
});
