// The measured side: native per-op timings of executed steps, as the same Chrome trace-event
// JSON the simulator writes (one process per step, one thread per lane: CPU, GPU, host→device,
// device→host), and per layer and per plan op, so each measured op joins its predicted op.
import type { TraceEvent } from '../plan/sim-types';
import type { NativeCompiledOp } from '../native/model';

const LANE_TID: Record<NativeCompiledOp['lane'], number> = { cpu: 1, device: 2, h2d: 3, d2h: 4 };
const LANE_NAME: Record<NativeCompiledOp['lane'], string> = { cpu: 'CPU', device: 'GPU', h2d: 'host→device', d2h: 'device→host' };

export interface MeasuredOp {
  step: number;
  op: number;
  startMs: number;
  endMs: number;
}

/** Something that happened between steps (a re-plan), placed on the trace's time axis. */
export interface TraceMark {
  name: string;
  /** 'replan' (default) or 'online' (a NEO/APEX iteration's decision). */
  cat?: string;
  /** ms from the trace's first op start (may be before it or after the last op). */
  atMs: number;
  /** The first traced step that started at or after it (the last step when none did). */
  step: number;
  args: Record<string, unknown>;
}

export interface MeasuredTrace {
  ops: NativeCompiledOp[];
  /**
   * Where each compiled op list starts in `ops` (a stage of one placement; an op's deps index
   * into its own list). Lists of earlier placements come first.
   */
  listStarts: number[];
  events: MeasuredOp[];
  marks?: TraceMark[];
}

/** A mark's time on the native trace's clock (ns; see ReplanEvent.atNs). */
export interface RawMark { name: string; atNs: number; args: Record<string, unknown>; cat?: string }

/**
 * Native [step, op, startNs, endNs] quadruples as events in ms from the first op's start. Parts
 * recorded under different placements (a re-plan compiles a new op list) each come with their
 * own ops; their op indices are offset into one list.
 */
export function measuredTrace(ops: NativeCompiledOp[], raw: Float64Array, marks: RawMark[] = [], earlier: { ops: NativeCompiledOp[]; raw: Float64Array }[] = []): MeasuredTrace {
  const parts = [...earlier, { ops, raw }];
  const allOps: NativeCompiledOp[] = [];
  const listStarts: number[] = [];
  const events: MeasuredOp[] = [];
  let t0 = Infinity;
  for (const p of parts) for (let i = 0; i < p.raw.length; i += 4) t0 = Math.min(t0, p.raw[i + 2]!);
  for (const p of parts) {
    const base = allOps.length;
    p.ops.forEach((op, i) => { if (i === 0 || p.ops[i - 1]!.stage !== op.stage) listStarts.push(base + i); });
    allOps.push(...p.ops);
    for (let i = 0; i < p.raw.length; i += 4) {
      events.push({ step: p.raw[i]!, op: base + p.raw[i + 1]!, startMs: (p.raw[i + 2]! - t0) / 1e6, endMs: (p.raw[i + 3]! - t0) / 1e6 });
    }
  }
  const out: MeasuredTrace = { ops: allOps, listStarts, events };
  if (marks.length && events.length) {
    // Each step's start, to place a mark in the step it precedes.
    const starts = new Map<number, number>();
    for (const e of events) starts.set(e.step, Math.min(starts.get(e.step) ?? Infinity, e.startMs));
    const steps = [...starts.entries()].sort((a, b) => a[0] - b[0]);
    out.marks = marks.map((m) => {
      const atMs = (m.atNs - t0) / 1e6;
      const next = steps.find(([, start]) => start >= atMs) ?? steps[steps.length - 1]!;
      return { name: m.name, atMs, step: next[0], args: m.args, ...(m.cat ? { cat: m.cat } : {}) };
    });
  }
  return out;
}

