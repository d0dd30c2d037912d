// Builds the plan panel: header (policy, tokens/s, memory), the layers × ops heatmap with its
// legend, per-layer and per-op totals, per-lane busy times, and a details line for the hovered or
// focused cell. Predicted times always; measured ones beside them when the runtime sent them.
import type { LaneTimes, PlanStage, PlanViewData } from '../../engine/server/protocol';
import { el, svg } from '../shared/dom';
import { formatBytes, formatMs, formatPercent } from '../shared/format';
import {
  CELL_HEIGHT, KV_WIDTH, TOTAL_WIDTH, sequentialColour, deviceMark, deviceWords, kvWords, layoutHeatmap, legendTicks,
  ratioColour, scalePosition, textOn, timeColour, timeScale, type HeatCell, type HeatLayout, type MeasuredSpan,
} from './heatmap';

export type ColourMode = 'predicted' | 'measured' | 'ratio';
type Action = (action: string, args?: Record<string, unknown>) => void;

const LANES: { key: keyof LaneTimes; label: string }[] = [
  { key: 'cpu', label: 'CPU' }, { key: 'gpu', label: 'GPU' }, { key: 'h2d', label: 'host→device' },
  { key: 'd2h', label: 'device→host' }, { key: 'nvme', label: 'NVMe→device' },
];

interface ViewState { stage: 'decode' | 'prefill'; mode: ColourMode; focus: number }

export function renderPlan(root: HTMLElement, data: PlanViewData, act: Action, state: ViewState = { stage: 'decode', mode: 'predicted', focus: 0 }): void {
  const { plan, measured } = data;
  const stage = plan.stages[state.stage];
  const header = el('header');
  header.append(el('h1', {}, `Offload plan: ${plan.model.name}`));
  const policy = plan.policy === plan.chosenPolicy ? plan.policy : `${plan.chosenPolicy} (chosen by ${plan.policy})`;
  header.append(el('p', { class: 'summary', id: 'plan-summary' },
    `Policy ${policy} · ${plan.predicted.tokensPerSecond.toFixed(1)} tokens/s predicted · decode step ${formatMs(plan.predicted.stepMs)} · ` +
    `prefill ${formatMs(plan.predicted.prefillMs)} · ${plan.hardware.name} (${plan.hardware.source}) · ` +
    `batch ${plan.workload.batch}, prompt ${plan.workload.prompt}, gen ${plan.workload.gen} · ` +
    `VRAM ${formatBytes(plan.memory.gpuBytes)} of ${formatBytes(plan.memory.gpuCapacityBytes)}${plan.memory.fits ? '' : ' (does not fit)'}`));
  header.append(el('p', { class: 'muted' }, plan.explanation.summary));

  const toolbar = el('div', { class: 'toolbar', role: 'toolbar', 'aria-label': 'Plan actions' });
  const stageSelect = el('select', { id: 'stage-select', 'aria-label': 'Stage' });
  for (const s of ['decode', 'prefill'] as const) {
    const o = el('option', { value: s }, s === 'decode' ? 'Decode step' : 'Prefill');
    if (s === state.stage) o.selected = true;
    stageSelect.append(o);
  }
  stageSelect.addEventListener('change', () => renderPlan(root, data, act, { ...state, stage: stageSelect.value as 'decode' | 'prefill', focus: 0 }));
  toolbar.append(stageSelect);
  if (measured) {
    const modeSelect = el('select', { id: 'mode-select', 'aria-label': 'Colour cells by' });
    for (const [m, label] of [['predicted', 'Colour: predicted'], ['measured', 'Colour: measured'], ['ratio', 'Colour: measured ÷ predicted']] as const) {
      const o = el('option', { value: m }, label);
      if (m === state.mode) o.selected = true;
      modeSelect.append(o);
    }
    modeSelect.addEventListener('change', () => renderPlan(root, data, act, { ...state, mode: modeSelect.value as ColourMode }));
    toolbar.append(modeSelect);
  }
  for (const [id, label, action] of [['copy-llamacpp', 'Copy as llama.cpp flags', 'copyLlamaCpp'], ['open-timeline', 'Show timeline', 'showTimeline'], ['open-explain', 'Explain', 'explain'], ['open-whatif', 'What-if…', 'whatIf']] as const) {
    const b = el('button', { id, type: 'button', class: id === 'copy-llamacpp' ? '' : 'secondary' }, label);
    b.addEventListener('click', () => act(action));
    toolbar.append(b);
  }
  const note = el('p', { class: 'muted', id: 'measured-note' }, measured
    ? `Measured per-op times: ${measured.source}.`
    : 'Predicted times only: no measured run of this plan yet.');

  const layout = layoutHeatmap(stage, measured);
  const mode: ColourMode = measured ? state.mode : 'predicted';
  const details = el('p', { id: 'cell-details', class: 'details', 'aria-live': 'polite' }, 'Hover or focus a cell (arrow keys move) to see its numbers.');
  const figure = el('figure', { class: 'heatmap-figure' });
  figure.append(legend(layout, mode), heatmapSvg(stage, layout, mode, details, state.focus, (focus) => { state.focus = focus; }));
  root.replaceChildren(header, toolbar, note, figure, details, laneTable(stage, state.stage));
}

