// The discrete-event core: tasks on lanes (CPU, GPU, host→device, device→host, NVMe). A lane runs
// one task at a time, in task-id order (FIFO, like a CUDA stream or a worker thread); a task
// starts when its lane is free and its dependencies have finished (+ its hand-off delay).
// Builders emit tasks in an order where every dependency has a smaller id, so one pass in id
// order is an exact event simulation of this model.

import type { Lane, LaneTimes } from '../types';
import type { SimEvent, SimResult, SimTask } from '../sim-types';

export const LANES: Lane[] = ['cpu', 'gpu', 'h2d', 'd2h', 'nvme'];

export function simulateTasks(tasks: SimTask[]): SimResult {
  const free: LaneTimes = { cpu: 0, gpu: 0, h2d: 0, d2h: 0, nvme: 0 };
  const busy: LaneTimes = { cpu: 0, gpu: 0, h2d: 0, d2h: 0, nvme: 0 };
  const end = new Map<number, number>();
  const events: SimEvent[] = [];
  let lastId = -Infinity;
  let makespan = 0;
  for (const t of tasks) {
    if (t.id <= lastId) throw new Error(`simulator: task ids must increase (task ${t.id} after ${lastId})`);
    lastId = t.id;
    if (!(t.durationMs >= 0) || !Number.isFinite(t.durationMs)) throw new Error(`simulator: task ${t.id} (${t.name}) has duration ${t.durationMs}`);
    let ready = 0;
    for (const d of t.deps) {
      const e = end.get(d);
      if (e === undefined) throw new Error(`simulator: task ${t.id} (${t.name}) depends on ${d}, which is not an earlier task`);
      if (e > ready) ready = e;
    }
    if (t.deps.length) ready += t.delayMs ?? 0;
    const start = Math.max(ready, free[t.lane]);
    const finish = start + t.durationMs;
    free[t.lane] = finish;
    busy[t.lane] += t.durationMs;
    end.set(t.id, finish);
    if (finish > makespan) makespan = finish;
    const ev: SimEvent = { task: t.id, lane: t.lane, name: t.name, startMs: start, endMs: finish, stage: t.stage };
    if (t.layer !== undefined) ev.layer = t.layer;
    if (t.op !== undefined) ev.op = t.op;
    if (t.subBatch !== undefined) ev.subBatch = t.subBatch;
    if (t.category !== undefined) ev.category = t.category;
    events.push(ev);
  }
  const utilization: LaneTimes = { cpu: 0, gpu: 0, h2d: 0, d2h: 0, nvme: 0 };
  let bottleneck: Lane = 'cpu';
  for (const l of LANES) {
    utilization[l] = makespan > 0 ? busy[l] / makespan : 0;
    if (busy[l] > busy[bottleneck]) bottleneck = l;
  }
  return { totalMs: makespan, busy, utilization, bottleneck, events };
}
