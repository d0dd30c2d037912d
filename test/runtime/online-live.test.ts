// NEO and APEX deciding live in the runtime (issue 21 item 2): the continuous-batching scheduler
// runs the plan's per-iteration decider (the simulator's) over eight requests of mixed prompt
// lengths on the loopback device, at a device budget where the decider keeps some requests' KV
// on the device and attends over the others' on the CPU; every request's greedy tokens equal the
// same request run alone on the CPU. A second test squeezes the device's KV budget so the decider
// moves running requests' KV host↔device mid-generation, and the tokens stay the same. A third
// replays the same requests in the online simulator with the engine's decider, limits and slots:
// both make the same decision in every iteration (one implementation, not a copy). 'two-batch'
// decisions run NEO's pipelined step (test/runtime/online-pipeline.test.ts checks its bits and
// its overlap): here, that the runtime asks for it exactly then and that it ran.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { hardwarePreset } from '../../engine/hardware/presets';
import { Engine } from '../../engine/runtime/engine';
import type { IterationRecord } from '../../engine/runtime/scheduler/online';
import type { NativeModel } from '../../engine/native/model';
import { skipUnlessShared } from '../helpers/shared';
import { budget, LENGTHS, MODEL, PROMPTS, SEQS } from '../helpers/online-batch';
import { resolve } from '../../engine/plan/api';
import { makeDecider } from '../../engine/plan/online/decider';
import { onlineSetup } from '../../engine/plan/online/setup';
import { makeRequest } from '../../engine/plan/neo/request';
import { runOnline } from '../../engine/plan/online/loop';

const BASE = hardwarePreset('ryzen9-7950x');
const CTX = 256;
const GEN = 24;
// Exactly GEN tokens each: no end-of-generation token ends a request early.
const REQ = { maxTokens: GEN, temperature: 0, onlyStopIds: true, stopIds: new Set<number>() };

async function alone(): Promise<number[][]> {
  const cpu = await Engine.load(MODEL, { threads: 1, contextLength: CTX, device: 'cpu', maxSequences: 1 });
  try {
    const s = cpu.scheduler();
    const out: number[][] = [];
    for (const p of PROMPTS) out.push((await s.submit({ prompt: p, ...REQ }).result).tokens);
    return out;
  } finally {
    cpu.dispose();
  }
}

/** A device budget of the model's weights × f plus the executor's workspace. */

interface Served {
  tokens: number[][]; records: IterationRecord[]; split: string; executed: string; simulated: string[];
  /** Per iteration: whether the native model was asked for the pipelined step (NEO's two sub-batches). */
  pipelined: boolean[];
  /** Ops of the pipelined program compiled (it is compiled when a step first runs it). */
  pipelinedOps: number;
}

/** The simulator's decisions for the same requests (all at t = 0) with the engine's decider, limits and slots. */
function simulated(engine: Engine, kind: 'neo' | 'apex'): string[] {
  const live = engine.scheduler().onlineDecider!;
  const setup = onlineSetup(resolve(engine.execution.planParams!).ctx);
  const out: string[] = [];
  runOnline(LENGTHS.map((n, i) => makeRequest(i, 0, n, GEN)), makeDecider(kind, live.limits, setup.predictors), setup.truth, {
    maxRunning: SEQS,
    onIteration: (plan) => {
      let cpu = 0, dev = 0;
      for (const b of plan.batches) { cpu += b.cpuDecodes.length + b.cpuPrefills.length; dev += b.gpuDecodes.length + b.gpuPrefills.length; }
      out.push(`${plan.mode} ${dev}/${cpu}`);
    },
  });
  return out;
}

async function serveAll(policy: string, vram: number, online: NonNullable<Parameters<Engine['scheduler']>[0]>['online'], onEngine?: (e: Engine) => void): Promise<Served | undefined> {
  let engine: Engine;
  try {
    engine = await Engine.load(MODEL, { threads: 1, contextLength: CTX, device: 'loopback', vramBytes: vram, policy, hardware: BASE, linkGBps: 10, workload: { batch: SEQS, prompt: 48, gen: GEN, vramBytes: vram }, maxSequences: SEQS });
  } catch {
    return undefined; // the policy does not apply at this budget
  }
  try {
    onEngine?.(engine);
    const native = (engine as unknown as { native: NativeModel }).native;
    const records: IterationRecord[] = [];
    const pipelined: boolean[] = [];
    const s = engine.scheduler({ online: { ...online, onIteration: (r) => { records.push(r); pipelined.push(native.pipelined); online?.onIteration?.(r); } } });
    const tokens = (await Promise.all(PROMPTS.map((p) => s.submit({ prompt: p, ...REQ }).result))).map((r) => r.tokens);
    const sim = online?.limits ? [] : simulated(engine, policy as 'neo' | 'apex');
    const pipelinedOps = native.compiledOps().filter((o) => o.stage === 'pipelined').length;
    return { tokens, records, split: engine.execution.split, executed: engine.execution.policy, simulated: sim, pipelined, pipelinedOps };
  } finally {
    engine.dispose();
  }
}

