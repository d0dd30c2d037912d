import { simulateRequest, planRequest } from './engine/plan/api';
const vram = process.argv[2] ?? '';
for (const gen of [128, 512]) {
  const w = `batch=48,prompt=100,gen=${gen},rate=1000000,requests=48${vram}`;
  const t: Record<string, number> = {};
  for (const p of ['neo', 'gpu-only']) t[p] = simulateRequest({ model: 'llama-2-7b', hardware: 'g4dn.4xlarge', workload: w, policy: p }).simulation.online!.throughputTokensPerS;
  console.log(vram, gen, t, (t.neo! / t['gpu-only']!).toFixed(2));
}
const p = planRequest({ model: 'llama-2-7b', hardware: 'g4dn.4xlarge', workload: `batch=48,prompt=100,gen=512,rate=1000000,requests=48${vram}`, policy: 'neo' });
console.log(p.explanation.summary); console.log(JSON.stringify(p.explanation.decisions, null, 1).slice(0, 3000)); console.log(p.details);
