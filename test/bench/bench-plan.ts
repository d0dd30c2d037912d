// Planning speed: every policy for an 80-layer model (target: all policies < 50 ms together) and
// one NEO scheduling iteration with 256 requests (target < 1 ms). Prints medians of warm runs.
// Run: node --import tsx test/bench/bench-plan.ts
import { hardwarePreset } from '../../engine/hardware/presets';
import { modelPreset } from '../../engine/model/model-presets';
import { makeContext } from '../../engine/plan/context';
import { AUTO, POLICIES } from '../../engine/plan/registry';
import { simulatePlan } from '../../engine/plan/sim/simulate';

function median(xs: number[]): number { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]!; }

function time(fn: () => void, runs = 15): number {
  fn(); fn(); // warm-up (JIT)
  const t: number[] = [];
  for (let i = 0; i < runs; i++) { const t0 = performance.now(); fn(); t.push(performance.now() - t0); }
  return median(t);
}

async function main(): Promise<void> {
  const cases: [string, string, { batch: number; prompt: number; gen: number; rate?: number }][] = [
    ['llama-3.1-70b:Q4_K', 'rtx4090+ryzen9-7950x', { batch: 1, prompt: 4096, gen: 128 }],
    ['llama-3.1-70b', 'spr-h100', { batch: 8, prompt: 2048, gen: 256 }],
    // Weights fit on the GPU, KV does not: NEO and APEX apply (online, 2 requests/s).
    ['llama-3.1-70b:Q4_K', 'hgx-h100', { batch: 64, prompt: 2000, gen: 300, rate: 2 }],
  ];
  for (const [m, h, w] of cases) {
    // A fresh context per run: no cost-table caching across runs.
    const fresh = () => makeContext(modelPreset(m), hardwarePreset(h), w);
    const ctx = fresh();
    process.stdout.write(`\n${m} (${ctx.model.nLayers} layers) on ${h}, batch ${w.batch}, prompt ${w.prompt}, gen ${w.gen}${w.rate ? `, rate ${w.rate}/s` : ''}\n`);
    let sum = 0;
    for (const p of POLICIES) {
      if (!p.applicable(ctx).ok) { process.stdout.write(`  ${p.name.padEnd(13)} n/a (${p.applicable(ctx).reason})\n`); continue; }
      const ms = time(() => { const c = fresh(); p.plan(c); });
      const withSim = time(() => { const c = fresh(); simulatePlan(p.plan(c), c, p); });
      sum += ms;
      process.stdout.write(`  ${p.name.padEnd(13)} plan ${ms.toFixed(2)} ms   plan + simulate ${withSim.toFixed(2)} ms\n`);
    }
    const all = time(() => { const c = fresh(); for (const p of POLICIES) if (p.applicable(c).ok) p.plan(c); });
    const auto = time(() => { AUTO.plan(fresh()); });
    process.stdout.write(`  all policies (one context): ${all.toFixed(2)} ms (sum of separate runs ${sum.toFixed(2)} ms; target < 50 ms)\n`);
    process.stdout.write(`  auto (every policy planned + simulated, best picked): ${auto.toFixed(2)} ms\n`);
  }
  // NEO/APEX scheduling iteration with 256 requests: the brain-policies helper's benchmark
  // (test/bench/bench-online.ts) runs on import and prints its medians.
  process.stdout.write('\n');
  await import('./bench-online');
}

void main();
