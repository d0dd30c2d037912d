// Builds the simulator task graph of one step of a plan stage from its op placement:
// - ops run in order within a sequence (data dependencies); a CPU↔GPU boundary adds the
//   activation hand-off (link latency + activation bytes) as a delay on the dependency.
//   Decision: hand-offs are delays, not h2d/d2h lane tasks — they are small and go on their own
//   stream, so queueing them behind multi-MB weight copies would invent stalls;
// - streamed weights and KV go over h2d (or NVMe → GPU), issued one layer ahead: layer k+1's
//   transfers are queued when layer k starts and may begin once layer k−1 has finished.
//   Decision: two layer buffers (double buffering, as paper 000, KVPR and LIA use), so prefetch
//   depth is one layer;
// - sub-batches (multi-batch zig-zag, paper 000 §3.2, Fig. 7b): weights are transferred once per
//   layer and reused, KV and computations are per sub-batch. A layer is emitted segment by segment
//   (a segment: consecutive ops on the same device), each segment for every sub-batch before the
//   next segment, so the CPU runs batch 1's prefix while the GPU runs batch 0's middle. Only one
//   batch's KV is on the GPU at a time (§3.2): batch s's KV for an op is sent after batch s−1's
//   GPU run of that op, which gives Eq. 14's serial chain ΣH + (n−1)(ΣG + KV) on the H2D lane;
//   the next layer's transfers queue behind this layer's last KV (FIFO lane);
// - a 'split' op runs its CPU and GPU parts concurrently; KV written back to the host goes over d2h.

import type { OpWork } from '../../cost/types';
import type { PlanContext } from '../policy';
import type { LayerPlan, OpPlan, PlanStage } from '../types';
import type { SimTask } from '../sim-types';

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

/**
 * Transfers of one layer (weights once; per-sub-batch data for the first `kvBatches` sub-batches;
 * the rest are issued by `issueKv` once the GPU buffer is free). Returns op → task ids.
 */
function issueTransfers(b: Builder, stage: PlanStage, layer: LayerPlan, nb: number, gate: number[], kvBatches = nb): Map<string, number[]> {
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
    for (let s = 0; s < kvBatches && data > 0; s++) ids.push(issueKv(b, stage, L, op, nb, s, gate));
    if ((p.dc ?? 0) > 0 && ids.length) ids.push(add(b, stage.name, 'gpu', `L${L} DC:${op.name}`, p.dc!, [...ids], L, op.name, undefined, 'decompress'));
    if (ids.length) byOp.set(op.name, ids);
  }
  return byOp;
}

/** One sub-batch's KV of one op over H2D. */
function issueKv(b: Builder, stage: PlanStage, L: number, op: OpPlan, nb: number, s: number, deps: number[]): number {
  return add(b, stage.name, 'h2d', nb > 1 ? `L${L} KV:${op.name} b${s}` : `L${L} KV:${op.name}`, op.predictedMs.h2dKv ?? 0, deps, L, op.name, nb > 1 ? s : undefined, 'kv');
}

/** [start, end) ranges of consecutive ops that run on the same device(s). */
function segmentsOf(ops: OpPlan[]): [number, number][] {
  const out: [number, number][] = [];
  for (let j = 0; j < ops.length; j++) {
    const last = out[out.length - 1];
    if (last && devicesOf(ops[j - 1]!) === devicesOf(ops[j]!)) last[1] = j + 1;
    else out.push([j, j + 1]);
  }
  return out;
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
  const gateOf = (k: number): number[] => (k >= 2 ? layerEnd[k - 2] ?? [] : []);
  const transfersFor = (k: number): Map<string, number[]> => {
    let m = pending.get(k);
    if (!m) {
      // Multi-batch: only batch 0's KV now; later batches' KV waits for the GPU buffer (below).
      m = issueTransfers(b, stage, layers[k]!, nb, gateOf(k), nb > 1 ? 1 : nb);
      pending.set(k, m);
    }
    return m;
  };
  for (let k = 0; k < layers.length; k++) {
    const layer = layers[k]!;
    const mine = transfersFor(k);
    // Prefetch: the next layer's transfers may start once layer k−1 is done (two buffers). With
    // sub-batches they are issued after this layer's tasks, so on the FIFO H2D lane they queue
    // behind this layer's later-batch KV instead of holding it back a whole layer.
    if (nb === 1 && k + 1 < layers.length) transfersFor(k + 1);
    // The GPU task of (previous sub-batch, op): batch s's KV for op may load once it has run.
    const gpuRunOf = new Map<string, number>();
    const segments = nb > 1 ? segmentsOf(layer.ops) : [[0, layer.ops.length] as [number, number]];
    for (const [from, to] of segments) {
      for (let s = 0; s < nb; s++) {
        for (let j = from; j < to; j++) {
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
          if (s > 0 && (p.h2dKv ?? 0) > 0) {
            const freed = gpuRunOf.get(op.name);
            deps.push(issueKv(b, stage, layer.index, op, nb, s, freed === undefined ? gateOf(k) : [...gateOf(k), freed]));
          }
          const crosses = prev[s]!.ids.length > 0 && [...devs].some((d) => !prev[s]!.devices.has(d));
          const delay = crosses ? handoffDelay(ctx, work, op, j) : 0;
          const ids: number[] = [];
          const sb = nb > 1 ? s : undefined;
          const label = `L${layer.index} ${op.name}`;
          if (devs.has('gpu')) {
            const g = add(b, stage.name, 'gpu', label, p.gpu ?? 0, deps, layer.index, op.name, sb, 'compute', delay);
            ids.push(g);
            gpuRunOf.set(op.name, g);
          }
          if (devs.has('cpu')) ids.push(add(b, stage.name, 'cpu', label, p.cpu ?? 0, deps, layer.index, op.name, sb, 'compute', delay));
          if ((p.d2h ?? 0) > 0) add(b, stage.name, 'd2h', `L${layer.index} KV↓:${op.name}`, p.d2h!, ids.slice(), layer.index, op.name, sb, 'kv');
          prev[s] = { ids, devices: devs };
        }
      }
    }
    layerEnd[k] = prev.flatMap((p) => p.ids);
    if (nb > 1 && k + 1 < layers.length) transfersFor(k + 1);
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
