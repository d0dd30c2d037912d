// Planning-speed benchmark for the online policies (issue item 9): one NEO (and APEX) scheduling
// iteration with 256 requests, and lia/neo/apex planning for an 80-layer model.
// Run: node --import tsx test/bench/bench-online.ts   (prints medians; not a test); bench:plan runs it too.

import { hardwarePreset } from '../../engine/hardware/presets';
import { modelPreset } from '../../engine/model/model-presets';
import { profilePredictors, rooflineOnlineCosts } from '../../engine/plan/neo/costs';
import { NeoScheduler, type OnlineQueues } from '../../engine/plan/neo/scheduler';
import { ApexScheduler } from '../../engine/plan/apex/scheduler';
import { makeRequest } from '../../engine/plan/neo/request';
import { makeContext } from '../../engine/plan/context';
import { policy as lia } from '../../engine/plan/lia';
import { policy as neo } from '../../engine/plan/online/neo';
import { policy as apex } from '../../engine/plan/online/apex';

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
}
const median = (xs: number[]): number => quantile(xs, 0.5);

/** 256 requests mid-decode (GPU KV filled first) plus 16 waiting prompts. */
function state(gpuKvTokens: number): OnlineQueues {
  const q: OnlineQueues = { waiting: [], gpu: [], cpu: [] };
  let used = 0;
  for (let i = 0; i < 256; i++) {
    const r = makeRequest(i, 0, 800 + ((i * 37) % 400), 600);
    r.generated = (i * 13) % 500;
    const need = r.promptTokens + r.generated + 16;
    if (used + need < gpuKvTokens) { r.where = 'gpu'; q.gpu.push(r); used += need; } else { r.where = 'cpu'; q.cpu.push(r); }
  }
  for (let i = 0; i < 16; i++) q.waiting.push(makeRequest(1000 + i, 0, 500, 200));
  return q;
}

function benchScheduler(name: string, make: () => { schedule(q: OnlineQueues): unknown }, gpuKv: number, runs = 300): void {
  const times: number[] = [];
  for (let i = 0; i < runs + 30; i++) {
    const s = make();
    const q = state(gpuKv);
    const t0 = performance.now();
    s.schedule(q);
    const dt = performance.now() - t0;
    if (i >= 30) times.push(dt); // warm-up excluded
  }
  console.log(`${name}: one scheduling iteration, 256 decoding + 16 waiting requests: median ${(median(times) * 1e3).toFixed(0)} µs, p90 ${(quantile(times, 0.9) * 1e3).toFixed(0)} µs over ${runs} runs (target < 1 ms; NEO paper: < 3 ms)`);
}

const costs = rooflineOnlineCosts(modelPreset('llama-3.1-8b'), hardwarePreset('g5.8xlarge'), { vramBytes: 0.9 * 24 * 2 ** 30 });
const P = profilePredictors(costs);
const limits = { nLayers: costs.nLayers, gpuKvTokens: costs.gpuKvTokens, cpuKvTokens: costs.cpuKvTokens, maxBatchTokens: costs.maxBatchTokens };
benchScheduler('NEO', () => new NeoScheduler('neo', limits, P), costs.gpuKvTokens);
benchScheduler('APEX', () => new ApexScheduler(limits, P), costs.gpuKvTokens);

const model = modelPreset('llama-3.1-70b:Q4_K');
const hw = hardwarePreset('spr-h100');
for (const p of [lia, neo, apex]) {
  const times: number[] = [];
  for (let i = 0; i < 23; i++) {
    const ctx = makeContext(model, hw, { batch: 16, prompt: 2000, gen: 256 }); // fresh context: no cached costs
    const t0 = performance.now();
    if (p.applicable(ctx).ok) p.plan(ctx);
    if (i >= 3) times.push(performance.now() - t0);
  }
  console.log(`plan ${p.name} for ${model.name} (${model.nLayers} layers) on ${hw.name}: median ${median(times).toFixed(2)} ms, p90 ${quantile(times, 0.9).toFixed(2)} ms`);
}
