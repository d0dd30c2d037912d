// /metrics' online_* counters across a re-plan (issue 21 review): a re-plan builds a new online
// decider, whose own counts start at 0, so counting in the decider made Prometheus see a counter
// reset. Here the NEO plan is made for 2 sequences and eight requests of mixed prompt lengths are
// served on loopback through the HTTP server's /metrics (the serve --http code path): the first
// step of more sequences re-plans (batch trigger) and the engine starts a new decider. Polled
// while serving, every online counter only grows; at the end each equals the sum over the
// iterations recorded before and after the re-plan.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';

import { hardwarePreset } from '../../engine/hardware/presets';
import { Engine } from '../../engine/runtime/engine';
import type { ReplanEvent } from '../../engine/runtime/replan';
import type { IterationRecord } from '../../engine/runtime/scheduler/online';
import { createHttpServer } from '../../engine/server/http/server';
import { ChatFormatter } from '../../engine/server/http/chat';
import { PromptBuilder } from '../../engine/completion/prompt';
import { skipUnlessShared } from '../helpers/shared';
import { budget, MODEL, PROMPTS, SEQS } from '../helpers/online-batch';

const GEN = 16;
const REQ = { maxTokens: GEN, temperature: 0, onlyStopIds: true, stopIds: new Set<number>() };


/** Every fulcrum_online_* series of a /metrics text, by name with labels. */
function onlineSeries(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith('fulcrum_online_')) continue;
    const at = line.lastIndexOf(' ');
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

/** What the counters must read after `records`: the sums over the iterations themselves. */
function expected(records: readonly IterationRecord[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const mode of ['gpu-only', 'two-batch', 'async-overlap']) m.set(`fulcrum_online_iterations_total{mode="${mode}"}`, records.filter((r) => r.mode === mode).length);
  m.set('fulcrum_online_attention_total{where="device"}', records.reduce((n, r) => n + r.deviceAttended, 0));
  m.set('fulcrum_online_attention_total{where="cpu"}', records.reduce((n, r) => n + r.cpuAttended, 0));
  m.set('fulcrum_online_swaps_total', records.reduce((n, r) => n + r.swappedOut.length + r.swappedIn.length, 0));
  m.set('fulcrum_online_refused_total', records.reduce((n, r) => n + r.refused, 0));
  return m;
}

test('neo on loopback: a re-plan mid-serving starts a new decider and /metrics\' online counters only grow, equal to all iterations logged', { skip: skipUnlessShared(MODEL), timeout: 600_000 }, async () => {
  let checked = false;
  for (let f = 1.76; f <= 2.6 && !checked; f += 0.06) {
    const events: ReplanEvent[] = [];
    let engine: Engine;
    try {
      engine = await Engine.load(MODEL, {
        threads: 1, contextLength: 256, device: 'loopback', vramBytes: budget(f), policy: 'neo', hardware: hardwarePreset('ryzen9-7950x'), linkGBps: 10,
        workload: { batch: 2, prompt: 48, gen: GEN, vramBytes: budget(f) }, maxSequences: SEQS, onReplan: (e) => events.push(e),
      });
    } catch {
      continue; // neo does not apply at this budget
    }
    const records: IterationRecord[] = [];
    const s = engine.scheduler({ online: { onIteration: (r) => records.push(r) } });
    if (!s.onlineDecider) { engine.dispose(); continue; }
    const { server } = createHttpServer({
      scheduler: s, modelId: 'stories260K', token: undefined, chat: new ChatFormatter(engine.tokenizer, engine.chatTemplate),
      split: () => engine.execution.split, kvBytesInUse: () => engine.kvBytesInUse(), prompts: new PromptBuilder(engine.tokenizer), contextLength: engine.contextLength,
    });
    try {
      await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`;
      const scrape = async () => onlineSeries(await (await fetch(url)).text());
      // Scrape while serving, as Prometheus would.
      const scrapes: Map<string, number>[] = [];
      let serving = true;
      const poller = (async () => {
        while (serving) {
          scrapes.push(await scrape());
          await new Promise((res) => setTimeout(res, 5));
        }
      })();
      try {
        await Promise.all(PROMPTS.map((p) => s.submit({ prompt: p, ...REQ }).result));
      } finally {
        serving = false;
        await poller;
      }
      const last = await scrape();
      // The re-plan happened mid-serving and the engine built a new decider for it (its
      // iterations are numbered from 1 again), and the new plan's decider kept deciding.
      const restarts = records.filter((r, i) => i > 0 && r.iteration === 1).length;
      if (events.length === 0 || restarts === 0 || !s.onlineDecider) continue;
      assert.ok(events.every((e) => e.trigger === 'batch'), events.map((e) => e.reason).join('; '));
      // Monotonic across every scrape, the one after the last iteration included.
      for (const [k, snap] of [...scrapes, last].entries()) {
        if (k === 0) continue;
        const prev = k - 1 < scrapes.length ? scrapes[k - 1]! : scrapes[scrapes.length - 1]!;
        for (const [series, v] of snap) assert.ok(v >= (prev.get(series) ?? 0), `scrape ${k}: ${series} fell from ${prev.get(series)} to ${v}`);
      }
      // Each counter is the sum over the iterations before and after the re-plan.
      assert.deepEqual(last, expected(records));
      assert.ok(records.length > s.onlineDecider.stats.iterations, 'iterations before the re-plan are counted too');
      console.log(`  neo: budget ×${f.toFixed(2)}, ${events.length} re-plan(s) (${events.map((e) => `batch ${e.workload.batch}`).join(', ')}), ${records.length} iterations (${s.onlineDecider.stats.iterations} by the last decider), ${scrapes.length} scrapes while serving`);
      checked = true;
    } finally {
      await new Promise<void>((res) => server.close(() => res()));
      await s.close();
      engine.dispose();
    }
  }
  assert.ok(checked, 'no budget served neo with a re-plan mid-serving');
});
