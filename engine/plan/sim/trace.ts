// Chrome trace-event JSON (the "JSON Object Format" with traceEvents), which chrome://tracing and
// Perfetto (ui.perfetto.dev) open: one process per simulated stage, one thread per lane.

import type { Lane } from '../types';
import type { SimResult, TraceEvent } from '../sim-types';
import { LANES } from './engine';

const LANE_TID: Record<Lane, number> = { cpu: 1, gpu: 2, h2d: 3, d2h: 4, nvme: 5 };
const LANE_NAME: Record<Lane, string> = { cpu: 'CPU', gpu: 'GPU', h2d: 'host→device', d2h: 'device→host', nvme: 'NVMe→device' };

export interface TraceSection { name: string; result: SimResult; offsetMs?: number }

export function toChromeTrace(sections: TraceSection[], meta: Record<string, unknown> = {}): { traceEvents: TraceEvent[]; displayTimeUnit: 'ms'; otherData: Record<string, unknown> } {
  const events: TraceEvent[] = [];
  sections.forEach((sec, i) => {
    const pid = i + 1;
    events.push({ name: 'process_name', ph: 'M', ts: 0, pid, tid: 0, args: { name: sec.name } });
    for (const l of LANES) {
      if (sec.result.busy[l] > 0 || l === 'cpu' || l === 'gpu') events.push({ name: 'thread_name', ph: 'M', ts: 0, pid, tid: LANE_TID[l], args: { name: LANE_NAME[l] } });
    }
    const off = sec.offsetMs ?? 0;
    for (const e of sec.result.events) {
      if (e.endMs <= e.startMs) continue;
      const args: Record<string, unknown> = { stage: e.stage };
      if (e.layer !== undefined) args.layer = e.layer;
      if (e.op !== undefined) args.op = e.op;
      if (e.subBatch !== undefined) args.subBatch = e.subBatch;
      events.push({
        name: e.name, cat: e.category ?? 'compute', ph: 'X', ts: Math.round((off + e.startMs) * 1000 * 1000) / 1000,
        dur: Math.round((e.endMs - e.startMs) * 1000 * 1000) / 1000, pid, tid: LANE_TID[e.lane], args,
      });
    }
  });
  return { traceEvents: events, displayTimeUnit: 'ms', otherData: meta };
}
