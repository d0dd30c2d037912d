// Multi-host planning (issue 27): pipeline parallelism across the hosts of a ClusterProfile.
// Each host gets a contiguous range of layers; inside a host the existing single-host planner
// (planRequest with the chosen policy) plans its range as a model of that many layers. Fulcrum
// plans for such clusters and exports the plan (vLLM, llama.cpp RPC, Ollama); it does not run them.
//
// Decision: a stage's sub-model keeps the embedding and LM head, so middle stages are charged for
// weights they will not hold: the capacity found is conservative (a few hundred MiB per host).
// Decision: the layer counts minimise the predicted decode step (one token passes every stage, so
// the step is the sum of the stages plus the links): each host's step as a function of its layer
// count is planned at ~16 points up to its capacity (exact there, linear between: a host's step
// grows linearly while its layers stay in VRAM and steeply once they spill), and a dynamic
// programme over the hosts in order picks the counts. Among splits within 5 % of the fastest (about
// the cost model's own error), the one with the shortest longest stage wins: identical hosts get
// equal shares, and a pipeline with several requests in flight runs at its longest stage. The activation sent between stages per
// token (nEmbd × 2 bytes, f16) is charged once per link.

import type { Workload } from '../../cost/types';
import type { WhatIf } from '../explanation';
import { networkMs, type ClusterProfile } from '../../hardware/cluster';
import type { ModelShape } from '../../model/shape';
import { planRequest } from '../api';
import type { Plan, PolicyName } from '../types';

export interface HostStage {
  host: number;
  hardware: string;
  /** First layer and one past the last. */
  firstLayer: number;
  endLayer: number;
  plan: Plan;
  /** Decode time of this stage for one step, ms. */
  stepMs: number;
}

export interface ClusterPlan {
  kind: 'cluster';
  model: string;
  hardware: string;
  network: ClusterProfile['network'];
  stages: HostStage[];
  /** Activation bytes per decode step per link. */
  activationBytes: number;
  /** Network time per decode step over all links, ms. */
  networkMsPerToken: number;
  /** Predicted decode step (sum of stages + network: one token passes every stage), ms. */
  stepMs: number;
  tokensPerSecond: number;
  explanation: string[];
  /** Network address per host index (from a cluster file), for the exports' commands. */
  addresses?: (string | undefined)[];
  /** Explain requests: the effect of another network, one host fewer or one more. */
  whatIf?: WhatIf[];
}

/** The model as one stage plans it: `layers` layers (embedding and LM head kept; see above). */
export function subModel(model: ModelShape, layers: number): ModelShape {
  return { ...model, nLayers: layers, name: `${model.name} [${layers} layers]` };
}

function tryPlan(model: ModelShape, hw: ClusterProfile['hosts'][number], workload: Workload, policy: PolicyName | undefined, layers: number): Plan | Error {
  try { return planRequest({ model: subModel(model, layers), hardware: hw, workload, ...(policy ? { policy } : {}) }); } catch (e) { return e as Error; }
}

/** Most layers of the model host `hw` holds (0..nLayers), by binary search over fitting plans. */
function capacity(model: ModelShape, hw: ClusterProfile['hosts'][number], workload: Workload, policy: PolicyName | undefined): { layers: number; plan?: Plan } {
  let lo = 0; let hi = model.nLayers; let best: Plan | undefined;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    const p = tryPlan(model, hw, workload, policy, mid);
    if (p instanceof Error) hi = mid - 1; else { lo = mid; best = p; }
  }
  return best ? { layers: lo, plan: best } : { layers: lo };
}

/** Points a host's step table is planned at (plus 1 and its capacity). */
const TABLE_SAMPLES = 16;
/** Splits within this fraction of the fastest step count as equally fast (then balance decides). */
const BALANCE_TOLERANCE = 0.05;

/**
 * Predicted decode step (ms) of host `hw` holding n = 0..cap layers: planned exactly at n = 1,
 * every ⌈cap/16⌉ layers and cap, linear between; Infinity where a sampled plan fails.
 */
function stepTable(model: ModelShape, hw: ClusterProfile['hosts'][number], workload: Workload, policy: PolicyName | undefined, cap: number, capPlan: Plan | undefined): number[] {
  const table = new Array<number>(cap + 1).fill(0);
  if (cap === 0) return table;
  const every = Math.max(1, Math.ceil(cap / TABLE_SAMPLES));
  const points = [...new Set([1, ...Array.from({ length: Math.floor(cap / every) }, (_, k) => (k + 1) * every), cap])].filter((n) => n <= cap).sort((a, b) => a - b);
  const ms = points.map((n) => {
    if (n === cap && capPlan) return capPlan.predicted.stepMs;
    const p = tryPlan(model, hw, workload, policy, n);
    return p instanceof Error ? Infinity : p.predicted.stepMs;
  });
  for (let k = 0; k < points.length; k++) {
    const [n0, t0] = [points[k]!, ms[k]!];
    table[n0] = t0;
    if (k + 1 === points.length) break;
    const [n1, t1] = [points[k + 1]!, ms[k + 1]!];
    for (let n = n0 + 1; n < n1; n++) table[n] = t0 + ((t1 - t0) * (n - n0)) / (n1 - n0);
  }
  return table;
}

/**
 * Layer counts per host (in order, summing to n) with the smallest total of `tables[i][count]`,
 * using only counts whose time is at most `limit`; undefined when none exists.
 */