function cellValue(cell: HeatCell, mode: ColourMode): number | undefined {
  if (mode === 'predicted') return cell.ms;
  if (mode === 'measured') return cell.measuredMs;
  return cell.measuredMs !== undefined && cell.ms > 0 ? cell.measuredMs / cell.ms : undefined;
}

function cellFill(cell: HeatCell, mode: ColourMode, layout: HeatLayout, measuredScale: ReturnType<typeof timeScale>): string {
  const v = cellValue(cell, mode);
  if (v === undefined) return 'none';
  if (mode === 'ratio') return ratioColour(v);
  return timeColour(mode === 'measured' ? measuredScale : layout.scale, v);
}

function describe(cell: HeatCell, label: string, span: MeasuredSpan | undefined): string {
  const p = cell.op.predictedMs;
  const lanes = (['cpu', 'gpu', 'h2d', 'd2h', 'dc', 's2d'] as const).filter((k) => (p[k] ?? 0) > 0).map((k) => `${k} ${formatMs(p[k]!)}`).join(', ');
  let s = `${label} · ${cell.op.name}: ${deviceWords(cell.op)}; predicted ${formatMs(cell.ms)}${lanes ? ` (${lanes})` : ''}`;
  if (cell.measuredMs !== undefined) s += `; measured ${formatMs(cell.measuredMs)} (${formatPercent(cell.measuredMs / cell.ms - 1)} vs predicted)`;
  // A fused kernel's parts were not timed apart: the cell says so and gives the kernel's numbers.
  else if (span) s += `; measured only as one fused kernel, ${span.name} (${span.covers.join(' + ')}): ${formatMs(span.measuredMs)} vs ${formatMs(span.predictedMs)} predicted for the ${span.covers.length} (${formatPercent(span.measuredMs / span.predictedMs - 1)})`;
  return s;
}

function spanValue(span: MeasuredSpan, mode: ColourMode): number | undefined {
  if (mode === 'measured') return span.measuredMs;
  if (mode === 'ratio') return span.predictedMs > 0 ? span.measuredMs / span.predictedMs : undefined;
  return undefined;
}

/** A fused kernel's one measured cell, drawn over the columns of the plan ops it covers. */
function spanNode(span: MeasuredSpan, mode: ColourMode, measuredScale: ReturnType<typeof timeScale>): SVGGElement {
  const v = spanValue(span, mode);
  const fill = v === undefined ? 'none' : mode === 'ratio' ? ratioColour(v) : timeColour(measuredScale, v);
  const ratio = span.predictedMs > 0 ? span.measuredMs / span.predictedMs : 1;
  // Not a tab stop: the covered cells under it are, and their details carry the kernel's numbers.
  const g = svg('g', {
    class: 'measured-span', 'pointer-events': 'none', 'aria-hidden': 'true',
    'data-layer': span.layer, 'data-name': span.name, 'data-covers': span.covers.join(' '), 'data-columns': span.columns.join(' '),
    'data-measured-ms': span.measuredMs, 'data-predicted-ms': span.predictedMs, 'data-fill': fill,
  });
  if (Math.abs(Math.log2(ratio)) > Math.log2(1.25)) g.classList.add('off-prediction');
  g.append(svg('rect', { class: 'heat', x: span.x + 1, y: span.y + 1, width: span.width - 2, height: CELL_HEIGHT - 2, fill: fill === 'none' ? 'transparent' : fill, rx: 2 }));
  g.append(svg('text', {
    class: `mark on-${textOn(fill)}`, x: span.x + span.width / 2, y: span.y + CELL_HEIGHT / 2, 'text-anchor': 'middle', 'dominant-baseline': 'middle',
  }, `${span.name} (fused)`));
  return g;
}

