// The multi-host request: `--hardware` given as a cluster spec (e.g. 2x(rtx4090+ryzen9-7950x)@10GbE)
// or a cluster file (engine/hardware/cluster-file.ts) turns plan/explain/simulate into a pipeline
// plan over hosts (pipeline.ts); shared by the CLI commands and the LSP planner worker.

import type { Workload } from '../../cost/types';
import type { WhatIf } from '../explanation';
import { isClusterSpec, networkMs, NETWORK_PRESETS, parseClusterSpec, type ClusterProfile } from '../../hardware/cluster';
import { isClusterFile, readClusterFile } from '../../hardware/cluster-file';
import type { ModelShape } from '../../model/shape';
import { simulateCluster, type ClusterTimeline } from './cluster-trace';
import { explainRequest, parseWorkload, resolveHardware, resolveModel, type PlanParams } from '../api';
import type { PolicyName } from '../types';
import { planCluster, subModel, type ClusterPlan } from './pipeline';

export interface ClusterRequestResult { plan: ClusterPlan; model: ModelShape }

/** A cluster simulation: the plan and the timeline of the prefill and the first decode tokens. */
export interface ClusterSimulateResult {
  plan: ClusterPlan;
  simulation: Omit<ClusterTimeline, 'events'> & { tokens: number };
  /** Chrome trace-event JSON (a lane per host and per link), when asked for. */
  trace?: { traceEvents: ClusterTimeline['events']; displayTimeUnit: 'ms' };
}

/** Decode tokens a cluster simulation plays after the prefill. */
const SIMULATED_TOKENS = 8;

/** Whether a --hardware value describes several hosts (a cluster spec or a cluster file). */
export function isClusterHardware(hardware: unknown): hardware is string {
  return typeof hardware === 'string' && (isClusterFile(hardware) || isClusterSpec(hardware));
}

export function loadCluster(spec: string): ClusterProfile {
  return isClusterFile(spec) ? readClusterFile(spec) : parseClusterSpec(spec, resolveHardware);
}

interface ResolvedCluster { model: ModelShape; cluster: ClusterProfile; workload: Workload; policy: PolicyName | undefined }

function resolveCluster(params: PlanParams): ResolvedCluster {
  if (typeof params.hardware !== 'string') throw new Error('cluster request: hardware must be a cluster spec or a cluster file');
  if (params.costs !== undefined) throw new Error('--costs: a measured cost table describes one machine; a multi-host plan uses the cost model');
  const model = resolveModel(params.model);
  const cluster = loadCluster(params.hardware);
  const workload = typeof params.workload === 'string' ? parseWorkload(params.workload) : params.workload ?? parseWorkload('');
  const policy = params.policy && params.policy !== 'auto' ? params.policy as PolicyName : undefined;
  return { model, cluster, workload, policy };
}

export function clusterRequest(params: PlanParams): ClusterRequestResult {
  const { model, cluster, workload, policy } = resolveCluster(params);
  return { plan: planCluster(model, cluster, workload, policy), model };
}

/**
 * The pipeline plan with each host's plan explained (its decisions and what-ifs, as a single-host
 * explain gives them) and the cluster's own what-ifs: another network, one host fewer, one more.
 */
export function clusterExplainRequest(params: PlanParams): ClusterPlan {
  const { model, cluster, workload, policy } = resolveCluster(params);
  const plan = planCluster(model, cluster, workload, policy);
  plan.stages = plan.stages.map((s) => ({
    ...s,
    plan: explainRequest({ model: subModel(model, s.endLayer - s.firstLayer), hardware: cluster.hosts[s.host]!, workload, ...(policy ? { policy } : {}) }),
  }));
  plan.whatIf = clusterWhatIfs(plan, model, cluster, workload, policy);
  return plan;
}

function clusterWhatIfs(plan: ClusterPlan, model: ModelShape, cluster: ClusterProfile, workload: Workload, policy: PolicyName | undefined): WhatIf[] {
  const out: WhatIf[] = [];
  const speedup = (tps: number) => tps / plan.tokensPerSecond - 1;
  const pct = (x: number) => `${x >= 0 ? '+' : '−'}${Math.abs(x * 100).toFixed(1)} % tokens/s`;
  // Another network: the placement does not depend on it (capacity and per-layer time do), so
  // only the links' time changes.
  const links = plan.stages.length - 1;
  if (links > 0) {
    for (const net of Object.values(NETWORK_PRESETS)) {
      if (net.name === cluster.network.name) continue;
      const stepMs = plan.stepMs - plan.networkMsPerToken + links * networkMs(net, plan.activationBytes);
      const s = speedup(workload.batch / (stepMs / 1000));
      out.push({ change: `network ${cluster.network.name} → ${net.name}`, effect: `${(stepMs - plan.stepMs >= 0 ? '+' : '−')}${Math.abs(stepMs - plan.stepMs).toFixed(3)} ms per token, ${pct(s)}`, speedup: s });
    }
  }
  const replan = (hosts: ClusterProfile['hosts'], change: string): void => {
    try {
      const p = planCluster(model, { ...cluster, hosts, name: change }, workload, policy);
      const s = speedup(p.tokensPerSecond);
      out.push({ change, effect: `${p.stages.length} stage${p.stages.length === 1 ? '' : 's'}, ${p.tokensPerSecond.toFixed(1)} tokens/s (${pct(s)})`, speedup: s });
    } catch (e) {
      out.push({ change, effect: `does not fit: ${(e as Error).message}`, speedup: -1 });
    }
  };
  const last = cluster.hosts[cluster.hosts.length - 1]!;
  if (cluster.hosts.length > 1) replan(cluster.hosts.slice(0, -1), `without the last host (${last.name})`);
  replan([...cluster.hosts, last], `one more host like the last (${last.name})`);
  return out;
}

/** The pipeline over the prefill and the first decode tokens, a lane per host and per link. */
export function clusterSimulateRequest(params: PlanParams & { trace?: boolean }): ClusterSimulateResult {
  const { plan, model } = clusterRequest(params);
  const tokens = Math.min(plan.stages[0]!.plan.workload.gen, SIMULATED_TOKENS);
  const { events, ...timeline } = simulateCluster(plan, model.nEmbd, tokens);
  return { plan, simulation: { ...timeline, tokens }, ...(params.trace ? { trace: { traceEvents: events, displayTimeUnit: 'ms' } } : {}) };
}
