// The live NEO decisions in the measured trace and in /metrics (issue 21 item 2): eight requests of
// mixed prompt lengths served on loopback with the plan's decider (the setup of
// online-live.test.ts); every iteration appears in the Chrome trace as an instant event with its
// mode and as attention/swap counters beside the measured steps, and the /metrics counters equal
// the scheduler's own stats.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { hardwarePreset } from '../../engine/hardware/presets';
import { Engine } from '../../engine/runtime/engine';
import type { IterationRecord } from '../../engine/runtime/scheduler/online';
import { measuredChromeTrace } from '../../engine/runtime/trace';
import { Metrics } from '../../engine/server/http/metrics';
import { skipUnlessShared } from '../helpers/shared';
import { budget, LENGTHS, MODEL, PROMPTS, SEQS } from '../helpers/online-batch';

const GEN = 16;
const REQ = { maxTokens: GEN, temperature: 0, onlyStopIds: true, stopIds: new Set<number>() };


/** A Prometheus counter's value from the text exposition. */
function counter(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  assert.ok(line, `no ${series} in /metrics:\n${text}`);
  return Number(line.slice(series.length + 1));
}

test('neo on loopback: every live iteration is a trace event and counter, and /metrics counts equal the scheduler\'s stats', { skip: skipUnlessShared(MODEL), timeout: 600_000 }, async () => {
  let checked = false;
  // The smallest budgets at which neo applies leave the device's KV short of the eight requests,
  // so the decider attends over some on the CPU (as in online-live.test.ts).
  for (let f = 1.76; f <= 2.6 && !checked; f += 0.03) {
    let engine: Engine;
    try {
      engine = await Engine.load(MODEL, { threads: 1, contextLength: 256, device: 'loopback', vramBytes: budget(f), policy: 'neo', hardware: hardwarePreset('ryzen9-7950x'), linkGBps: 10, workload: { batch: SEQS, prompt: 48, gen: GEN, vramBytes: budget(f) }, maxSequences: SEQS });
    } catch {
      continue; // neo does not apply at this budget
    }
    try {
      const records: IterationRecord[] = [];
      const s = engine.scheduler({ online: { onIteration: (r) => records.push(r) } });
      engine.setTracing(true);
      await Promise.all(PROMPTS.map((p) => s.submit({ prompt: p, ...REQ }).result));
      const trace = measuredChromeTrace(engine.takeTrace(), (step) => `step ${step}`);
      const live = s.onlineDecider?.stats;
      if (!live || live.cpuAttended === 0 || live.deviceAttended === 0) continue; // the decider must place attention on both
      // One instant event per iteration, in order, with the iteration's mode and placement.
      const instants = trace.traceEvents.filter((e) => e.cat === 'online' && e.ph === 'i');
      assert.equal(instants.length, records.length);
      assert.equal(records.length, live.iterations);
      assert.deepEqual(instants.map((e) => `${e.args!.mode} ${e.args!.deviceAttended}/${e.args!.cpuAttended}`), records.map((r) => `${r.mode} ${r.deviceAttended}/${r.cpuAttended}`));
      // Counters beside the measured steps: their sums are the scheduler's totals.
      const sum = (name: string, key: string) => trace.traceEvents.filter((e) => e.ph === 'C' && e.name === name).reduce((n, e) => n + (e.args![key] as number), 0);
      assert.equal(sum('online attention', 'device'), live.deviceAttended);
      assert.equal(sum('online attention', 'cpu'), live.cpuAttended);
      assert.equal(sum('online swaps', 'out') + sum('online swaps', 'in'), live.swaps);
      assert.ok(trace.traceEvents.some((e) => e.ph === 'X'), 'the measured ops are in the same trace');
      // /metrics, as the HTTP server renders it from the same scheduler.
      const text = new Metrics().render(s.stats, engine.execution.split, engine.kvBytesInUse(), s.onlineStats);
      for (const [mode, n] of Object.entries(live.modes)) assert.equal(counter(text, `fulcrum_online_iterations_total{mode="${mode}"}`), n);
      assert.equal(counter(text, 'fulcrum_online_attention_total{where="device"}'), live.deviceAttended);
      assert.equal(counter(text, 'fulcrum_online_attention_total{where="cpu"}'), live.cpuAttended);
      assert.equal(counter(text, 'fulcrum_online_swaps_total'), live.swaps);
      assert.equal(counter(text, 'fulcrum_online_refused_total'), live.refused);
      console.log(`  neo: budget ×${f.toFixed(2)}, ${records.length} iterations (${Object.entries(live.modes).map(([m, n]) => `${m} ${n}`).join(', ')}), ${live.deviceAttended} device / ${live.cpuAttended} CPU attentions, ${live.swaps} swaps`);
      checked = true;
    } finally {
      engine.dispose();
    }
  }
  assert.ok(checked, 'no budget made neo attend on both the device and the CPU');
});

test('without an online decider /metrics has no online counters', () => {
  const text = new Metrics().render({ running: 0, queued: 0, slots: 1, requests: 0, completed: 0, cancelled: 0, failed: 0, promptTokens: 0, reusedTokens: 0, generatedTokens: 0, steps: 0, stepRows: 0 }, 'CPU only', 0);
  assert.ok(!text.includes('fulcrum_online_'));
});

test('`fulcrum serve --http --device loopback --policy neo`: /metrics counts equal the iterations the server logged', { skip: skipUnlessShared(MODEL), timeout: 300_000 }, async () => {
  const { HttpServerProcess } = await import('../lsp/http-server');
  let checked = false;
  for (let f = 1.76; f <= 2.6 && !checked; f += 0.06) {
    const server = await HttpServerProcess.start(MODEL, ['--no-auth', '--device', 'loopback', '--policy', 'neo', '--vram', String(budget(f)), '--parallel', String(SEQS), '--threads', '1', '--log-iterations']).catch(() => undefined);
    if (!server) continue; // neo does not apply at this budget
    try {
      if (!/neo decides every iteration live/.test(server.stderr)) continue;
      await Promise.all(LENGTHS.map((n, k) => server.stream(Array.from({ length: n }, (_, i) => `w${(i * 31 + k * 7) % 97}`).join(' '), GEN)));
      const text = await (await fetch(`${server.base}/metrics`, { headers: server.headers() })).text();
      const lines = server.stderr.split('\n').filter((l) => /fulcrum: neo iteration \d+: /.test(l));
      if (lines.length === 0) continue;
      for (const mode of ['gpu-only', 'two-batch', 'async-overlap']) {
        assert.equal(counter(text, `fulcrum_online_iterations_total{mode="${mode}"}`), lines.filter((l) => l.includes(`: ${mode}, `)).length, mode);
      }
      const sumOf = (re: RegExp) => lines.reduce((n, l) => n + Number(re.exec(l)?.[1] ?? 0), 0);
      assert.equal(counter(text, 'fulcrum_online_attention_total{where="device"}'), sumOf(/(\d+) attended on the device/));
      assert.equal(counter(text, 'fulcrum_online_attention_total{where="cpu"}'), sumOf(/(\d+) on the CPU/));
      console.log(`  serve --policy neo at budget ×${f.toFixed(2)}: ${lines.length} iterations logged = /metrics`);
      checked = true;
    } finally {
      await server.stop();
    }
  }
  assert.ok(checked, 'no budget served with the neo decider');
});
