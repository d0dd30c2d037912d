// Lowering: one step from a Plan (any policy's) to what the native executor runs — a placement
// of every op of every layer (host or device, intra-op row fraction, weights resident or
// streamed), each layer's KV (device, host, or host streamed to the device with KVPR's
// recomputed prefix) and the LM head. The native side compiles the placement into the op list
// with lanes, copies and events (native/src/model/compile.cc).
//
// The vocabulary is the cost model's (engine/cost/ops.ts), so each measured native op joins the
// plan op it serves: attn_norm, Q, K, V, RoPE, Attention (= Scores + Softmax + WV), Output,
// ffn_norm, Gate, Up, Down, LM head.
import type { LayerPlan, OpPlan, Plan, PlanStage } from '../plan/types';
import type { NativeLayerPlacement, NativeOpPlacement, NativePlacement, NativePlanOp } from '../native/model';
import { nativeOpTable } from '../native/op-table';

/** Which native plan op executes each cost-model op: the op table's `covers` (a fused kernel covers several). */
export function planToNative(): ReadonlyMap<string, NativePlanOp> {
  return new Map(nativeOpTable().planOps.flatMap((o) => o.covers.map((c) => [c, o.name] as const)));
}

function matmuls(): ReadonlySet<NativePlanOp> {
  return new Set(nativeOpTable().planOps.filter((o) => o.matmul).map((o) => o.name));
}

/** Policies whose per-iteration decider places each request's KV (engine/plan/online). */
const ONLINE_POLICIES: ReadonlySet<string> = new Set(['neo', 'apex']);

export interface Lowered {
  placement: NativePlacement;
  /** The prefill stage's placement, where the plan places prompt steps otherwise (KV and attention as decode's). */
  prefill?: NativePlacement;
  /** Whether anything runs on the device (else the executor runs the CPU path alone). */
  usesDevice: boolean;
  /** Where the lowering had to decide something the plan leaves open, in words. */
  notes: string[];
  /** e.g. "GPU 18/24 layers · KV host" (the status bar's split). */
  splitSummary: string;
}

function lowerOp(op: OpPlan, nativeOp: NativePlanOp, notes: Set<string>, matmulOps: ReadonlySet<NativePlanOp>): NativeOpPlacement {
  const weights = (): NativeOpPlacement['weights'] => {
    switch (op.weights) {
      case 'gpu': return 'resident';
      case 'pinned-host': return 'streamed';
      case 'nvme':
        notes.add('weights the plan streams from NVMe (GPUDirect Storage) are streamed from host memory: this machine has no GDS path');
        return 'streamed';
      case 'host': return 'streamed';
      // A weightless op (norm, RoPE, attention): nothing to place.
      default: return 'resident';
    }
  };
  if (op.device === 'cpu') return { loc: 'host' };
  if (op.device === 'gpu') return { loc: 'device', weights: weights() };
  // 'split': a fraction of the op on the device (rows of a matmul; chunks for paper 000).
  const fraction = op.chunks ? op.chunks.onGpu / Math.max(1, op.chunks.count) : op.gpuFraction ?? 0.5;
  if (matmulOps.has(nativeOp)) {
    if (fraction <= 0) return { loc: 'host' };
    return { loc: 'device', deviceFraction: Math.min(1, fraction), weights: weights() };
  }
  // Decision: element-wise and attention ops are not split by rows: the side with the larger
  // share runs them whole (their cost is small next to the matmuls a split is made for).
  notes.add(`split ${op.name} runs whole on the side with the larger share`);
  return fraction >= 0.5 ? { loc: 'device', weights: weights() } : { loc: 'host' };
}

