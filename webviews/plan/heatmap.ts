// The plan heatmap's numbers and geometry, with no DOM: which cell holds which op, its time, its
// colour and where it is drawn. Kept pure so the browser test can recompute every colour from the
// plan and compare it with what the page drew.
import type { ExpertShareRow, LayerPlan, MeasuredOps, OpPlan, PlanStage } from '../../engine/server/protocol';

/** Sequential palette (dark violet → yellow, perceptually ordered), readable on light and dark backgrounds. */
export const SEQUENTIAL: readonly [number, number, number][] = [
  [68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37],
];
/** Diverging palette for measured ÷ predicted: blue (faster than predicted), grey, red (slower). */
export const DIVERGING: readonly [number, number, number][] = [
  [33, 102, 172], [146, 197, 222], [200, 200, 200], [244, 165, 130], [178, 24, 43],
];

/** Busy time an op puts on all lanes in one step, ms (compute + transfers; h2dKv is part of h2d). */
export function opBusyMs(op: OpPlan): number {
  const p = op.predictedMs;
  return (p.cpu ?? 0) + (p.gpu ?? 0) + (p.h2d ?? 0) + (p.d2h ?? 0) + (p.dc ?? 0) + (p.s2d ?? 0);
}

function lerp(palette: readonly [number, number, number][], t: number): string {
  const x = Math.min(1, Math.max(0, t)) * (palette.length - 1);
  const i = Math.min(palette.length - 2, Math.floor(x));
  const f = x - i;
  const [a, b] = [palette[i]!, palette[i + 1]!];
  const c = a.map((v, k) => Math.round(v + (b[k]! - v) * f));
  return `#${c.map((v) => v.toString(16).padStart(2, '0')).join('')}`;
}

/** A log scale of times onto the sequential palette. */
export interface TimeScale { minMs: number; maxMs: number }

export function timeScale(values: number[]): TimeScale {
  const positive = values.filter((v) => v > 0 && Number.isFinite(v));
  if (positive.length === 0) return { minMs: 0, maxMs: 0 };
  return { minMs: Math.min(...positive), maxMs: Math.max(...positive) };
}

/** Position 0..1 of a time on the log scale (0 for zero time). */
export function scalePosition(scale: TimeScale, ms: number): number {
  if (!(ms > 0) || !(scale.maxMs > 0)) return 0;
  if (scale.maxMs === scale.minMs) return 1;
  return (Math.log(ms) - Math.log(scale.minMs)) / (Math.log(scale.maxMs) - Math.log(scale.minMs));
}

/** Colour at position 0..1 of the sequential palette. */
export function sequentialColour(t: number): string {
  return lerp(SEQUENTIAL, t);
}

export function timeColour(scale: TimeScale, ms: number): string {
  return ms > 0 ? lerp(SEQUENTIAL, scalePosition(scale, ms)) : 'none';
}

/** measured ÷ predicted on a log2 scale clamped to ½×…2×. */
export function ratioColour(ratio: number): string {
  if (!(ratio > 0) || !Number.isFinite(ratio)) return 'none';
  return lerp(DIVERGING, (Math.max(-1, Math.min(1, Math.log2(ratio))) + 1) / 2);
}

/** Black or white, whichever reads better on the fill (WCAG relative luminance). */
export function textOn(fill: string): 'dark' | 'light' {
  if (!fill.startsWith('#')) return 'light';
  const lin = [1, 3, 5].map((i) => {
    const c = parseInt(fill.slice(i, i + 2), 16) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  });
  const L = 0.2126 * lin[0]! + 0.7152 * lin[1]! + 0.0722 * lin[2]!;
  return L > 0.179 ? 'dark' : 'light';
}

/**
 * Per layer of an MoE plan: the GPU share of its routed-expert bytes (experts resident in VRAM ÷
 * all its experts); empty for dense plans. The Experts cell of each row shows it.
 */