for (const policy of ['neo', 'apex']) {
  test(`${policy} decides live at batch 8 with mixed prompt lengths on loopback: every request equals itself alone on the CPU`, { skip: skipUnlessShared(MODEL) }, async () => {
    const want = await alone();
    let found = false;
    // The smallest budgets at which the policy applies leave the device's KV short of the eight
    // requests: the decider then attends over some on the CPU while the device attends over the rest.
    for (let f = 1.76; f <= 2.6 && !found; f += 0.03) {
      const run = await serveAll(policy, budget(f), {});
      if (!run) continue;
      assert.equal(run.executed, policy);
      assert.match(run.split, /KV split by request/);
      assert.ok(run.records.length > 0, `${policy}: the decider ran`);
      for (let i = 0; i < SEQS; i++) assert.deepEqual(run.tokens[i], want[i], `${policy} (budget ×${f.toFixed(2)}): request ${i} (prompt ${LENGTHS[i]}) differs from alone on the CPU`);
      const cpu = run.records.reduce((n, r) => n + r.cpuAttended, 0), dev = run.records.reduce((n, r) => n + r.deviceAttended, 0);
      const both = run.records.filter((r) => r.cpuAttended > 0 && r.deviceAttended > 0).length;
      if (cpu > 0 && dev > 0 && both > 0) {
        found = true;
        // Refused moves would make the runtime differ (none at these budgets: the limits are the device's).
        assert.equal(run.records.reduce((n, r) => n + r.refused, 0), 0);
        assert.deepEqual(run.records.map((r) => `${r.mode} ${r.deviceAttended}/${r.cpuAttended}`), run.simulated, `${policy}: the runtime's decisions (mode, device/CPU attentions per iteration) differ from the simulator's`);
        // 'two-batch' iterations ask for NEO's pipelined step, the others for one step; a
        // two-batch iteration with both sides ran the pipelined program (compiled on first use).
        assert.deepEqual(run.pipelined, run.records.map((r) => r.mode === 'two-batch'), `${policy}: pipelined steps asked for exactly on two-batch decisions`);
        const pipedBoth = run.records.filter((r) => r.mode === 'two-batch' && r.cpuAttended > 0 && r.deviceAttended > 0).length;
        if (pipedBoth > 0) assert.ok(run.pipelinedOps > 0, `${policy}: ${pipedBoth} two-batch iterations with both sides, yet no pipelined program ran`);
        const modes = [...new Set(run.records.map((r) => r.mode))].join(', ');
        console.log(`  ${policy}: budget ×${f.toFixed(2)}, ${run.records.length} iterations (${modes}), ${dev} device / ${cpu} CPU attentions, ${both} iterations with both, ${pipedBoth} of them pipelined`);
      }
    }
    assert.ok(found, `${policy}: no budget made the decider attend on both the device and the CPU`);
  });
}

test('a running request\'s KV moved host↔device by the decider mid-generation keeps its tokens identical', { skip: skipUnlessShared(MODEL) }, async () => {
  const want = await alone();
  let native: NativeModel | undefined;
  const moved: { seq: number; positions: number; to: 'host' | 'device' }[] = [];
  // A device KV budget of 192 tokens (12 of NEO's 16-token blocks): the requests outgrow it as
  // they generate, so the decider swaps the newest out to the host and, as others finish, back in.
  const run = await serveAll('neo', budget(2.4), {
    limits: { gpuKvTokens: 192 },
    onIteration: (r) => {
      for (const seq of r.swappedOut) moved.push({ seq, positions: native!.sequencePast(seq), to: 'host' });
      for (const seq of r.swappedIn) moved.push({ seq, positions: native!.sequencePast(seq), to: 'device' });
    },
  }, (e) => { native = (e as unknown as { native: NativeModel }).native; });
  assert.ok(run, 'neo applies at this budget');
  for (let i = 0; i < SEQS; i++) assert.deepEqual(run.tokens[i], want[i], `request ${i} (prompt ${LENGTHS[i]}) differs from alone on the CPU`);
  const out = moved.filter((m) => m.to === 'host' && m.positions > 0), back = moved.filter((m) => m.to === 'device' && m.positions > 0);
  assert.ok(out.length > 0, `a running request's KV went to the host (moves: ${JSON.stringify(moved)})`);
  assert.ok(back.length > 0, `a running request's KV came back to the device (moves: ${JSON.stringify(moved)})`);
  console.log(`  ${out.length} swaps out, ${back.length} swaps in of non-empty KV (e.g. seq ${out[0]!.seq} at ${out[0]!.positions} positions)`);
});
