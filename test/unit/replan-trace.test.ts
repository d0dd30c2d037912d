// Issue 21 item 3's leftovers: a step of more sequences than the plan's batch re-plans (like a
// context past the plan's KV does), logged with its reason, and every running request goes on
// with the tokens it would give alone; the re-plan is an instant event in the measured trace,
// between the steps it separates. Synthetic model on the loopback device (the CPU's kernels, so
// outputs are exact).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';

import { GgmlType } from '../../engine/model/ggml-types';
import { writeSyntheticModel } from '../../engine/model/synthetic';
import { Engine } from '../../engine/runtime/engine';
import { grownBatch, type ReplanEvent } from '../../engine/runtime/replan';
import { measuredChromeTrace, measuredTrace } from '../../engine/runtime/trace';
import { planHardware } from '../helpers/policy-runs';
import { tempDir } from '../helpers/shared';

const CTX = 256;
const PROMPTS = [[1, 5, 9, 13, 17, 21], [2, 4, 6, 8], [30, 31, 32, 33, 34, 35, 36, 37], [7, 7, 7]];

test('grownBatch: at least twice the planned batch, at most the engine\'s sequences, nothing when covered', () => {
  assert.deepEqual(grownBatch({ batch: 1, prompt: 24, gen: 8 }, 2, 8), { batch: 2, prompt: 24, gen: 8 });
  assert.deepEqual(grownBatch({ batch: 2, prompt: 24, gen: 8 }, 3, 8), { batch: 4, prompt: 24, gen: 8 });
  assert.deepEqual(grownBatch({ batch: 4, prompt: 24, gen: 8 }, 5, 6), { batch: 6, prompt: 24, gen: 8 });
  assert.equal(grownBatch({ batch: 4, prompt: 24, gen: 8 }, 4, 8), undefined);
});

test('measured trace: a mark becomes a global instant event in the step it precedes; parts under two placements keep their own ops', () => {
  const op = (planOp: string) => ({ kind: 'matmul', planOp, lane: 'cpu' as const, layer: 0, loc: 'host' });
  const a = [op('Q')], b = [op('K'), op('V')];
  // Step 0 under placement a (op 0), steps 1–2 under b (ops 0 and 1); ns on the trace's clock.
  const t = measuredTrace(b as never, Float64Array.from([1, 1, 3e6, 4e6, 2, 0, 5e6, 6e6]), [{ name: 're-plan', atNs: 2.5e6, args: { reason: 'r' } }], [{ ops: a as never, raw: Float64Array.from([0, 0, 1e6, 2e6]) }]);
  assert.deepEqual(t.events.map((e) => [e.step, t.ops[e.op]!.planOp, e.startMs]), [[0, 'Q', 0], [1, 'V', 2], [2, 'K', 4]]);
  assert.deepEqual(t.marks, [{ name: 're-plan', atMs: 1.5, step: 1, args: { reason: 'r' } }]);
  const json = measuredChromeTrace(t, (s) => `step ${s}`);
  const inst = json.traceEvents.filter((e) => e.ph === 'i');
  assert.deepEqual(inst.map((e) => ({ name: e.name, ts: e.ts, pid: e.pid, s: e.s, cat: e.cat })), [{ name: 're-plan', ts: 1500, pid: 2, s: 'g', cat: 'replan' }]);
});

