// Builds the simulator task graph of one step of a plan stage from its op placement:
// - ops run in order within a sequence (data dependencies); a CPU↔GPU boundary adds the
//   activation hand-off (link latency + activation bytes) as a delay on the dependency.
//   Decision: hand-offs are delays, not h2d/d2h lane tasks — they are small and go on their own
//   stream, so queueing them behind multi-MB weight copies would invent stalls;
// - streamed weights and KV go over h2d (or NVMe → GPU), issued one layer ahead: layer k+1's
//   transfers are queued when layer k starts and may begin once layer k−1 has finished.
//   Decision: two layer buffers (double buffering, as paper 000, KVPR and LIA use), so prefetch
//   depth is one layer;
// - sub-batches (multi-batch zig-zag): weights are transferred once per layer and reused, KV and
//   computations are per sub-batch;
// - a 'split' op runs its CPU and GPU parts concurrently; KV written back to the host goes over d2h.

import type { OpWork } from '../cost/types';
import type { PlanContext } from '../plan/policy';
import type { LayerPlan, OpPlan, PlanStage } from '../plan/types';
import type { SimTask } from './types';

interface Builder { tasks: SimTask[]; next: number }

/**
 * Appends a task. Every task gets the same object shape (V8 keeps one hidden class; object
 * spreads with optional fields made graph building ~10× slower).
 */
function add(b: Builder, stage: 'prefill' | 'decode', lane: SimTask['lane'], name: string, durationMs: number, deps: number[],
  layer: number | undefined, op: string | undefined, subBatch: number | undefined, category: string, delayMs = 0): number {
  const id = b.next++;
  const t: SimTask = { id, lane, name, durationMs, deps, stage, layer, op, subBatch, category, delayMs };
  b.tasks.push(t);
  return id;
}

function handoffDelay(ctx: PlanContext, work: OpWork[] | undefined, op: OpPlan, j: number): number {
  if (!ctx.hardware.link) return 0;
  const w = work && work[j]?.name === op.name ? work[j] : undefined;
  return ctx.cost.transferMs(Math.max(w?.actInBytes ?? 0, 1), 'h2d');
}

const CPU_SET: ReadonlySet<'cpu' | 'gpu'> = new Set(['cpu']);
const GPU_SET: ReadonlySet<'cpu' | 'gpu'> = new Set(['gpu']);
const BOTH_SET: ReadonlySet<'cpu' | 'gpu'> = new Set(['cpu', 'gpu']);
function devicesOf(op: OpPlan): ReadonlySet<'cpu' | 'gpu'> {
  return op.device === 'split' ? BOTH_SET : op.device === 'cpu' ? CPU_SET : GPU_SET;
}

/** Transfers of one layer (weights once; per-sub-batch data for each sub-batch). Returns op → task ids. */
function issueTransfers(b: Builder, stage: PlanStage, layer: LayerPlan, nb: number, gate: number[]): Map<string, number[]> {
  const byOp = new Map<string, number[]>();
  const order = layer.weightOrder
    ? [...layer.ops].sort((x, y) => rank(layer.weightOrder!, x.name) - rank(layer.weightOrder!, y.name))
    : layer.ops;
  for (const op of order) {
    const p = op.predictedMs;
    const ids: number[] = [];
    const data = p.h2dKv ?? 0;
    const weights = Math.max(0, (p.h2d ?? 0) - data);
    const L = layer.index;
    if (weights > 0) ids.push(add(b, stage.name, 'h2d', `L${L} W:${op.name}`, weights, gate, L, op.name, undefined, 'weights'));
    if ((p.s2d ?? 0) > 0) ids.push(add(b, stage.name, 'nvme', `L${L} S2D:${op.name}`, p.s2d!, gate, L, op.name, undefined, 'weights'));
    for (let s = 0; s < nb && data > 0; s++) {
      ids.push(add(b, stage.name, 'h2d', nb > 1 ? `L${L} KV:${op.name} b${s}` : `L${L} KV:${op.name}`, data, gate, L, op.name, nb > 1 ? s : undefined, 'kv'));
    }
    if ((p.dc ?? 0) > 0 && ids.length) ids.push(add(b, stage.name, 'gpu', `L${L} DC:${op.name}`, p.dc!, [...ids], L, op.name, undefined, 'decompress'));
    if (ids.length) byOp.set(op.name, ids);
  }
  return byOp;
}