function lowerLayer(layer: LayerPlan, notes: Set<string>, toNative: ReadonlyMap<string, NativePlanOp>, matmulOps: ReadonlySet<NativePlanOp>, online: boolean): NativeLayerPlacement {
  const ops: Partial<Record<NativePlanOp, NativeOpPlacement>> = {};
  for (const op of layer.ops) {
    const n = toNative.get(op.name);
    if (!n) {
      notes.add(`plan op '${op.name}' has no native counterpart and is ignored`);
      continue;
    }
    const lowered = lowerOp(op, n, notes, matmulOps);
    const prev = ops[n];
    // Attention is three plan ops; any of them on the device puts the fused kernel there.
    if (prev && n === 'Attention' && prev.loc === 'device') continue;
    ops[n] = lowered;
  }
  const attention = ops.Attention?.loc ?? 'host';
  let kv: 'host' | 'device';
  let bySequence = false;
  // NEO/APEX decide per iteration where each request's KV lives (the runtime's live decider), so
  // their layers keep the KV by sequence whatever split the plan's steady state shows.
  switch (online ? 'split' : layer.kv.device) {
    case 'gpu': kv = 'device'; break;
    case 'cpu': kv = 'host'; break;
    default:
      // NEO/APEX split the KV between devices by request: each sequence's KV lives on the device
      // or the host (the runtime assigns it), attention runs on both at once.
      kv = 'host';
      bySequence = true;
  }
  if (bySequence) {
    return { ops: { ...ops, Attention: { loc: 'device' } }, kv, kvBySequence: true };
  }
  if (kv === 'device' && attention === 'host') {
    notes.add('attention on the CPU reads the KV from host memory, so its KV stays on the host');
    kv = 'host';
  }
  const recompute = layer.kv.recomputePrefix ?? 0;
  return { ops, kv, ...(recompute > 0 && kv === 'host' && attention === 'device' ? { recomputePrefix: recompute } : {}) };
}

/** One stage's placement. */
function lowerStage(stage: PlanStage, notes: Set<string>, online: boolean): NativePlacement {
  const toNative = planToNative();
  const matmulOps = matmuls();
  const layers = stage.layers.map((l) => lowerLayer(l, notes, toNative, matmulOps, online));
  let head = lowerOp(stage.head, 'Output', notes, matmulOps);
  if (head.loc === 'device' && head.weights === 'streamed') {
    // Decision: an LM head whose weights the plan streams runs on the CPU. Streaming it costs
    // head bytes / link bandwidth every token, reading it in place costs head bytes / CPU memory
    // bandwidth, and a CPU's memory bandwidth exceeds its PCIe link's (≈ 60 vs 25 GB/s on a
    // desktop); it also needs no device buffer of the head's size, which the plans do not count.
    notes.add('the LM head, whose weights the plan streams, runs on the CPU next to its weights');
    head = { loc: 'host' };
  }
  return { layers, head };
}

/** The same placement, whatever the order of the ops' keys. */
function samePlacement(a: NativePlacement, b: NativePlacement): boolean {
  const op = (o: NativeOpPlacement | undefined) => JSON.stringify(o ? { loc: o.loc, f: o.deviceFraction ?? 1, w: o.loc === 'device' ? o.weights ?? 'resident' : undefined } : { loc: 'host' });
  if (op(a.head) !== op(b.head) || a.layers.length !== b.layers.length) return false;
  return a.layers.every((l, i) => {
    const m = b.layers[i]!;
    const keys = new Set([...Object.keys(l.ops), ...Object.keys(m.ops)]);
    return l.kv === m.kv && [...keys].every((k) => op(l.ops[k]) === op(m.ops[k]));
  });
}

function placesOnDevice(p: NativePlacement): boolean {
  return p.head.loc === 'device' || p.layers.some((l) => l.kv === 'device' || Object.values(l.ops).some((o) => o?.loc === 'device'));
}

/**
 * The decode stage's placement, and the prefill stage's where the plan places prompt steps
 * otherwise (for instance streaming weights to the device for the big matmuls while decode reads
 * them on the CPU, as llama.cpp does for large batches). Decision: the prefill placement keeps the
 * decode placement's KV and attention (KV does not move between steps: moving it at every
 * completion would cost more than the prompt's matmuls gain); the executor picks a placement per
 * step by its rows (the threshold comes from the cost model, engine/plan/stage-crossover.ts).
 */
export function lowerPlan(plan: Plan, nLayers: number): Lowered {
  const stage: PlanStage = plan.stages.decode;
  if (stage.layers.length !== nLayers) {
    throw new Error(`plan for ${plan.model.name} has ${stage.layers.length} layers, the loaded model has ${nLayers}: plan for the same model`);
  }
  const notes = new Set<string>();
  const online = ONLINE_POLICIES.has(plan.chosenPolicy);
  const placement = lowerStage(stage, notes, online);
  const prefillNotes = new Set<string>();
  const lowered = plan.stages.prefill.layers.length === nLayers ? lowerStage(plan.stages.prefill, prefillNotes, online) : undefined;
  let prefill: NativePlacement | undefined;
  if (lowered) {
    const shared: NativePlacement = {
      head: lowered.head,
      layers: lowered.layers.map((l, i) => {
        const d = placement.layers[i]!;
        return { ops: { ...l.ops, Attention: d.ops.Attention ?? { loc: 'host' } }, kv: d.kv, ...(d.recomputePrefix ? { recomputePrefix: d.recomputePrefix } : {}), ...(d.kvBySequence ? { kvBySequence: true } : {}) };
      }),
    };
    if (!samePlacement(shared, placement)) prefill = shared;
  }
  const usesDevice = placesOnDevice(placement) || (prefill !== undefined && placesOnDevice(prefill));
  return { placement, ...(prefill ? { prefill } : {}), usesDevice, notes: [...notes], splitSummary: splitSummary(placement) };
}