export function expertShareRows(stage: PlanStage): ExpertShareRow[] {
  const rows: ExpertShareRow[] = [];
  for (const l of stage.layers) {
    const e = l.ops.find((o) => o.experts)?.experts;
    if (e) rows.push({ layer: l.index, gpuBytesShare: e.gpuBytesShare, onGpu: e.onGpu.length, count: e.count });
  }
  return rows;
}

/** The short mark drawn in a cell: where the op runs, and ↓ when its weights stream in each step. */
export function deviceMark(op: OpPlan): string {
  // MoE experts: the layer's expert share in VRAM (bytes), e.g. '16%G'.
  if (op.experts) return `${Math.round(op.experts.gpuBytesShare * 100)}%G`;
  const base = op.device === 'gpu' ? 'GPU' : op.device === 'cpu' ? 'CPU' : `${Math.round((op.gpuFraction ?? 0) * 100)}%G`;
  const streamed = op.weights === 'pinned-host' || op.weights === 'nvme';
  return streamed ? `${base}↓` : base;
}

export function deviceWords(op: OpPlan): string {
  if (op.experts) {
    const e = op.experts;
    return `${e.onGpu.length} of ${e.count} experts in VRAM (${Math.round(e.gpuBytesShare * 100)} % of the layer's expert bytes), the rest in host memory on the CPU; ${op.device === 'split' ? `${Math.round((op.gpuFraction ?? 0) * 100)} % of the routed tokens' expert work on the GPU` : `runs on the ${op.device.toUpperCase()}`}`;
  }
  const where = op.device === 'split'
    ? `split: ${Math.round((op.gpuFraction ?? 0) * 100)} % on the GPU${op.chunks ? ` (${op.chunks.onGpu}/${op.chunks.count} chunks)` : ''}`
    : `runs on the ${op.device.toUpperCase()}`;
  const weights = op.weights === undefined ? 'no weights'
    : op.weights === 'gpu' ? 'weights resident in VRAM'
      : op.weights === 'pinned-host' ? 'weights streamed from pinned host memory every step'
        : op.weights === 'nvme' ? 'weights streamed from NVMe every step' : 'weights in host memory';
  return `${where}; ${weights}`;
}

export function kvWords(l: LayerPlan): string {
  const kv = l.kv;
  let s = kv.device === 'split' ? `split ${Math.round((kv.gpuFraction ?? 0) * 100)}%G` : kv.device.toUpperCase();
  if (kv.streamed) s += '↓';
  if (kv.recomputePrefix) s += ` r${kv.recomputePrefix}`;
  return s;
}

export interface HeatCell {
  layer: number;
  column: number;
  op: OpPlan;
  ms: number;
  measuredMs?: number;
  x: number;
  y: number;
}

/**
 * A fused kernel's measured time: one native op that executes several plan ops of a layer (the
 * op table's `covers`, e.g. Attention = Scores + Softmax + WV), drawn as one cell across their
 * columns. Its time is compared with the sum of their predictions, never split among them.
 */
export interface MeasuredSpan {
  layer: number;
  /** The native op's name, and the plan ops (columns) it spans. */
  name: string;
  covers: string[];
  columns: number[];
  measuredMs: number;
  /** Sum of the covered ops' predicted busy time, ms. */
  predictedMs: number;
  x: number;
  y: number;
  width: number;
}

export interface HeatLayout {
  columns: string[];
  cells: HeatCell[];
  /** Measured fused kernels, one per layer and kernel; their cells carry no measured time of their own. */
  spans: MeasuredSpan[];
  /** The LM head, drawn as one wide cell under the layers. */
  head: HeatCell;
  columnTotals: number[];
  scale: TimeScale;
  width: number;
  height: number;
  labelWidth: number;
  cellWidth: number;
  cellHeight: number;
  top: number;
  gridRight: number;
  rowsBottom: number;
}

export const CELL_WIDTH = 46;
export const CELL_HEIGHT = 20;
export const LABEL_WIDTH = 58;
export const HEADER_HEIGHT = 64;
export const TOTAL_WIDTH = 70;
export const KV_WIDTH = 64;