function heatmapSvg(stage: PlanStage, layout: HeatLayout, mode: ColourMode, details: HTMLElement, initialFocus: number, onFocus: (i: number) => void): SVGSVGElement {
  const measuredScale = measuredTimeScale(layout);
  const spanOf = new Map(layout.spans.flatMap((sp) => sp.covers.map((name) => [`${sp.layer}/${name}`, sp] as const)));
  const chart = svg('svg', {
    id: 'heatmap', class: 'heatmap', viewBox: `0 0 ${layout.width} ${layout.height}`, role: 'group',
    'aria-label': `Predicted time per operation for each of ${stage.layers.length} layers (${stage.name}); arrow keys move between cells`,
  });
  // Column headers, rotated so the grid stays narrow.
  layout.columns.forEach((name, c) => {
    const x = layout.labelWidth + c * layout.cellWidth + layout.cellWidth / 2;
    chart.append(svg('text', { class: 'col-label', x, y: layout.top - 6, transform: `rotate(-40 ${x} ${layout.top - 6})` }, name));
  });
  chart.append(svg('text', { class: 'col-label total-label', x: layout.gridRight + TOTAL_WIDTH - 6, y: layout.top - 6, 'text-anchor': 'end' }, 'layer'));
  chart.append(svg('text', { class: 'col-label total-label', x: layout.gridRight + TOTAL_WIDTH + KV_WIDTH - 4, y: layout.top - 6, 'text-anchor': 'end' }, 'KV'));

  const all = [...layout.cells, layout.head];
  const nodes: SVGGElement[] = [];
  stage.layers.forEach((l, row) => {
    const y = layout.top + row * CELL_HEIGHT;
    chart.append(svg('text', { class: 'row-label', x: layout.labelWidth - 6, y: y + CELL_HEIGHT / 2, 'text-anchor': 'end', 'dominant-baseline': 'middle' }, `L${l.index}`));
    chart.append(svg('text', { class: 'row-total num', x: layout.gridRight + TOTAL_WIDTH - 6, y: y + CELL_HEIGHT / 2, 'text-anchor': 'end', 'dominant-baseline': 'middle', 'data-layer': l.index, 'data-ms': l.predictedMs }, formatMs(l.predictedMs)));
    chart.append(svg('text', { class: 'kv-mark', x: layout.gridRight + TOTAL_WIDTH + KV_WIDTH - 4, y: y + CELL_HEIGHT / 2, 'text-anchor': 'end', 'dominant-baseline': 'middle' }, kvWords(l)));
  });
  all.forEach((cell, i) => {
    const isHead = cell.layer === -1;
    const w = isHead ? layout.gridRight - layout.labelWidth : layout.cellWidth;
    const label = isHead ? 'LM head' : `Layer ${cell.layer}`;
    const fill = cellFill(cell, mode, layout, measuredScale);
    const text = describe(cell, label, spanOf.get(`${cell.layer}/${cell.op.name}`));
    const g = svg('g', {
      class: `cell device-${cell.op.device}`, tabindex: i === initialFocus ? 0 : -1, role: 'img', 'aria-label': text,
      'data-index': i, 'data-layer': cell.layer, 'data-op': cell.op.name, 'data-device': cell.op.device,
      'data-ms': cell.ms, 'data-fill': fill, ...(cell.measuredMs !== undefined ? { 'data-measured-ms': cell.measuredMs } : {}),
    });
    g.append(svg('rect', { class: fill === 'none' ? 'heat empty' : 'heat', x: cell.x + 1, y: cell.y + 1, width: w - 2, height: CELL_HEIGHT - 2, fill: fill === 'none' ? 'transparent' : fill, rx: 2 }));
    // A stripe on the cell's left edge repeats the device in colour (CPU / GPU / split).
    g.append(svg('rect', { class: `device-stripe stripe-${cell.op.device}`, x: cell.x + 1, y: cell.y + 1, width: 3, height: CELL_HEIGHT - 2 }));
    const off = mode !== 'predicted' && cell.measuredMs !== undefined && Math.abs(Math.log2(cell.measuredMs / cell.ms)) > Math.log2(1.25);
    if (off) g.classList.add('off-prediction');
    g.append(svg('text', {
      class: `mark on-${textOn(fill)}`, x: cell.x + w / 2, y: cell.y + CELL_HEIGHT / 2, 'text-anchor': 'middle', 'dominant-baseline': 'middle',
    }, isHead ? `LM head · ${deviceMark(cell.op)} · ${formatMs(cell.ms)}` : deviceMark(cell.op)));
    chart.append(g);
    nodes.push(g);
  });
  // Fused kernels' measured cells over the cells of the ops they cover (measured and ratio colours).
  if (mode !== 'predicted') for (const sp of layout.spans) chart.append(spanNode(sp, mode, measuredScale));
  // Per-op totals (sum over layers) under the head row.
  const totalsY = layout.head.y + CELL_HEIGHT + 6;
  chart.append(svg('text', { class: 'row-label', x: layout.labelWidth - 6, y: totalsY + CELL_HEIGHT / 2, 'text-anchor': 'end', 'dominant-baseline': 'middle' }, 'Σ'));
  layout.columnTotals.forEach((ms, c) => {
    chart.append(svg('text', { class: 'col-total num', x: layout.labelWidth + c * layout.cellWidth + layout.cellWidth / 2, y: totalsY + CELL_HEIGHT / 2, 'text-anchor': 'middle', 'dominant-baseline': 'middle', 'data-column': c, 'data-ms': ms }, shortMs(ms)));
  });
  chart.append(svg('text', { class: 'row-total num', x: layout.gridRight + TOTAL_WIDTH - 6, y: totalsY + CELL_HEIGHT / 2, 'text-anchor': 'end', 'dominant-baseline': 'middle' }, formatMs(stage.predicted.stepMs)));

  // Roving focus: one tab stop; arrows move by cell / row, Home/End to the row's ends.
  const columns = layout.columns.length;
  const show = (i: number) => { details.textContent = nodes[i]?.getAttribute('aria-label') ?? ''; };
  const move = (to: number) => {
    const i = Math.max(0, Math.min(nodes.length - 1, to));
    nodes.forEach((n, k) => n.setAttribute('tabindex', k === i ? '0' : '-1'));
    nodes[i]!.focus();
    onFocus(i);
  };
  chart.addEventListener('keydown', (e: KeyboardEvent) => {
    const current = nodes.findIndex((n) => n.getAttribute('tabindex') === '0');
    const step: Record<string, number> = { ArrowRight: 1, ArrowLeft: -1, ArrowDown: columns, ArrowUp: -columns };
    if (e.key in step) move(current + step[e.key]!);
    else if (e.key === 'Home') move(current - (current % columns));
    else if (e.key === 'End') move(current - (current % columns) + columns - 1);
    else return;
    e.preventDefault();
  });
  chart.addEventListener('focusin', (e) => { const i = Number((e.target as Element).getAttribute('data-index')); if (Number.isInteger(i)) show(i); });
  chart.addEventListener('mouseover', (e) => { const g = (e.target as Element).closest('g.cell'); if (g) show(Number(g.getAttribute('data-index'))); });
  return chart;
}