test('a step past the plan\'s batch re-plans, logs why, shows in the trace, and every request equals itself alone', { timeout: 300_000 }, async () => {
  const { dir, cleanup } = tempDir();
  try {
    const file = path.join(dir, 'batch.gguf');
    writeSyntheticModel(file, { architecture: 'llama', nLayers: 4, nEmbd: 128, nHeads: 4, nKvHeads: 4, nFf: 256, nVocab: 320, contextLength: CTX, seed: 11, weightType: GgmlType.Q8_0 });
    // Each request alone, on the CPU.
    const cpu = await Engine.load(file, { threads: 1, contextLength: CTX, device: 'cpu' });
    const alone: number[][] = [];
    for (const p of PROMPTS) alone.push((await cpu.scheduler().submit({ prompt: p, maxTokens: 12, temperature: 0, onlyStopIds: true, stopIds: new Set() }).result).tokens);
    cpu.dispose();
    const events: ReplanEvent[] = [];
    const engine = await Engine.load(file, {
      threads: 1, contextLength: CTX, device: 'loopback', maxSequences: 4, policy: 'gpu-only', hardware: planHardware('loopback'),
      workload: { batch: 1, prompt: 32, gen: 16 }, onReplan: (e) => events.push(e),
    });
    try {
      assert.match(engine.execution.split, /GPU/);
      assert.equal(engine.execution.plan!.workload.batch, 1);
      engine.setTracing(true);
      const streams = PROMPTS.map((p) => engine.scheduler().submit({ prompt: p, maxTokens: 12, temperature: 0, onlyStopIds: true, stopIds: new Set() }));
      const got = await Promise.all(streams.map((s) => s.result));
      got.forEach((r, i) => assert.deepEqual(r.tokens, alone[i], `request ${i} differs from itself alone`));
      assert.equal(engine.execution.fallback, undefined);
      assert.ok(events.length >= 1, 'no re-plan');
      assert.deepEqual(engine.execution.replans, events);
      for (const e of events) {
        assert.equal(e.trigger, 'batch');
        assert.match(e.reason, /a step of \d sequences is past the plan's batch of \d/);
      }
      assert.ok(events[events.length - 1]!.workload.batch >= 4 || engine.execution.plan!.workload.batch >= 2);
      assert.equal(engine.execution.plan!.workload.batch, events[events.length - 1]!.workload.batch);
      console.log(`  ${events.map((e) => `${e.reason}: ${e.fromSplit} → ${e.toSplit} (batch ${e.workload.batch})`).join('; ')}`);
      // The trace: every re-plan an instant event, placed before the first step after it, and the
      // ops before and after it named by their own placement's op list.
      const t = engine.takeTrace();
      assert.equal(t.marks?.length, events.length);
      const json = measuredChromeTrace(t, (s) => `step ${s}`);
      const inst = json.traceEvents.filter((e) => e.ph === 'i');
      assert.equal(inst.length, events.length);
      for (const [k, e] of inst.entries()) {
        assert.match(e.name, /^re-plan \(batch\): /);
        assert.equal((e.args as { reason: string }).reason, events[k]!.reason);
        const stepStart = Math.min(...json.traceEvents.filter((x) => x.ph === 'X' && x.pid === e.pid).map((x) => x.ts));
        assert.ok(e.ts <= stepStart + 1e-3, `the mark at ${e.ts} µs precedes its step at ${stepStart} µs`);
      }
      for (const e of t.events) assert.ok(t.ops[e.op], 'every event names an op of its placement');
    } finally {
      engine.dispose();
    }
  } finally {
    cleanup();
  }
});

test('a context past the plan\'s KV re-plans with trigger "context", and the trace shows it between the steps', { timeout: 300_000 }, async () => {
  // As test/parity/replan.test.ts: KV large next to the weights, planned for a short workload at a
  // budget that puts the KV on the loopback device, which refuses a page hundreds of positions on.
  const { dir, cleanup } = tempDir();
  try {
    const file = path.join(dir, 'kv-heavy.gguf');
    writeSyntheticModel(file, { architecture: 'llama', nLayers: 4, nEmbd: 256, nHeads: 8, nKvHeads: 8, nFf: 256, nVocab: 512, contextLength: 1024, seed: 5, weightType: GgmlType.Q8_0 });
    const vram = 3200 * 1024;
    const events: ReplanEvent[] = [];
    const engine = await Engine.load(file, {
      threads: 1, contextLength: 1024, device: 'loopback', vramBytes: vram, policy: 'gpu-only', hardware: planHardware('loopback'),
      workload: { batch: 1, prompt: 24, gen: 8, vramBytes: vram }, onReplan: (e) => events.push(e),
    });
    try {
      engine.setTracing(true);
      const seq = Array.from({ length: 400 }, (_, i) => 1 + ((i * 37) % 500));
      await engine.logits(seq);
      assert.ok(events.length >= 1, 'no re-plan');
      assert.equal(events[0]!.trigger, 'context');
      const t = engine.takeTrace();
      const json = measuredChromeTrace(t, (s) => `step ${s}`);
      const inst = json.traceEvents.filter((e) => e.ph === 'i');
      assert.equal(inst.length, events.length);
      assert.match(inst[0]!.name, /^re-plan \(context\): .* → /);
      assert.match(String((inst[0]!.args as { reason: string }).reason), /cannot allocate .* KV cache page/);
      // Steps before the re-plan ran under the first placement's ops, those after under the new one's.
      const before = json.traceEvents.filter((e) => e.ph === 'X' && e.pid < inst[0]!.pid);
      const after = json.traceEvents.filter((e) => e.ph === 'X' && e.pid >= inst[0]!.pid);
      assert.ok(before.length > 0 && after.length > 0, 'traced steps on both sides of the re-plan');
      // A later trace does not repeat it.
      await engine.logits([...seq, 3]);
      assert.equal(engine.takeTrace().marks, undefined);
    } finally {
      engine.dispose();
    }
  } finally {
    cleanup();
  }
});
