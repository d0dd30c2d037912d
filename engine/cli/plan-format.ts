// Shared option parsing and human-readable output for `fulcrum plan|explain|simulate`.

import { parseArgs, UsageError, type ParsedArgs } from './command';
import type { PlanParams } from '../plan/api';
import type { LayerPlan, Plan } from '../plan/types';

export const PLAN_VALUE_OPTIONS = ['model', 'hardware', 'workload', 'policy', 'costs', 'expert-stats', 'trace'];
export const PLAN_FLAGS = ['json', 'help', 'no-feedback'];

export function planUsage(cmd: string, extra = ''): string {
  return `usage: fulcrum ${cmd} --model FILE|PRESET --hardware this|PRESET|FILE --workload batch=N,prompt=N,gen=N[,batches=N][,vram=SIZE][,rate=R[,requests=N]]
                [--policy NAME|auto] [--costs FILE] [--expert-stats FILE]${extra} [--no-feedback] [--json]

  --model     GGUF file, or a preset (fulcrum presets), optionally PRESET:FORMAT (e.g. llama-3.1-8b:Q4_K)
  --hardware  'this' (measured profile from \`fulcrum profile\`), 'this+GPU' (this machine's CPU and memory with a
              GPU preset, what-if), a preset (machine, GPU+HOST, or host), or a profile JSON; several hosts:
              N×(HOST)@NETWORK (e.g. '2x(rtx4090+ryzen9-7950x)@10GbE') or a cluster JSON (examples/clusters/)
  --workload  batch, prompt and gen tokens; batches=N runs the batch as N batches of batch/N (paper 000
              Eq. 14: batch=50,batches=2 is its 2×25); vram overrides the VRAM budget (e.g. 8G);
              rate = requests/s (online serving simulation of 'requests' requests, default 64)
  --policy    gpu-only, cpu-only, layer-split, split-points, kvpr, lia, neo, apex, moe-offload, or auto (default)
  --costs     measured per-op cost table for one layer: {"unit":"ms","ops":[{"name":"Q","cpu":…,"gpu":…,"h2d":…,"dc":…,"s2d":…}]}
  --expert-stats  MoE models: per-layer expert activation counts from a profiling run
              {"format":"fulcrum-expert-stats","version":1,"nExpert":E,"nExpertUsed":k,"tokens":N,
               "layers":[{"layer":0,"counts":[…E counts…]},…]} (default: uniform routing, k/E per expert)
  --no-feedback  with --hardware this: the profile alone, without the measured correction the runtime
              saved beside it (engine/cost/feedback.ts)
  --json      print the JSON result (schema: engine/plan/plan.schema.json)
`;
}

export function parsePlanArgs(argv: string[]): { args: ParsedArgs; params: PlanParams } {
  const args = parseArgs(argv, PLAN_VALUE_OPTIONS, PLAN_FLAGS);
  if (args.options.has('help')) return { args, params: { model: '', hardware: '', workload: '' } };
  if (args.positionals.length) throw new UsageError(`unexpected argument '${args.positionals[0]}'`);
  const model = args.options.get('model');
  const hardware = args.options.get('hardware');
  const workload = args.options.get('workload');
  if (!model) throw new UsageError('--model is required');
  if (!hardware) throw new UsageError('--hardware is required');
  if (!workload) throw new UsageError('--workload is required (e.g. batch=1,prompt=1024,gen=64)');
  const params: PlanParams = { model, hardware, workload, policy: args.options.get('policy') ?? 'auto' };
  const costs = args.options.get('costs');
  if (costs) params.costs = costs;
  const expertStats = args.options.get('expert-stats');
  if (expertStats) params.expertStats = expertStats;
  // An empty correction: the plan is made from the profile alone.
  if (args.options.has('no-feedback')) params.correction = { steps: 0, factors: {} };
  return { args, params };
}

function ms(x: number): string {
  if (!Number.isFinite(x)) return '∞';
  return x >= 10_000 ? `${(x / 1000).toFixed(1)} s` : x >= 100 ? `${x.toFixed(0)} ms` : `${x.toFixed(3)} ms`;
}
function gib(b: number): string { return `${(b / 2 ** 30).toFixed(2)} GiB`; }