/** Chrome trace of the measured steps; `label(step)` names each step's process (e.g. 'decode step 3'). */
export function measuredChromeTrace(t: MeasuredTrace, label: (step: number) => string, meta: Record<string, unknown> = {}): { traceEvents: TraceEvent[]; displayTimeUnit: 'ms'; otherData: Record<string, unknown> } {
  const out: TraceEvent[] = [];
  const steps = [...new Set(t.events.map((e) => e.step))].sort((a, b) => a - b);
  const first = steps[0] ?? 0;
  for (const s of steps) {
    const pid = s - first + 1;
    // Which of the plan's placements the step ran (prompt steps may run the prefill one; NEO's
    // two-batch steps the pipelined sub-batches; APEX's asynchronous overlap the layer-by-layer rows).
    const STAGE_LABEL: Record<string, string> = { prefill: ' (prefill placement)', pipelined: ' (pipelined sub-batches)', 'layer-by-layer': ' (layer-by-layer rows)' };
    const ran = t.events.find((e) => e.step === s && STAGE_LABEL[t.ops[e.op]?.stage ?? 'decode'] !== undefined);
    const stage = ran ? STAGE_LABEL[t.ops[ran.op]!.stage ?? 'decode']! : '';
    out.push({ name: 'process_name', ph: 'M', ts: 0, pid, tid: 0, args: { name: `${label(s)}${stage}` } });
    const lanes = new Set(t.events.filter((e) => e.step === s).map((e) => t.ops[e.op]!.lane));
    for (const l of lanes) out.push({ name: 'thread_name', ph: 'M', ts: 0, pid, tid: LANE_TID[l], args: { name: LANE_NAME[l] } });
  }
  // Re-plans (and other marks between steps) as global instant events: Perfetto draws a line
  // across every lane, and the timeline panel does too.
  // NEO/APEX iterations (issue 21 item 2): the decision as an instant event on the step it
  // precedes, and its attention placement and swaps as counters beside the measured ops.
  for (const m of t.marks ?? []) {
    if (!steps.includes(m.step)) continue;
    const ts = Math.round(m.atMs * 1e6) / 1e3, pid = m.step - first + 1;
    if (m.cat === 'online') {
      out.push({ name: m.name, cat: 'online', ph: 'i', s: 'p', ts, pid, tid: 0, args: m.args });
      const a = m.args as { deviceAttended?: number; cpuAttended?: number; swappedOut?: number; swappedIn?: number };
      out.push({ name: 'online attention', cat: 'online', ph: 'C', ts, pid, tid: 0, args: { device: a.deviceAttended ?? 0, cpu: a.cpuAttended ?? 0 } });
      out.push({ name: 'online swaps', cat: 'online', ph: 'C', ts, pid, tid: 0, args: { out: a.swappedOut ?? 0, in: a.swappedIn ?? 0 } });
      continue;
    }
    out.push({ name: m.name, cat: 'replan', ph: 'i', s: 'g', ts, pid, tid: 0, args: m.args });
  }
  for (const e of t.events) {
    const op = t.ops[e.op]!;
    const args: Record<string, unknown> = { kind: op.kind, op: op.planOp, loc: op.loc, placement: op.stage ?? 'decode' };
    if (op.layer >= 0) args.layer = op.layer;
    if (op.weight) args.weight = op.weight;
    if (op.batch !== undefined) args.subBatch = op.batch;
    out.push({
      name: op.layer >= 0 ? `${op.planOp} L${op.layer} ${op.kind}` : `${op.planOp} ${op.kind}`,
      cat: op.lane === 'h2d' || op.lane === 'd2h' ? 'transfer' : 'compute',
      ph: 'X', ts: Math.round(e.startMs * 1e6) / 1e3, dur: Math.max(0.001, Math.round((e.endMs - e.startMs) * 1e6) / 1e3),
      pid: e.step - first + 1, tid: LANE_TID[op.lane], args,
    });
  }
  return { traceEvents: out, displayTimeUnit: 'ms', otherData: { source: 'measured', ...meta } };
}

export interface StepBreakdown {
  /** Wall time of the step: first op start to last op end, ms. */
  stepMs: number;
  /** Busy time per lane, ms. */
  perLane: Record<NativeCompiledOp['lane'], number>;
  /**
   * Per layer: its share of the step's wall time — from the end of the previous layer's last
   * compute op (the step's start for layer 0) to the end of its own, ms. Copies that prefetch a
   * layer's weights while the layer before computes are overlap, not part of its time.
   */
  layerMs: number[];
  /** Per layer and plan op: busy ms summed over lanes (copies attributed to the op they feed). */
  opMs: Record<string, number>[];
  /** Time two or more lanes were busy at once, ms. */
  overlapMs: number;
}

