// NEO and APEX deciding live: before every step of the continuous-batching scheduler, the plan's
// online decider (engine/plan/online/decider.ts — the one the simulator plays) sees the running
// requests mirrored as OnlineRequests and decides; this file executes the decision on the native
// model:
//   - where each request's KV lives, hence where its decode attention runs: layers placed by
//     sequence (kvBySequence) attend on the device over device KV and on the CPU over host KV,
//     both in the same step (native/src/model/compile.cc);
//   - NEO's asymmetric pipeline: a 'two-batch' decision runs its step pipelined (the native
//     model's `pipelined`): the step's device-KV rows (batch 0) and host-KV rows (batch 1) each run
//     every op of a layer over their own rows, skewed so that the CPU attends for batch 1 while
//     the device runs batch 0's linear ops and attention (paper 003 Sec. 4, Fig. 5); the executor's
//     hazard tracker orders them from per-sub-batch buffers. Other decisions run one step over all
//     rows (inside a layer, the device-KV and host-KV rows' attention still run at the same time).
//     Rows, tokens and KV are the same bits either way.
//   - swaps: a live request's KV moves host↔device between steps (native swapSequenceKv keeps
//     every position; it refuses, changing nothing, when the device is full);
//   - prefill admission: a request waits until the decider admits it, to the device's KV or to the
//     host's;
//   - which requests step this iteration: those in the decision's sub-batches. A CPU decode the
//     decider leaves out (it would not stay hidden behind the device's work, or the iteration is
//     GPU-only) waits for a later step.
//
// What the native executor cannot run, and what runs instead (no pretending):
//   - NEO's placement of a few CPU decodes in batch 0: the pipeline's sub-batches are by where
//     the KV lives (device-KV rows, host-KV rows), so a CPU decode the decider puts in batch 0
//     attends with batch 1's rows on the CPU; it still steps in this iteration.
//   - APEX's asynchronous overlap: a CPU request in the unified batch advances one decoder layer
//     per iteration (the native model's layer-by-layer step: its row runs that layer's linear
//     ops with the device's rows, its attention on the CPU over its host KV, and its residual
//     waits in the sequence for the next layer); its token is done, and sampled, at the last
//     layer. An iteration of another mode finishes a partly done token (its remaining layers in
//     one step), as the simulator counts it (loop.ts). The window is the paper's: the CPU's
//     attention of layer i starts once the row's K and V of layer i are stored and runs on its
//     own thread while the rest of the iteration goes on; the next iteration joins it before
//     layer i's output projection (native model/deferred_attention.h; NativeModel.
//     deferredAttention counts the attentions and how long joins waited). It runs on loopback and
//     on Vulkan (whose X lives in device memory: the layer edges copy it to the host and back).
//     Where the placement has no layer-by-layer program (streamed KV), such a request runs its
//     whole token in the step instead, and the mirror never carries partial layers.
import type { DeciderKind, IterationMode, OnlineDecider, OnlineQueues, SchedulerLimits } from '../../plan/online/decider';
import type { OnlineRequest } from '../../plan/neo/request';
import type { IterationPlan } from '../../plan/neo/scheduler';
import type { NativeLoc } from '../../native/model';

/**
 * The part of the native model the decisions drive: a sequence's KV between host and device, and
 * whether the next step runs NEO's two sub-batches as a pipeline.
 */
export interface KvMover {
  swapSequenceKv(seq: number, loc: NativeLoc): void;
  pipelined: boolean;
  /** The native model runs layer-by-layer rows under its placement (NativeModel.layerSteps). */
  readonly layerSteps?: boolean;
}

/** Decoder layers [layer, layer + layers) of a request's pending token, run in this step. */
export interface LayerRange {
  layer: number;
  layers: number;
}

/** A running request as the scheduler shows it to the decider. */
export interface LiveRequest {
  /** Identity across steps (the scheduler's own record of the request). */
  key: object;
  seq: number;
  promptTokens: number;
  generated: number;
  maxTokens: number;
  /** Its prompt is evaluated and a token is pending: the step decodes it (only then can it run part of the token). */
  decoding?: boolean;
}

/** One iteration's decision as executed: what the log and the trace show. */
export interface IterationRecord {
  iteration: number;
  mode: IterationMode;
  /** Requests stepped whose attention ran on the device / on the CPU (prefills counted by where their KV goes). */
  deviceAttended: number;
  cpuAttended: number;
  /** Requests admitted to prefill this iteration, to device KV / host KV. */
  admittedDevice: number;
  admittedHost: number;
  /** Sequences whose KV moved this iteration. */
  swappedOut: number[];
  swappedIn: number[];
  /** Swaps or admissions to the device the device refused (the request stayed on the host). */
  refused: number;
  /** Running requests that did not step (waiting for admission, or CPU decodes left out). */
  waiting: number;
  /** The decider's own estimate of the iteration, ms. */
  predictedMs: number;
  /** True when the decider scheduled nothing and the runtime stepped the oldest request anyway. */
  forced: boolean;
  /** Requests that ran part of their token's layers (asynchronous overlap), by sequence. */
  layerRows: ({ seq: number } & LayerRange)[];
}

