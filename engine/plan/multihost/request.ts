// The multi-host request: `--hardware` given as a cluster spec (e.g. 2x(rtx4090+ryzen9-7950x)@10GbE)
// turns plan/explain into a pipeline plan over hosts (pipeline.ts); shared by the CLI commands.

import { parseClusterSpec } from '../../hardware/cluster';
import type { ModelShape } from '../../model/shape';
import { parseWorkload, resolveHardware, resolveModel, type PlanParams } from '../api';
import type { PolicyName } from '../types';
import { planCluster, type ClusterPlan } from './pipeline';

export interface ClusterRequestResult { plan: ClusterPlan; model: ModelShape }

export function clusterRequest(params: PlanParams): ClusterRequestResult {
  if (typeof params.hardware !== 'string') throw new Error('cluster request: hardware must be a cluster spec string');
  if (params.costs !== undefined) throw new Error('--costs: a measured cost table describes one machine; a multi-host plan uses the cost model');
  const model = resolveModel(params.model);
  const cluster = parseClusterSpec(params.hardware, resolveHardware);
  const workload = typeof params.workload === 'string' ? parseWorkload(params.workload) : params.workload ?? parseWorkload('');
  const policy = params.policy && params.policy !== 'auto' ? params.policy as PolicyName : undefined;
  return { plan: planCluster(model, cluster, workload, policy), model };
}
