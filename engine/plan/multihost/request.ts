// The multi-host request: `--hardware` given as a cluster spec (e.g. 2x(rtx4090+ryzen9-7950x)@10GbE)
// or a cluster file (engine/hardware/cluster-file.ts) turns plan/explain/simulate into a pipeline
// plan over hosts (pipeline.ts); shared by the CLI commands and the LSP planner.

import { isClusterSpec, parseClusterSpec, type ClusterProfile } from '../../hardware/cluster';
import { isClusterFile, readClusterFile } from '../../hardware/cluster-file';
import type { ModelShape } from '../../model/shape';
import { parseWorkload, resolveHardware, resolveModel, type PlanParams } from '../api';
import type { PolicyName } from '../types';
import { planCluster, type ClusterPlan } from './pipeline';

export interface ClusterRequestResult { plan: ClusterPlan; model: ModelShape }

/** Whether a --hardware value describes several hosts (a cluster spec or a cluster file). */
export function isClusterHardware(hardware: unknown): hardware is string {
  return typeof hardware === 'string' && (isClusterFile(hardware) || isClusterSpec(hardware));
}

export function loadCluster(spec: string): ClusterProfile {
  return isClusterFile(spec) ? readClusterFile(spec) : parseClusterSpec(spec, resolveHardware);
}

export function clusterRequest(params: PlanParams): ClusterRequestResult {
  if (typeof params.hardware !== 'string') throw new Error('cluster request: hardware must be a cluster spec or a cluster file');
  if (params.costs !== undefined) throw new Error('--costs: a measured cost table describes one machine; a multi-host plan uses the cost model');
  const model = resolveModel(params.model);
  const cluster = loadCluster(params.hardware);
  const workload = typeof params.workload === 'string' ? parseWorkload(params.workload) : params.workload ?? parseWorkload('');
  const policy = params.policy && params.policy !== 'auto' ? params.policy as PolicyName : undefined;
  return { plan: planCluster(model, cluster, workload, policy), model };
}
