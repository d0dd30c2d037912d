// Simulator: lanes are FIFO, dependencies and hand-off delays hold, overlap gives max(CPU, H2D),
// multi-batch reuses weights, and the Chrome trace is well formed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { simulateTasks } from '../../engine/plan/sim/engine';
import { toChromeTrace } from '../../engine/plan/sim/trace';
import { stageTasks } from '../../engine/plan/sim/graph';
import type { SimTask } from '../../engine/plan/sim-types';
import { hardwarePreset } from '../../engine/hardware/presets';
import { modelPreset } from '../../engine/model/model-presets';
import { makeContext } from '../../engine/plan/context';
import { getPolicy } from '../../engine/plan/registry';
import { simulateRequest } from '../../engine/plan/api';

const task = (id: number, lane: SimTask['lane'], durationMs: number, deps: number[] = [], delayMs?: number): SimTask =>
  ({ id, lane, name: `t${id}`, durationMs, deps, stage: 'decode', ...(delayMs ? { delayMs } : {}) });

test('lanes run one task at a time in order; dependencies and delays are respected', () => {
  const r = simulateTasks([task(0, 'h2d', 5), task(1, 'cpu', 3), task(2, 'gpu', 2, [0]), task(3, 'cpu', 1, [2], 0.5), task(4, 'h2d', 4)]);
  const at = (id: number) => r.events.find((e) => e.task === id)!;
  assert.deepEqual([at(0).startMs, at(0).endMs], [0, 5]);
  assert.deepEqual([at(1).startMs, at(1).endMs], [0, 3]);
  assert.deepEqual([at(2).startMs, at(2).endMs], [5, 7]);
  assert.deepEqual([at(3).startMs, at(3).endMs], [7.5, 8.5]); // after t2 + 0.5 delay (CPU free at 3)
  assert.deepEqual([at(4).startMs, at(4).endMs], [5, 9]); // FIFO behind t0
  assert.equal(r.totalMs, 9);
  assert.equal(r.busy.cpu, 4);
  assert.equal(r.bottleneck, 'h2d');
  assert.throws(() => simulateTasks([task(1, 'cpu', 1), task(0, 'cpu', 1)]), /ids must increase/);
  assert.throws(() => simulateTasks([task(0, 'cpu', 1, [5])]), /depends on 5/);
  assert.throws(() => simulateTasks([task(0, 'cpu', NaN)]), /duration NaN/);
});

test('streamed layers overlap: a split layer takes ≈ max(CPU, H2D) per layer in steady state', () => {
  const ctx = makeContext(modelPreset('opt-30b'), hardwarePreset('paper000'), { batch: 50, prompt: 512, gen: 32 });
  const plan = getPolicy('split-points').plan(ctx);
  const R = plan.details!.residentLayers as number;
  const L = (plan.details!.split as { L: number }).L;
  const r = simulateTasks(stageTasks(ctx, plan.stages.decode));
  // The streamed layers' span per layer is ≥ L (the equations omit GPU time and hand-offs) and
  // well below the serial sum CPU + H2D.
  const ev = r.events.filter((e) => e.layer !== undefined && e.layer >= R + 2);
  const span = (Math.max(...ev.map((e) => e.endMs)) - Math.min(...ev.map((e) => e.startMs))) / (48 - R - 2);
  const t = plan.details!.split as { terms: { cpu: number; h2d: number } };
  assert.ok(span >= L * 0.98, `${span} vs L ${L}`);
  assert.ok(span < (t.terms.cpu + t.terms.h2d) * 0.8, `${span} vs serial ${t.terms.cpu + t.terms.h2d}`);
});

test('multi-batch: weights are transferred once per layer, KV once per sub-batch', () => {
  const ctx = makeContext(modelPreset('opt-30b'), hardwarePreset('paper000'), { batch: 64, prompt: 512, gen: 32 });
  const plan = getPolicy('gpu-only').plan(ctx);
  const stage = structuredClone(plan.stages.decode);
  stage.subBatches = [{ id: 0, size: 32, role: 'a' }, { id: 1, size: 32, role: 'b' }];
  const tasks = stageTasks(ctx, stage);
  const last = stage.layers.length - 1;
  const w = tasks.filter((t) => t.layer === last && t.category === 'weights');
  const kv = tasks.filter((t) => t.layer === last && t.category === 'kv' && t.lane === 'h2d');
  const weightOps = stage.layers[last]!.ops.filter((o) => (o.predictedMs.h2d ?? 0) > (o.predictedMs.h2dKv ?? 0));
  const kvOps = stage.layers[last]!.ops.filter((o) => (o.predictedMs.h2dKv ?? 0) > 0);
  assert.equal(w.length, weightOps.length);
  assert.equal(kv.length, 2 * kvOps.length);
  assert.equal(tasks.filter((t) => t.layer === last && t.category === 'compute').length, 2 * stage.layers[last]!.ops.length);
});

test('Chrome trace: metadata names lanes, complete events in µs, loads as JSON', () => {
  const r = simulateRequest({ model: 'llama-3.1-8b:Q4_K', hardware: 'rtx4060-laptop-8gb+ryzen9-7950x', workload: 'batch=1,prompt=8192,gen=64', policy: 'layer-split', trace: true });
  const tr = JSON.parse(JSON.stringify(r.trace));
  assert.equal(tr.displayTimeUnit, 'ms');
  const meta = tr.traceEvents.filter((e: { ph: string }) => e.ph === 'M');
  assert.ok(meta.some((e: { args: { name: string } }) => e.args.name === 'GPU'));
  const x = tr.traceEvents.filter((e: { ph: string }) => e.ph === 'X');
  assert.ok(x.length > 100);
  for (const e of x) assert.ok(e.ts >= 0 && e.dur > 0 && Number.isInteger(e.pid) && Number.isInteger(e.tid));
  const decodeEnd = Math.max(...x.filter((e: { pid: number }) => e.pid === 2).map((e: { ts: number; dur: number }) => e.ts + e.dur));
  assert.ok(Math.abs(decodeEnd / 1000 - r.simulation.decodeStepMs) < 1e-3);
  assert.ok(toChromeTrace([]).traceEvents.length === 0);
});
