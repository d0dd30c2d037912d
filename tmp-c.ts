import { makeContext } from './engine/plan/context';
import { hardwarePreset } from './engine/hardware/presets';
import { modelPreset } from './engine/model/model-presets';
import { onlineSetup } from './engine/plan/online/plan-online';
import { generateWorkload } from './engine/plan/online/workload';
import { runOnline } from './engine/plan/online/loop';
import { NeoScheduler } from './engine/plan/neo/scheduler';
import { ApexScheduler } from './engine/plan/apex/scheduler';
const vram = process.argv[4]; const n = Number(process.argv[2] ?? 100), rate = Number(process.argv[3] ?? 2);
const ctx = makeContext(modelPreset('llama-2-7b'), hardwarePreset('apex-t4'), { batch: 1, prompt: 512, gen: 800, rate, requests: n, ...(vram ? { vramBytes: Number(vram) * 2 ** 30 } : {}) } as any);
const s = onlineSetup(ctx);
console.log('limits', s.limits);
const w = generateWorkload({ rate, count: n, prompt: { kind: 'uniform-10pct', mean: 512 }, output: { kind: 'uniform-10pct', mean: 800 }, seed: 1 });
for (const name of ['neo', 'apex']) {
  const t0 = Date.now();
  const sch = name === 'neo' ? new NeoScheduler('neo', s.limits, s.predictors) : new ApexScheduler(s.limits, s.predictors);
  const reasons = new Map<string, number>();
  const r = runOnline(w, sch, s.truth, { onIteration: () => { if (sch instanceof ApexScheduler) { const k = sch.lastDecision.reason.replace(/[0-9]+/g, 'N'); reasons.set(k, (reasons.get(k) ?? 0) + 1); } } });
  console.log(name, (Date.now() - t0) + ' ms', r.throughputTokensPerS.toFixed(2), 'tok/s', r.perTokenLatencyMs.toFixed(1), r.iterations, JSON.stringify(r.modes), JSON.stringify(r.busy));
  if (reasons.size) console.log([...reasons].map(([k, v]) => `${v}: ${k}`).join('\n'));
}