/** The measured colour scale: every measured cell, fused kernels' included. */
function measuredTimeScale(layout: HeatLayout): ReturnType<typeof timeScale> {
  return timeScale([...layout.cells.map((c) => c.measuredMs ?? 0), ...layout.spans.map((sp) => sp.measuredMs), layout.head.measuredMs ?? 0]);
}

function shortMs(ms: number): string {
  return formatMs(ms).replace(' ms', '');
}

function legend(layout: HeatLayout, mode: ColourMode): SVGSVGElement {
  const w = 420;
  const g = svg('svg', { id: 'legend', class: 'legend', viewBox: `0 0 ${w} 44`, role: 'img' });
  const barX = 24;
  const barW = w - 48;
  const steps = 48;
  if (mode === 'ratio') {
    g.setAttribute('aria-label', 'Colour legend: measured ÷ predicted time, from ½× (blue, faster than predicted) through 1× to 2× (red, slower)');
    for (let i = 0; i < steps; i++) g.append(svg('rect', { x: barX + (i * barW) / steps, y: 18, width: barW / steps + 0.5, height: 10, fill: ratioColour(2 ** ((i / (steps - 1)) * 2 - 1)) }));
    for (const [r, label] of [[0.5, '½× (faster)'], [1, '1×'], [2, '2× (slower)']] as const) {
      const x = barX + ((Math.log2(r) + 1) / 2) * barW;
      g.append(svg('text', { class: 'legend-label', x, y: 40, 'text-anchor': r === 0.5 ? 'start' : r === 2 ? 'end' : 'middle' }, label));
    }
    g.append(svg('text', { class: 'legend-title', x: barX, y: 12 }, 'Measured ÷ predicted time'));
    return g;
  }
  const scale = mode === 'measured' ? measuredTimeScale(layout) : layout.scale;
  g.setAttribute('aria-label', `Colour legend: ${mode} time per op in milliseconds, log scale from ${formatMs(scale.minMs)} (dark) to ${formatMs(scale.maxMs)} (bright)`);
  g.append(svg('text', { class: 'legend-title', x: barX, y: 12 }, `${mode === 'measured' ? 'Measured' : 'Predicted'} time per op (ms, log scale; busy time over all lanes)`));
  for (let i = 0; i < steps; i++) {
    const t = i / (steps - 1);
    const c = sequentialColour(t);
    g.append(svg('rect', { class: 'legend-step', x: barX + (i * barW) / steps, y: 18, width: barW / steps + 0.5, height: 10, fill: c }));
  }
  for (const ms of legendTicks(scale)) {
    const x = barX + scalePosition(scale, ms) * barW;
    g.append(svg('line', { class: 'legend-tick', x1: x, x2: x, y1: 28, y2: 31 }));
    g.append(svg('text', { class: 'legend-label', x, y: 41, 'text-anchor': 'middle', 'data-ms': ms }, shortMs(ms)));
  }
  return g;
}