function allocate(tables: number[][], n: number, limit: number): { sizes: number[]; sum: number } | undefined {
  let prev = new Array<number>(n + 1).fill(Infinity);
  prev[0] = 0;
  const choice: number[][] = [];
  for (const table of tables) {
    const cur = new Array<number>(n + 1).fill(Infinity);
    const pick = new Array<number>(n + 1).fill(0);
    for (let k = 0; k <= n; k++) {
      for (let c = 0; c <= Math.min(k, table.length - 1); c++) {
        if (table[c]! > limit || prev[k - c] === Infinity) continue;
        const v = prev[k - c]! + table[c]!;
        if (v < cur[k]!) { cur[k] = v; pick[k] = c; }
      }
    }
    choice.push(pick);
    prev = cur;
  }
  if (prev[n] === Infinity) return undefined;
  const sizes = new Array<number>(tables.length).fill(0);
  for (let i = tables.length - 1, k = n; i >= 0; i--) { sizes[i] = choice[i]![k]!; k -= sizes[i]!; }
  return { sizes, sum: prev[n]! };
}

/** The split with the shortest longest stage among those whose total is at most `maxSum`. */
function balanced(tables: number[][], n: number, maxSum: number): number[] | undefined {
  const limits = [...new Set(tables.flat().filter((t) => t > 0 && Number.isFinite(t)))].sort((a, b) => a - b);
  let lo = 0; let hi = limits.length - 1; let best: number[] | undefined;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const r = allocate(tables, n, limits[mid]!);
    if (r && r.sum <= maxSum) { best = r.sizes; hi = mid - 1; } else lo = mid + 1;
  }
  return best;
}

export function planCluster(model: ModelShape, cluster: ClusterProfile, workload: Workload, policy?: PolicyName): ClusterPlan {
  const N = model.nLayers;
  const caps = cluster.hosts.map((h) => capacity(model, h, workload, policy));
  const total = caps.reduce((s, c) => s + c.layers, 0);
  if (total < N) {
    throw new Error(`cluster ${cluster.name}: the hosts hold ${caps.map((c, i) => `host ${i} ${c.layers}`).join(', ')} of ${N} layers of ${model.name}; add a host or memory`);
  }
  const linkMs = networkMs(cluster.network, model.nEmbd * 2 * workload.batch);
  // A used host costs its step plus the link into it (the first host's is taken off after).
  const tables = caps.map((c, i) => stepTable(model, cluster.hosts[i]!, workload, policy, c.layers, c.plan).map((ms, n) => (n === 0 ? 0 : ms + linkMs)));
  const fastest = allocate(tables, N, Infinity);
  if (!fastest) throw new Error(`cluster ${cluster.name}: no split of the ${N} layers over the hosts plans`);
  const assign = balanced(tables, N, fastest.sum * (1 + BALANCE_TOLERANCE)) ?? fastest.sizes;

  const stages: HostStage[] = [];
  let first = 0;
  assign.forEach((n, i) => {
    if (n === 0) return;
    const p = tryPlan(model, cluster.hosts[i]!, workload, policy, n);
    if (p instanceof Error) throw new Error(`cluster ${cluster.name}: host ${i} (${cluster.hosts[i]!.name}), layers ${first}–${first + n - 1}: ${p.message}`);
    stages.push({ host: i, hardware: cluster.hosts[i]!.name, firstLayer: first, endLayer: first + n, plan: p, stepMs: p.predicted.stepMs });
    first += n;
  });
  const activationBytes = model.nEmbd * 2 * workload.batch;
  const links = stages.length - 1;
  const netMs = links * networkMs(cluster.network, activationBytes);
  const stepMs = stages.reduce((s, st) => s + st.stepMs, 0) + netMs;
  const explanation = stages.map((s) => `layers ${s.firstLayer}–${s.endLayer - 1} on host ${s.host} (${s.hardware}): ${s.plan.chosenPolicy}, ${s.stepMs.toFixed(2)} ms per step`);
  const alone = tryPlan(model, cluster.hosts[0]!, workload, policy, N);
  if (alone instanceof Error) explanation.push(`host 0 alone: ${alone.message}`);
  else explanation.push(`host 0 alone holds the model (${alone.predicted.stepMs.toFixed(2)} ms per step)`);
  explanation.push(`layer counts: of the splits whose predicted step (stages + links) is within ${BALANCE_TOLERANCE * 100} % of the shortest, the one whose longest stage is shortest`);
  explanation.push(`network (${cluster.network.name}) adds ${netMs.toFixed(3)} ms per token over ${links} link${links === 1 ? '' : 's'} (${activationBytes} bytes of activations each)`);
  return {
    kind: 'cluster', model: model.name, hardware: cluster.name, network: cluster.network, stages, activationBytes,
    networkMsPerToken: netMs, stepMs, tokensPerSecond: workload.batch / (stepMs / 1000), explanation,
    ...(cluster.addresses ? { addresses: cluster.addresses } : {}),
  };
}

export function formatClusterPlan(p: ClusterPlan): string {
  const lines = [`${p.model} on ${p.hardware}: pipeline over ${p.stages.length} host${p.stages.length === 1 ? '' : 's'}, predicted ${p.stepMs.toFixed(2)} ms per token (${p.tokensPerSecond.toFixed(1)} tok/s)`];
  for (const e of p.explanation) lines.push(`  ${e}`);
  return lines.join('\n');
}