/** The measured time of one plan op, when it was measured alone (not inside a fused kernel). */
function measuredFor(measured: MeasuredOps | undefined, layer: number, name: string): number | undefined {
  return measured?.layers.find((l) => l.index === layer)?.ops.find((o) => o.name === name && !o.covers)?.ms;
}

export function layoutHeatmap(stage: PlanStage, measured?: MeasuredOps): HeatLayout {
  // Columns in the order ops appear; a layer missing an op leaves its cell empty.
  const columns: string[] = [];
  for (const l of stage.layers) for (const o of l.ops) if (!columns.includes(o.name)) columns.push(o.name);
  const cells: HeatCell[] = [];
  const spans: MeasuredSpan[] = [];
  stage.layers.forEach((l, row) => {
    const y = HEADER_HEIGHT + row * CELL_HEIGHT;
    for (const op of l.ops) {
      const column = columns.indexOf(op.name);
      const m = measuredFor(measured, l.index, op.name);
      cells.push({
        layer: l.index, column, op, ms: opBusyMs(op), ...(m !== undefined ? { measuredMs: m } : {}),
        x: LABEL_WIDTH + column * CELL_WIDTH, y,
      });
    }
    for (const f of measured?.layers.find((x) => x.index === l.index)?.ops ?? []) {
      if (!f.covers?.length) continue;
      const ops = l.ops.filter((o) => f.covers!.includes(o.name));
      if (!ops.length) continue;
      const cols = ops.map((o) => columns.indexOf(o.name)).sort((a, b) => a - b);
      spans.push({
        layer: l.index, name: f.name, covers: ops.map((o) => o.name), columns: cols, measuredMs: f.ms,
        predictedMs: ops.reduce((sum, o) => sum + opBusyMs(o), 0),
        x: LABEL_WIDTH + cols[0]! * CELL_WIDTH, y, width: (cols[cols.length - 1]! - cols[0]! + 1) * CELL_WIDTH,
      });
    }
  });
  const gridRight = LABEL_WIDTH + columns.length * CELL_WIDTH;
  const rowsBottom = HEADER_HEIGHT + stage.layers.length * CELL_HEIGHT;
  const head: HeatCell = {
    layer: -1, column: 0, op: stage.head, ms: opBusyMs(stage.head),
    ...(measured?.headMs !== undefined ? { measuredMs: measured.headMs } : {}),
    x: LABEL_WIDTH, y: rowsBottom + 4,
  };
  const columnTotals = columns.map((_, c) => cells.filter((cell) => cell.column === c).reduce((s, cell) => s + cell.ms, 0));
  return {
    columns, cells, spans, head, columnTotals,
    scale: timeScale([...cells.map((c) => c.ms), head.ms]),
    width: gridRight + TOTAL_WIDTH + KV_WIDTH,
    height: rowsBottom + 4 + CELL_HEIGHT + 6 + CELL_HEIGHT + 4,
    labelWidth: LABEL_WIDTH, cellWidth: CELL_WIDTH, cellHeight: CELL_HEIGHT, top: HEADER_HEIGHT, gridRight, rowsBottom,
  };
}

/** Legend ticks: round times inside the scale (1-2-5 per decade). */
export function legendTicks(scale: TimeScale): number[] {
  if (!(scale.maxMs > 0)) return [];
  const ticks: number[] = [];
  for (let e = Math.floor(Math.log10(scale.minMs)); e <= Math.ceil(Math.log10(scale.maxMs)); e++) {
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** e;
      if (v >= scale.minMs * 0.999 && v <= scale.maxMs * 1.001) ticks.push(v);
    }
  }
  const all = [scale.minMs, ...ticks, scale.maxMs];
  // Thin to at most 6 so labels do not collide.
  const step = Math.ceil(all.length / 6);
  return all.filter((_, i) => i % step === 0 || i === all.length - 1);
}