function laneTable(stage: PlanStage, stageName: string): HTMLElement {
  const lanes = LANES.filter((l) => l.key === 'cpu' || l.key === 'gpu' || stage.predicted.perLane[l.key] > 0);
  const table = el('table', { id: 'lane-table' });
  table.append(el('caption', {}, `Busy time per lane, one ${stageName === 'decode' ? 'decode step' : 'prefill'} (step ${formatMs(stage.predicted.stepMs)}; lanes overlap: ${stage.overlap})`));
  const head = el('tr');
  for (const h of ['Lane', 'Busy', 'Share of step', '']) head.append(el('th', { scope: 'col', class: h === 'Busy' || h === 'Share of step' ? 'num' : '' }, h));
  table.createTHead().append(head);
  const body = el('tbody');
  for (const l of lanes) {
    const ms = stage.predicted.perLane[l.key];
    const share = stage.predicted.stepMs > 0 ? ms / stage.predicted.stepMs : 0;
    const row = el('tr', { 'data-lane': l.key, 'data-ms': String(ms) });
    row.append(el('th', { scope: 'row' }, l.label), el('td', { class: 'num' }, formatMs(ms)), el('td', { class: 'num' }, `${(share * 100).toFixed(0)} %`));
    const barCell = el('td', { class: 'bar-cell' });
    const bar = svg('svg', { class: 'lane-bar', viewBox: '0 0 100 8', preserveAspectRatio: 'none', 'aria-hidden': 'true' });
    bar.append(svg('rect', { class: `lane-fill lane-${l.key}`, x: 0, y: 0, width: Math.min(100, share * 100), height: 8 }));
    barCell.append(bar);
    row.append(barCell);
    body.append(row);
  }
  table.append(body);
  const wrap = el('div', { class: 'scroll-x' });
  wrap.append(table);
  return wrap;
}