/** Where a decoder layer (or the embedding and output head) runs: all on the GPU, all on the CPU, or shared. */
export type RunsOn = 'GPU' | 'CPU' | 'GPU+CPU';

/**
 * Where each decoder layer runs under an executed placement, as the Model Layers panel says it:
 * 'GPU' when every op of the layer runs on the device from resident weights, 'CPU' when none does,
 * 'GPU+CPU' otherwise (some ops on each side, rows shared, or weights streamed from host memory).
 * Key -1 is the embedding and output head. No placement: everything on the CPU.
 */
export function runsOnByLayer(p: NativePlacement | null, nLayers: number): Record<number, RunsOn> {
  const out: Record<number, RunsOn> = {};
  const of = (ops: NativeOpPlacement[]): RunsOn => {
    const gpu = ops.filter((o) => o.loc === 'device');
    if (gpu.length === 0) return 'CPU';
    const whole = gpu.length === ops.length && gpu.every((o) => (o.deviceFraction ?? 1) >= 1 && o.weights !== 'streamed' && o.weights !== 'host');
    return whole ? 'GPU' : 'GPU+CPU';
  };
  for (let i = 0; i < nLayers; i++) {
    const layer = p?.layers[i];
    out[i] = layer ? of(Object.values(layer.ops).filter((o): o is NativeOpPlacement => o !== undefined)) : 'CPU';
  }
  out[-1] = p ? of([p.head]) : 'CPU';
  return out;
}

/** "GPU 3/5 layers · KV host", "CPU only", "GPU 5/5 layers + head". */
export function splitSummary(p: NativePlacement): string {
  const onDevice = (l: NativeLayerPlacement) => Object.values(l.ops).filter((o) => o?.loc === 'device').length;
  const full = p.layers.filter((l) => onDevice(l) === Object.keys(l.ops).length && onDevice(l) > 0).length;
  const partial = p.layers.filter((l) => onDevice(l) > 0).length - full;
  if (full === 0 && partial === 0 && p.head.loc !== 'device') return 'CPU only';
  const kvDev = p.layers.filter((l) => l.kv === 'device').length;
  const bySeq = p.layers.filter((l) => l.kvBySequence).length;
  const kv = bySeq > 0 ? 'KV split by request' : kvDev === p.layers.length ? 'KV GPU' : kvDev === 0 ? 'KV host' : `KV GPU ${kvDev}/${p.layers.length}`;
  const streamed = p.layers.some((l) => Object.values(l.ops).some((o) => o?.weights === 'streamed')) ? ' · streamed' : '';
  const recompute = Math.max(0, ...p.layers.map((l) => l.recomputePrefix ?? 0));
  return `GPU ${full}/${p.layers.length} layers${partial ? ` (+${partial} split)` : ''} · ${kv}${streamed}${recompute ? ` · KV recompute ${recompute}` : ''}`;
}

/**
 * Where each of `n` sequences keeps its KV in layers placed by sequence (NEO/APEX): the plan's
 * GPU share of the KV, as whole sequences, first on the device (at least one on each side when
 * the plan splits and there are two or more sequences).
 */
export function sequenceKvAssignment(plan: Plan, n: number): ('host' | 'device')[] {
  const split = plan.stages.decode.layers.find((l) => l.kv.device === 'split');
  if (!split) return new Array<'host' | 'device'>(n).fill(plan.stages.decode.layers.some((l) => l.kv.device === 'gpu') ? 'device' : 'host');
  let onDevice = Math.round((split.kv.gpuFraction ?? 0.5) * n);
  if (n >= 2) onDevice = Math.min(n - 1, Math.max(1, onDevice));
  return Array.from({ length: n }, (_, i) => (i < onDevice ? 'device' : 'host'));
}
