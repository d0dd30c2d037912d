// Multi-host planning (issue 27): pipeline parallelism across the hosts of a ClusterProfile.
// Each host gets a contiguous range of layers; inside a host the existing single-host planner
// (planRequest with the chosen policy) plans its range as a model of that many layers. Fulcrum
// plans for such clusters and exports the plan (vLLM, llama.cpp RPC, Ollama); it does not run them.
//
// Decision: a stage's sub-model keeps the embedding and LM head, so middle stages are charged for
// weights they will not hold: the capacity found is conservative (a few hundred MiB per host).
// Decision: ranges are balanced by each host's predicted decode time per layer (water-filling
// with each host's capacity as a cap), which equalises the pipeline stages; the activation sent
// between stages per token (nEmbd × 2 bytes, f16) is charged once per link.

import type { Workload } from '../../cost/types';
import type { WhatIf } from '../../explain/types';
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

export function planCluster(model: ModelShape, cluster: ClusterProfile, workload: Workload, policy?: PolicyName): ClusterPlan {
  const N = model.nLayers;
  const caps = cluster.hosts.map((h) => capacity(model, h, workload, policy));
  const total = caps.reduce((s, c) => s + c.layers, 0);
  if (total < N) {
    throw new Error(`cluster ${cluster.name}: the hosts hold ${caps.map((c, i) => `host ${i} ${c.layers}`).join(', ')} of ${N} layers of ${model.name}; add a host or memory`);
  }
  // Per-layer decode time of each host, from its capacity plan.
  const perLayer = caps.map((c) => (c.plan ? c.plan.predicted.layerMs : Infinity));
  // Water-filling: layers proportional to speed, capped by capacity.
  const assign = new Array<number>(caps.length).fill(0);
  let left = N;
  let open = caps.map((c, i) => i).filter((i) => caps[i]!.layers > 0);
  while (left > 0 && open.length) {
    const speed = open.reduce((s, i) => s + 1 / perLayer[i]!, 0);
    const share = left;
    let given = 0;
    for (const i of open) {
      const want = Math.max(1, Math.floor(share * (1 / perLayer[i]!) / speed));
      const take = Math.min(want, caps[i]!.layers - assign[i]!, left - given);
      assign[i]! += take; given += take;
    }
    left -= given;
    open = open.filter((i) => assign[i]! < caps[i]!.layers);
    if (given === 0) break;
  }
  // Rounding remainder: to the host with the most spare capacity per its speed.
  for (let i = 0; left > 0 && i < caps.length; i++) { const t = Math.min(left, caps[i]!.layers - assign[i]!); assign[i]! += t; left -= t; }

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
  else explanation.push(`host 0 alone holds the model (${alone.predicted.stepMs.toFixed(2)} ms per step); the split balances by predicted time`);
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
