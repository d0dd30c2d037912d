// The planner's worker thread: answers plan / explain / simulate jobs with the same request API
// the CLI uses (engine/plan/api.ts). Planning is synchronous CPU work (an explain is several
// re-plans); running it here keeps the LSP event loop free for completions.
import { parentPort } from 'node:worker_threads';
import { explainRequest, planRequest, simulateRequest } from '../../plan/api';
import { clusterExplainRequest, clusterRequest, clusterSimulateRequest, isClusterHardware } from '../../plan/multihost/request';
import type { PlannerJob, PlannerReply } from './messages';

if (!parentPort) throw new Error('plan-worker.ts must run as a worker thread');
const port = parentPort;

port.on('message', (job: PlannerJob) => {
  const start = performance.now();
  let reply: PlannerReply;
  try {
    // Several hosts (a cluster spec or file): the pipeline plan (engine/plan/multihost).
    const cluster = isClusterHardware(job.params.hardware);
    const result = job.method === 'plan' ? (cluster ? clusterRequest(job.params).plan : planRequest(job.params))
      : job.method === 'explain' ? (cluster ? clusterExplainRequest(job.params) : explainRequest(job.params))
        : cluster ? clusterSimulateRequest(job.params) : simulateRequest(job.params);
    reply = { id: job.id, ok: true, result, ms: performance.now() - start };
  } catch (err) {
    reply = { id: job.id, ok: false, message: err instanceof Error ? err.message : String(err) };
  }
  port.postMessage(reply);
});