/** What one step's measured events say, averaged over the given steps. */
export function stepBreakdown(t: MeasuredTrace, steps: number[], nLayers: number): StepBreakdown {
  const n = Math.max(1, steps.length);
  const perLane = { cpu: 0, device: 0, h2d: 0, d2h: 0 };
  const layerMs = new Array<number>(nLayers).fill(0);
  const opMs: Record<string, number>[] = Array.from({ length: nLayers + 1 }, () => ({}));
  let stepMs = 0, overlapMs = 0;
  for (const s of steps) {
    const ev = t.events.filter((e) => e.step === s && e.endMs > e.startMs);
    if (!ev.length) continue;
    stepMs += Math.max(...ev.map((e) => e.endMs)) - Math.min(...ev.map((e) => e.startMs));
    const last = new Array<number>(nLayers).fill(-Infinity);
    const stepStart = Math.min(...ev.map((e) => e.startMs));
    for (const e of ev) {
      const op = t.ops[e.op]!;
      const d = e.endMs - e.startMs;
      perLane[op.lane] += d;
      const li = op.layer >= 0 ? op.layer : nLayers;
      opMs[li]![op.planOp] = (opMs[li]![op.planOp] ?? 0) + d;
      if (op.layer >= 0 && (op.lane === 'cpu' || op.lane === 'device')) last[op.layer] = Math.max(last[op.layer]!, e.endMs);
    }
    let layerStart = stepStart;
    for (let l = 0; l < nLayers; l++) {
      if (last[l]! === -Infinity) continue;
      layerMs[l]! += Math.max(0, last[l]! - layerStart);
      layerStart = Math.max(layerStart, last[l]!);
    }
    // Overlap: sweep the busy intervals; time where ≥ 2 lanes are busy.
    const marks: [number, number][] = [];
    for (const e of ev) { marks.push([e.startMs, 1]); marks.push([e.endMs, -1]); }
    marks.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    let busy = 0, prev = 0;
    for (const [x, d] of marks) {
      if (busy >= 2) overlapMs += x - prev;
      busy += d;
      prev = x;
    }
  }
  for (const k of Object.keys(perLane) as (keyof typeof perLane)[]) perLane[k] /= n;
  return {
    stepMs: stepMs / n, perLane, layerMs: layerMs.map((v) => v / n),
    opMs: opMs.map((m) => Object.fromEntries(Object.entries(m).map(([k, v]) => [k, v / n]))), overlapMs: overlapMs / n,
  };
}

/** One step's measured busy time of one plan op of one layer on one lane, by native op kind. */
export interface PlanOpTime {
  /** -1 outside the layers (LM head, embed). */
  layer: number;
  planOp: string;
  lane: NativeCompiledOp['lane'];
  /** ms per native op kind (matmul, add_residual, copy_weight, …). */
  byKind: Record<string, number>;
  /**
   * Idle time of the lane just before each of this group's ops (since the lane's previous op of
   * the step ended), one entry per op: a thread hand-off, or a wait for another lane.
   */
  gapsMs: number[];
}

/** The measured events of `step`, summed per layer, plan op and lane: the join with the cost model's ops. */
export function planOpTimes(t: MeasuredTrace, step: number): PlanOpTime[] {
  const out = new Map<string, PlanOpTime>();
  const events = t.events.filter((e) => e.step === step).sort((a, b) => a.startMs - b.startMs);
  const laneEnd = new Map<string, number>();
  for (const e of events) {
    const op = t.ops[e.op]!;
    const key = `${op.layer}/${op.planOp}/${op.lane}`;
    let g = out.get(key);
    if (!g) { g = { layer: op.layer, planOp: op.planOp, lane: op.lane, byKind: {}, gapsMs: [] }; out.set(key, g); }
    g.byKind[op.kind] = (g.byKind[op.kind] ?? 0) + Math.max(0, e.endMs - e.startMs);
    const prev = laneEnd.get(op.lane);
    if (prev !== undefined) g.gapsMs.push(Math.max(0, e.startMs - prev));
    laneEnd.set(op.lane, Math.max(prev ?? -Infinity, e.endMs));
  }
  return [...out.values()];
}

/**
 * One measured time joined to the plan: `name` is the plan op it times, or — for a fused kernel
 * that executes several of the layer's plan ops (the op table's `covers`) — the native op's name
 * with `covers` listing the plan ops it spans. A fused kernel's time is one number: it is never
 * split among its parts (their shares were not measured).
 */
export interface MeasuredPlanOp {
  name: string;
  ms: number;
  covers?: string[];
}

/**
 * A layer's measured times in the plan's vocabulary, in the order of the plan's ops: each native
 * plan op that ran (`opMs`, by native name) joined to the plan ops it covers. Plan ops no native
 * op covers get no entry (nothing measured them).
 */
export function joinPlanOps(planOps: readonly string[], opMs: Readonly<Record<string, number>>, table: readonly { name: string; covers: readonly string[] }[]): MeasuredPlanOp[] {
  const out: MeasuredPlanOp[] = [];
  const done = new Set<string>();
  for (const name of planOps) {
    const native = table.find((t) => t.covers.includes(name));
    if (!native || done.has(native.name)) continue;
    done.add(native.name);
    const covered = planOps.filter((n) => native.covers.includes(n));
    const ms = opMs[native.name] ?? 0;
    out.push(covered.length === 1 ? { name: covered[0]!, ms } : { name: native.name, ms, covers: covered });
  }
  return out;
}
