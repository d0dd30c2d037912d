// Re-planning (issue 21 item 3): a request that grows past the KV the plan's placement holds gets
// a new plan for the longer context instead of a fallback to the CPU, and goes on with the same
// output. A synthetic model whose KV is large next to its weights (8 KV heads of 32, 4 layers),
// planned for a short workload (prompt 24, gen 8) at budgets that put its KV on the loopback
// device: the device refuses a KV page hundreds of positions later, the engine re-plans (with
// the same policy, or auto where that policy has no plan for the longer context) and rebuilds
// the KV under the new placement. Logits equal the CPU's bit for bit at every prefix (the
// loopback runs the CPU's kernels), the decision is recorded with its reason.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';

import { GgmlType } from '../../engine/model/ggml-types';
import { writeSyntheticModel } from '../../engine/model/synthetic';
import { Engine } from '../../engine/runtime/engine';
import type { ReplanEvent } from '../../engine/runtime/replan';
import { grownWorkload } from '../../engine/runtime/replan';
import { planHardware } from '../helpers/policy-runs';
import { tempDir } from '../helpers/shared';

const CTX = 1024;
const SEQ = Array.from({ length: 700 }, (_, i) => 1 + ((i * 37) % 500));
const PREFIXES = Array.from({ length: 24 }, (_, i) => 10 + 30 * i);

async function logitsAtPrefixes(e: Engine): Promise<Float32Array[]> {
  const out: Float32Array[] = [];
  for (const n of PREFIXES) out.push(await e.logits(SEQ.slice(0, n)));
  return out;
}

test('grown workloads double the planned context, cover what is held, stop at the context length', () => {
  assert.deepEqual(grownWorkload({ batch: 1, prompt: 24, gen: 8 }, 300, 1024), { batch: 1, prompt: 356, gen: 8 });
  assert.deepEqual(grownWorkload({ batch: 1, prompt: 24, gen: 8 }, 10, 1024), { batch: 1, prompt: 66, gen: 8 });
  assert.deepEqual(grownWorkload({ batch: 1, prompt: 1000, gen: 24 }, 1000, 1024), undefined);
});

test('a request that outgrows the plan\'s KV re-plans and continues with the CPU\'s logits', { timeout: 600_000 }, async () => {
  const { dir, cleanup } = tempDir();
  try {
    const file = path.join(dir, 'kv-heavy.gguf');
    writeSyntheticModel(file, { architecture: 'llama', nLayers: 4, nEmbd: 256, nHeads: 8, nKvHeads: 8, nFf: 256, nVocab: 512, contextLength: CTX, seed: 5, weightType: GgmlType.Q8_0 });
    const cpu = await Engine.load(file, { threads: 1, contextLength: CTX, device: 'cpu' });
    const want = await logitsAtPrefixes(cpu);
    cpu.dispose();
    let onDevice = 0;
    for (const [policy, kib] of [['gpu-only', 3200], ['layer-split', 3600], ['split-points', 2400]] as const) {
      const vram = kib * 1024;
      const events: ReplanEvent[] = [];
      const engine = await Engine.load(file, {
        threads: 1, contextLength: CTX, device: 'loopback', vramBytes: vram, policy, hardware: planHardware('loopback'),
        workload: { batch: 1, prompt: 24, gen: 8, vramBytes: vram }, onReplan: (e) => events.push(e),
      });
      try {
        const before = engine.execution.split;
        assert.match(before, /GPU/, `${policy}: the first plan uses the device`);
        const got = await logitsAtPrefixes(engine);
        got.forEach((g, i) => assert.deepEqual(g, want[i], `${policy}: logits after ${PREFIXES[i]} tokens differ from the CPU's`));
        assert.equal(engine.execution.fallback, undefined, `${policy}: fell back instead of re-planning`);
        assert.ok(events.length >= 1, `${policy}: no re-plan`);
        assert.deepEqual(engine.execution.replans, events);
        for (const e of events) {
          assert.match(e.reason, /cannot allocate .* KV cache page/);
          assert.ok(e.workload.prompt + e.workload.gen > e.atPosition, 'the new plan covers the positions held');
        }
        console.log(`  ${policy} at ${kib} KiB: ${before} → ${events.map((e) => `at ${e.atPosition}: ${e.toSplit}`).join('; ')}`);
        if (/GPU/.test(engine.execution.split) && engine.deviceStats()) onDevice++;
      } finally {
        engine.dispose();
      }
    }
    assert.ok(onDevice >= 1, 'some re-plan keeps work on the device');
  } finally {
    cleanup();
  }
});
