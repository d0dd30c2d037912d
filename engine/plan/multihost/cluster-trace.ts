// Multi-host pipeline timeline (issue 27): one lane per host and one per network link, for the
// prefill and the first decode tokens of a ClusterPlan, as Chrome trace events (Perfetto).
//
// Decision: one request at a time passes the stages in order (batch as planned), so hosts wait
// for each other; each host's stage time is its own single-host plan's simulated step, and each
// link carries the activations of the step (prefill: prompt × nEmbd × 2 bytes; decode: nEmbd × 2 × batch).

import { networkMs } from '../../hardware/cluster';
import type { ClusterPlan } from './pipeline';
import type { TraceEvent } from '../sim-types';

export interface ClusterTimeline {
  prefillMs: number;
  decodeStepMs: number;
  /** Prefill plus `tokens` decode steps, ms. */
  totalMs: number;
  /** Busy time per lane ("host 0", "link 0→1", …) over the timeline, ms. */
  busy: Record<string, number>;
  events: TraceEvent[];
}

export function simulateCluster(cp: ClusterPlan, nEmbd: number, tokens: number): ClusterTimeline {
  const events: TraceEvent[] = [];
  const busy: Record<string, number> = {};
  const hostTid = (i: number) => i * 2 + 1;
  const linkTid = (i: number) => i * 2 + 2;
  cp.stages.forEach((s, i) => {
    events.push({ name: 'thread_name', ph: 'M', ts: 0, pid: 1, tid: hostTid(i), args: { name: `host ${s.host} (${s.hardware}) layers ${s.firstLayer}–${s.endLayer - 1}` } });
    if (i + 1 < cp.stages.length) events.push({ name: 'thread_name', ph: 'M', ts: 0, pid: 1, tid: linkTid(i), args: { name: `link ${s.host}→${cp.stages[i + 1]!.host} (${cp.network.name})` } });
  });
  let t = 0;
  const span = (name: string, tid: number, lane: string, ms: number): void => {
    events.push({ name, cat: lane.startsWith('link') ? 'network' : 'host', ph: 'X', ts: t * 1000, dur: ms * 1000, pid: 1, tid });
    busy[lane] = (busy[lane] ?? 0) + ms;
    t += ms;
  };
  const w = cp.stages[0]!.plan.workload;
  const step = (label: string, hostMs: (i: number) => number, bytes: number): number => {
    const start = t;
    cp.stages.forEach((s, i) => {
      span(`${label} L${s.firstLayer}–${s.endLayer - 1}`, hostTid(i), `host ${s.host}`, hostMs(i));
      if (i + 1 < cp.stages.length) span(`${label} activations ${bytes} B`, linkTid(i), `link ${s.host}→${cp.stages[i + 1]!.host}`, networkMs(cp.network, bytes));
    });
    return t - start;
  };
  const prefillMs = step('prefill', (i) => cp.stages[i]!.plan.stages.prefill.predicted.stepMs, w.prompt * nEmbd * 2 * w.batch);
  let decodeStepMs = 0;
  for (let k = 0; k < tokens; k++) decodeStepMs = step(`token ${k + 1}`, (i) => cp.stages[i]!.stepMs, nEmbd * 2 * w.batch);
  return { prefillMs, decodeStepMs, totalMs: t, busy, events };
}