function rank(order: string[], name: string): number {
  const i = order.indexOf(name);
  return i < 0 ? order.length : i;
}

/** The task graph of one step of `stage`. */
export function stageTasks(ctx: PlanContext, stage: PlanStage, startId = 0): SimTask[] {
  const b: Builder = { tasks: [], next: startId };
  const nb = Math.max(1, stage.subBatches?.length ?? 1);
  const step = { batch: stage.batch, newTokens: stage.newTokens, context: stage.context };
  const work = ctx.cost.measured && stage.name === 'decode' ? undefined : ctx.cost.layerWork(step);
  const layers = stage.layers;
  // Per sub-batch: the task ids that the next op depends on, and the device they ran on.
  let prev: { ids: number[]; devices: ReadonlySet<'cpu' | 'gpu'> }[] = Array.from({ length: nb }, () => ({ ids: [], devices: new Set() }));
  const layerEnd: number[][] = [];
  const pending = new Map<number, Map<string, number[]>>();
  const transfersFor = (k: number): Map<string, number[]> => {
    let m = pending.get(k);
    if (!m) {
      const gate = k >= 2 ? layerEnd[k - 2] ?? [] : [];
      m = issueTransfers(b, stage, layers[k]!, nb, gate);
      pending.set(k, m);
    }
    return m;
  };
  for (let k = 0; k < layers.length; k++) {
    const layer = layers[k]!;
    const mine = transfersFor(k);
    if (k + 1 < layers.length) {
      // Prefetch: the next layer's transfers may start once layer k−1 is done (two buffers).
      transfersFor(k + 1);
    }
    for (let s = 0; s < nb; s++) {
      for (let j = 0; j < layer.ops.length; j++) {
        const op = layer.ops[j]!;
        const p = op.predictedMs;
        const devs = devicesOf(op);
        const deps = [...prev[s]!.ids];
        const t = mine.get(op.name);
        if (t) {
          // weights (first entries) plus this sub-batch's data
          for (const id of t) {
            const task = b.tasks[id - startId]!;
            if (task.subBatch === undefined || task.subBatch === s) deps.push(id);
          }
        }
        const crosses = prev[s]!.ids.length > 0 && [...devs].some((d) => !prev[s]!.devices.has(d));
        const delay = crosses ? handoffDelay(ctx, work, op, j) : 0;
        const ids: number[] = [];
        const sb = nb > 1 ? s : undefined;
        const label = `L${layer.index} ${op.name}`;
        if (devs.has('gpu')) ids.push(add(b, stage.name, 'gpu', label, p.gpu ?? 0, deps, layer.index, op.name, sb, 'compute', delay));
        if (devs.has('cpu')) ids.push(add(b, stage.name, 'cpu', label, p.cpu ?? 0, deps, layer.index, op.name, sb, 'compute', delay));
        if ((p.d2h ?? 0) > 0) add(b, stage.name, 'd2h', `L${layer.index} KV↓:${op.name}`, p.d2h!, ids.slice(), layer.index, op.name, sb, 'kv');
        prev[s] = { ids, devices: devs };
      }
    }
    layerEnd[k] = prev.flatMap((p) => p.ids);
  }
  // LM head after the last layer, per sub-batch.
  const h = stage.head;
  const hDevs = devicesOf(h);
  prev = prev.map((p, s) => {
    const deps = [...p.ids];
    if ((h.predictedMs.h2d ?? 0) > 0) deps.push(add(b, stage.name, 'h2d', `W:${h.name}`, h.predictedMs.h2d!, [], undefined, h.name, undefined, 'weights'));
    const ids: number[] = [];
    const crosses = [...hDevs].some((d) => !p.devices.has(d));
    const delay = crosses ? handoffDelay(ctx, undefined, h, 0) : 0;
    const sb = nb > 1 ? s : undefined;
    if (hDevs.has('gpu')) ids.push(add(b, stage.name, 'gpu', h.name, h.predictedMs.gpu ?? 0, deps, undefined, h.name, sb, 'compute', delay));
    if (hDevs.has('cpu')) ids.push(add(b, stage.name, 'cpu', h.name, h.predictedMs.cpu ?? 0, deps, undefined, h.name, sb, 'compute', delay));
    return { ids, devices: hDevs };
  });
  return b.tasks;
}