function layerSignature(l: LayerPlan): string {
  const groups: string[] = [];
  let cur = '';
  let names: string[] = [];
  const flush = (): void => { if (names.length) groups.push(`${cur.toUpperCase()}: ${names.join(' ')}`); };
  for (const o of l.ops) {
    const d = o.device === 'split' ? `split` : o.device;
    const label = o.experts ? `${o.name}(${o.experts.onGpu.length}/${o.experts.count} in VRAM)`
      : o.device === 'split' ? `${o.name}(${Math.round((o.gpuFraction ?? 0) * 100)}% GPU)` : o.name;
    if (d !== cur) { flush(); cur = d; names = []; }
    names.push(label);
  }
  flush();
  const kv = `KV ${l.kv.device}${l.kv.streamed ? ' (streamed)' : ''}${l.kv.recomputePrefix ? `, recompute ${l.kv.recomputePrefix} tokens` : ''}`;
  return `${groups.join(' | ')}   weights ${l.weights}, ${kv}`;
}

export function formatPlan(plan: Plan): string {
  const p = plan.predicted;
  const out: string[] = [];
  out.push(`policy: ${plan.policy}${plan.policy !== plan.chosenPolicy ? ` → ${plan.chosenPolicy}` : ''}   model: ${plan.model.name} (${plan.model.nLayers} layers)   hardware: ${plan.hardware.name} (${plan.hardware.source})   costs: ${plan.costSource}`);
  const w = plan.workload;
  out.push(`workload: batch ${w.batch}${w.batches !== undefined ? ` as ${w.batches}×${w.batch / w.batches}` : ''}, prompt ${w.prompt}, gen ${w.gen}${w.vramBytes !== undefined ? `, vram ${gib(w.vramBytes)}` : ''}${w.rate !== undefined ? `, rate ${w.rate}/s${w.requests !== undefined ? `, ${w.requests} requests` : ''}` : ''}`);
  out.push(`predicted: decode ${p.tokensPerSecond.toFixed(2)} tok/s, step ${ms(p.stepMs)}, layer ${ms(p.layerMs)}, prefill ${ms(p.prefillMs)}, total ${ms(p.totalMs)}`);
  if (p.online) out.push(`online: ${p.online.throughputTokensPerS.toFixed(1)} tok/s at ${p.online.rate}/s, ${p.online.perTokenLatencyMs.toFixed(1)} ms per token`);
  out.push(`lanes (decode step): ${Object.entries(p.perLane).filter(([, v]) => v > 0).map(([k, v]) => `${k} ${ms(v)}`).join(', ')}`);
  const m = plan.memory;
  out.push(`memory: GPU ${gib(m.gpuBytes)} of ${gib(m.gpuCapacityBytes)}, pinned host ${gib(m.pinnedBytes)}, host ${gib(m.hostBytes)}${m.fits ? '' : '   DOES NOT FIT'}`);
  for (const stage of [plan.stages.prefill, plan.stages.decode]) {
    out.push(`${stage.name} (batch ${stage.batch}, ${stage.newTokens} new, context ${stage.context}): ${stage.overlap}`);
    if (stage.subBatches) out.push(`  sub-batches: ${stage.subBatches.map((s) => `${s.size} (${s.role})`).join('; ')}`);
    let start = 0;
    for (let i = 1; i <= stage.layers.length; i++) {
      const a = stage.layers[start]!;
      const b = stage.layers[i];
      if (b && layerSignature(b) === layerSignature(a) && Math.abs(b.predictedMs - a.predictedMs) < 1e-9) continue;
      out.push(`  ${i - 1 > start ? `layers ${start}–${i - 1}` : `layer ${start}`}: ${layerSignature(a)}   ${ms(a.predictedMs)}/layer`);
      start = i;
    }
    out.push(`  ${stage.head.name}: ${stage.head.device}`);
  }
  out.push(`binding resource: ${plan.explanation.binding}`);
  out.push(`summary: ${plan.explanation.summary}`);
  return out.join('\n') + '\n';
}

export function formatExplanation(plan: Plan): string {
  const out: string[] = [formatPlan(plan)];
  for (const d of plan.explanation.decisions) {
    out.push(`decision ${d.id}: ${d.chosen}  [binding: ${d.binding}]`);
    out.push(`  why: ${d.reason}`);
    for (const a of d.alternatives) {
      const v = a.metric === 'tokensPerSecond' ? `${a.predictedMs.toFixed(2)} tok/s` : ms(a.predictedMs);
      out.push(`  - ${a.label}: ${v}${a.note ? `  (${a.note})` : ''}`);
    }
  }
  if (plan.explanation.whatIf.length) {
    out.push('what if:');
    for (const w of plan.explanation.whatIf) out.push(`  - ${w.change}: ${w.effect}`);
  }
  return out.join('\n') + '\n';
}