export interface LiveStats {
  iterations: number;
  modes: Record<IterationMode, number>;
  deviceAttended: number;
  cpuAttended: number;
  swaps: number;
  refused: number;
}

export function emptyLiveStats(): LiveStats {
  return { iterations: 0, modes: { 'gpu-only': 0, 'two-batch': 0, 'async-overlap': 0 }, deviceAttended: 0, cpuAttended: 0, swaps: 0, refused: 0 };
}

/** Adds one executed iteration to `s`. */
export function countIteration(s: LiveStats, rec: IterationRecord): void {
  s.iterations++;
  s.modes[rec.mode]++;
  s.deviceAttended += rec.deviceAttended;
  s.cpuAttended += rec.cpuAttended;
  s.swaps += rec.swappedOut.length + rec.swappedIn.length;
  s.refused += rec.refused;
}

/** What one iteration's decision lets step, and its record. */
export interface LiveDecision {
  stepping: Set<number>;
  /** Sequences that run part of their token (asynchronous overlap), by sequence; absent: the whole token. */
  layers: Map<number, LayerRange>;
  record: IterationRecord;
}

export class LiveDecider {
  private readonly q: OnlineQueues = { waiting: [], gpu: [], cpu: [] };
  private readonly mirror = new Map<object, { r: OnlineRequest; seq: number }>();
  private nextId = 0;
  /** This decider's iterations (a re-plan's new decider starts again; the scheduler keeps the totals). */
  readonly stats: LiveStats = emptyLiveStats();

  /** `limits`: what the decider was built with (the simulator replays the same arrivals with them). */
  constructor(readonly kind: DeciderKind, private readonly decider: OnlineDecider, private readonly kv: KvMover, readonly limits: SchedulerLimits, private readonly onIteration?: (rec: IterationRecord) => void) {}

  /**
   * Decides one iteration over the running requests (admission order) and executes its KV moves;
   * returns the sequences that step now (at least one while any request runs) and the record.
   */
  decide(live: readonly LiveRequest[]): LiveDecision {
    this.reconcile(live);
    const plan = this.decider.schedule(this.q);
    // The step that follows runs the decision's two sub-batches pipelined (a step without rows on
    // both sides runs as one sub-batch anyway).
    this.kv.pipelined = plan.mode === 'two-batch';
    const seqOf = (r: OnlineRequest) => this.seqOf(r);
    let refused = 0;
    const swappedOut: number[] = [], swappedIn: number[] = [];
    for (const r of plan.swapOut) { this.kv.swapSequenceKv(seqOf(r), 'host'); swappedOut.push(seqOf(r)); }
    for (const r of plan.swapIn) {
      if (this.moveToDevice(r)) swappedIn.push(seqOf(r)); else refused++;
    }
    const stepping = new Set<number>();
    let deviceAttended = 0, cpuAttended = 0, admittedDevice = 0, admittedHost = 0;
    for (const b of plan.batches) {
      for (const r of b.gpuPrefills) {
        // A reused prefix of the slot's last request moves with it (swapSequenceKv keeps positions).
        if (this.moveToDevice(r)) { admittedDevice++; deviceAttended++; } else { refused++; admittedHost++; cpuAttended++; }
        stepping.add(seqOf(r));
      }
      for (const r of b.cpuPrefills) {
        this.kv.swapSequenceKv(seqOf(r), 'host');
        admittedHost++; cpuAttended++;
        stepping.add(seqOf(r));
      }
      for (const r of b.gpuDecodes) { stepping.add(seqOf(r)); if (r.where === 'gpu') deviceAttended++; else cpuAttended++; }
      for (const r of b.cpuDecodes) { stepping.add(seqOf(r)); cpuAttended++; }
    }
    let forced = false;
    if (stepping.size === 0 && live.length > 0) {
      // Decision: the decider found nothing to run (a prompt that fits neither KV pool by its
      // limits); a running request must still finish, so the oldest one steps where its KV is.
      const oldest = this.mirror.get(live[0]!.key)!;
      if (oldest.r.where === 'waiting') {
        oldest.r.where = 'cpu';
        this.q.waiting = this.q.waiting.filter((x) => x !== oldest.r);
        this.q.cpu.push(oldest.r);
        this.kv.swapSequenceKv(oldest.seq, 'host');
      }
      stepping.add(oldest.seq);
      if (oldest.r.where === 'gpu') deviceAttended++; else cpuAttended++;
      forced = true;
    }
    // After the fallback: a forced request part-way through a token finishes its layers too.
    const layers = this.layerRanges(plan, stepping, new Set(live.filter((l) => l.decoding).map((l) => l.seq)));
    const rec: IterationRecord = {
      iteration: this.stats.iterations + 1, mode: plan.mode, deviceAttended, cpuAttended, admittedDevice, admittedHost, swappedOut, swappedIn, refused,
      waiting: live.length - stepping.size, predictedMs: plan.predicted.iterationMs, forced,
      layerRows: [...layers].map(([seq, r]) => ({ seq, ...r })),
    };
    countIteration(this.stats, rec);
    this.onIteration?.(rec);
    return { stepping, layers, record: rec };
  }

  /**
   * The layers each stepping request's token runs, and the mirror's count of layers done after
   * this step (as the simulator's loop counts them): an asynchronous-overlap iteration advances
   * its CPU decodes one layer; any iteration finishes a partly done token (its remaining layers).
   * Empty where the native model has no layer-by-layer program: every token then runs whole.
   */
  private layerRanges(plan: IterationPlan, stepping: Set<number>, decoding: Set<number>): Map<number, LayerRange> {
    const out = new Map<number, LayerRange>();
    const L = this.limits.nLayers;
    if (!this.kv.layerSteps || L < 2) return out;
    const oneLayer = new Set(plan.mode === 'async-overlap' ? plan.batches.flatMap((b) => b.cpuDecodes) : []);
    for (const m of this.mirror.values()) {
      const r = m.r;
      if (!stepping.has(m.seq) || !decoding.has(m.seq)) continue;
      if (oneLayer.has(r)) {
        out.set(m.seq, { layer: r.aoLayer, layers: 1 });
        r.aoLayer = r.aoLayer + 1 >= L ? 0 : r.aoLayer + 1;
      } else if (r.aoLayer > 0) {
        out.set(m.seq, { layer: r.aoLayer, layers: L - r.aoLayer });
        r.aoLayer = 0;
      }
    }
    return out;
  }

  /** Brings the mirror up to date: new requests wait for admission, ended ones leave, tokens count. */
  private reconcile(live: readonly LiveRequest[]): void {
    const keys = new Set(live.map((l) => l.key));
    for (const [k, m] of this.mirror) {
      if (keys.has(k)) continue;
      // Decision: a request that ended leaves its slot's KV (the prefix cache of the next request
      // in that slot) on the host: the device's KV belongs to the requests the decider counts.
      if (m.r.where === 'gpu') this.kv.swapSequenceKv(m.seq, 'host');
      m.r.where = 'done';
      this.mirror.delete(k);
    }
    const alive = (r: OnlineRequest) => r.where !== 'done';
    this.q.waiting = this.q.waiting.filter(alive);
    this.q.gpu = this.q.gpu.filter(alive);
    this.q.cpu = this.q.cpu.filter(alive);
    for (const l of live) {
      const m = this.mirror.get(l.key);
      if (m) {
        m.r.generated = l.generated;
        // outputTokens bounds what the request may still need: at least one more token while it runs.
        m.r.outputTokens = Math.max(l.maxTokens, l.generated + 1);
        continue;
      }
      const r: OnlineRequest = {
        id: this.nextId++, arrivalMs: performance.now(), promptTokens: Math.max(1, l.promptTokens), outputTokens: Math.max(1, l.maxTokens, l.generated + 1),
        generated: l.generated, where: 'waiting', aoLayer: 0,
      };
      this.mirror.set(l.key, { r, seq: l.seq });
      this.q.waiting.push(r);
    }
  }

  /** Moves a request's KV to the device; on refusal (device full) it stays on the host as a CPU request. */
  private moveToDevice(r: OnlineRequest): boolean {
    const seq = this.seqOf(r);
    try {
      this.kv.swapSequenceKv(seq, 'device');
      return true;
    } catch (e) {
      if ((e as { deviceError?: boolean }).deviceError !== true) throw e;
      this.kv.swapSequenceKv(seq, 'host');
      r.where = 'cpu';
      this.q.gpu = this.q.gpu.filter((x) => x !== r);
      if (!this.q.cpu.includes(r)) this.q.cpu.push(r);
      return false;
    }
  }

  private seqOf(r: OnlineRequest): number {
    for (const m of this.mirror.values()) if (m.r === r) return m.seq;
    throw new Error(`online decider: request ${r.id} is not a running request`);
  }
}

/** "two-batch: 3 on the device, 5 on the CPU, 1 swapped out" — one iteration in the log. */
export function iterationLine(kind: string, rec: IterationRecord): string {
  const parts = [`${kind} iteration ${rec.iteration}: ${rec.mode}`, `${rec.deviceAttended} attended on the device`, `${rec.cpuAttended} on the CPU`];
  if (rec.admittedDevice + rec.admittedHost > 0) parts.push(`admitted ${rec.admittedDevice} to device KV, ${rec.admittedHost} to host KV`);
  if (rec.swappedOut.length) parts.push(`swapped out seq ${rec.swappedOut.join(',')}`);
  if (rec.swappedIn.length) parts.push(`swapped in seq ${rec.swappedIn.join(',')}`);
  if (rec.refused) parts.push(`${rec.refused} refused by the device`);
  if (rec.waiting) parts.push(`${rec.waiting} waiting`);
  const oneLayer = rec.layerRows.filter((r) => r.layers === 1).length;
  if (oneLayer) parts.push(`${oneLayer} advanced one layer`);
  if (rec.layerRows.length > oneLayer) parts.push(`${rec.layerRows.length - oneLayer} finished a token's remaining layers`);
  if (rec.forced) parts.push('(nothing scheduled: oldest request stepped)');
  return parts.join(', ');
}

