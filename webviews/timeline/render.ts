// The timeline panel: one row per lane (CPU, GPU, host→device, device→host) of each traced
// stage, spans drawn at their times, a time axis, zoom (buttons, +/−, Ctrl+wheel), pan (drag,
// arrow keys, wheel) and an export button. A measured trace, when given, is drawn under the
// predicted one on the same time scale, so the two line up.
import type { TimelineViewData } from '../../engine/server/protocol';
import { el, svg } from '../shared/dom';
import { formatUs, mergeLanesByName, parseTrace, tickStepUs, type ParsedTrace, type TraceLane } from './trace';

type Action = (action: string, args?: Record<string, unknown>) => void;

export const LABEL_WIDTH = 170;
export const CHART_WIDTH = 1000;
export const ROW_HEIGHT = 22;
const AXIS_HEIGHT = 24;

export interface Viewport { startUs: number; endUs: number }

export function xOf(us: number, view: Viewport): number {
  return LABEL_WIDTH + ((us - view.startUs) / (view.endUs - view.startUs)) * (CHART_WIDTH - LABEL_WIDTH);
}

function laneClass(lane: string): string {
  const l = lane.toLowerCase();
  if (l.startsWith('cpu')) return 'lane-cpu';
  if (l.startsWith('gpu')) return 'lane-gpu';
  if (l.includes('nvme')) return 'lane-other';
  if (l.includes('host→device')) return 'lane-h2d';
  if (l.includes('device→host')) return 'lane-d2h';
  return 'lane-other';
}

/**
 * A trace restricted to one section (process), e.g. 'decode step (layer-split)'. With
 * `fallbackAll` and no such section (a measured run: a section per step), every section's
 * lanes, merged into one lane per lane name.
 */
function onlySection(parsed: ParsedTrace, section: string, fallbackAll: boolean): ParsedTrace {
  let lanes = parsed.lanes.filter((l) => l.section === section);
  const all = lanes.length === 0 && fallbackAll;
  if (all) lanes = mergeLanesByName(parsed.lanes, 'all steps');
  const spans = lanes.flatMap((l) => l.spans);
  // Marks (re-plans) of the shown sections, inside the time they span.
  const startUs = spans.length ? Math.min(...spans.map((x) => x.startUs)) : 0;
  const endUs = spans.length ? Math.max(...spans.map((x) => x.startUs + x.durUs)) : 0;
  const marks = parsed.marks.filter((m) => (all || m.section === section) && m.atUs >= startUs && m.atUs <= endUs);
  return { lanes, startUs, endUs, marks };
}

export function renderTimeline(root: HTMLElement, data: TimelineViewData, act: Action, sectionChoice?: string): void {
  const predicted = parseTrace(data.predicted);
  const measured = data.measured ? parseTrace(data.measured) : undefined;
  const sections = [...new Set(predicted.lanes.map((l) => l.section))];
  // The decode step is what a completion waits on per token: show it first.
  const section = sectionChoice ?? sections.find((n) => /decode/i.test(n)) ?? sections[0] ?? '';
  const traces: { label: string; parsed: ParsedTrace }[] = [{ label: 'Predicted (simulator)', parsed: onlySection(predicted, section, false) }];
  if (measured) traces.push({ label: 'Measured (runtime)', parsed: onlySection(measured, section, true) });
  const full: Viewport = {
    startUs: Math.min(...traces.map((t) => t.parsed.startUs)),
    endUs: Math.max(...traces.map((t) => t.parsed.endUs)),
  };
  if (full.endUs <= full.startUs) full.endUs = full.startUs + 1;
  let view: Viewport = { ...full };

  const header = el('header');
  header.append(el('h1', {}, `Timeline: ${data.title}`));
  header.append(el('p', { class: 'summary' }, data.measured
    ? 'Predicted step from the simulator above, measured step from the runtime below, on one time scale. Gaps are time a lane waits.'
    : 'Predicted step from the simulator (no measured trace yet). Gaps are time a lane waits.'));
  const toolbar = el('div', { class: 'toolbar', role: 'toolbar', 'aria-label': 'Timeline controls' });
  const sectionSelect = el('select', { id: 'section-select', 'aria-label': 'Traced stage' });
  for (const name of sections) {
    const o = el('option', { value: name }, name);
    if (name === section) o.selected = true;
    sectionSelect.append(o);
  }
  sectionSelect.addEventListener('change', () => renderTimeline(root, data, act, sectionSelect.value));
  toolbar.append(sectionSelect);
  const button = (id: string, label: string, aria: string, fn: () => void, cls = 'secondary') => {
    const b = el('button', { id, type: 'button', class: cls, 'aria-label': aria }, label);
    b.addEventListener('click', fn);
    toolbar.append(b);
  };
  const readout = el('span', { id: 'view-range', class: 'muted', 'aria-live': 'polite' });
  const container = el('div', { class: 'timeline-container' });
  const details = el('p', { id: 'span-details', class: 'details', 'aria-live': 'polite' }, 'Hover or focus a span to see it; + and − zoom, arrow keys pan.');

  const zoom = (factor: number, centreUs = (view.startUs + view.endUs) / 2) => {
    const span = Math.max(1, Math.min(full.endUs - full.startUs, (view.endUs - view.startUs) * factor));
    let start = centreUs - (centreUs - view.startUs) * (span / (view.endUs - view.startUs));
    start = Math.max(full.startUs, Math.min(full.endUs - span, start));
    view = { startUs: start, endUs: start + span };
    draw();
  };
  const pan = (fraction: number) => {
    const span = view.endUs - view.startUs;
    const start = Math.max(full.startUs, Math.min(full.endUs - span, view.startUs + fraction * span));
    view = { startUs: start, endUs: start + span };
    draw();
  };
  button('zoom-in', '+', 'Zoom in', () => zoom(0.5));
  button('zoom-out', '−', 'Zoom out', () => zoom(2));
  // Accessible names start with the visible text (WCAG 2.5.3: a voice user says what they see).
  button('zoom-reset', 'Fit', 'Fit: show the whole step', () => { view = { ...full }; draw(); });
  button('pan-left', '◀', 'Pan left', () => pan(-0.25));
  button('pan-right', '▶', 'Pan right', () => pan(0.25));
  button('export-trace', 'Export for Perfetto…', 'Export for Perfetto: the trace as Chrome trace JSON', () => act('exportTrace'), '');
  toolbar.append(readout);

  let focusedKey = '';
  function draw(): void {
    readout.textContent = `${formatUs(view.startUs - full.startUs)} – ${formatUs(view.endUs - full.startUs)} of ${formatUs(full.endUs - full.startUs)}`;
    const rows = traces.reduce((n, t) => n + t.parsed.lanes.length + 1, 0);
    const height = AXIS_HEIGHT + rows * ROW_HEIGHT + 8;
    const chart = svg('svg', { id: 'timeline', class: 'timeline', viewBox: `0 0 ${CHART_WIDTH} ${height}`, role: 'group', tabindex: 0,
      'aria-label': `Timeline of ${traces.length === 1 ? 'the predicted step' : 'the predicted and measured steps'}; + and − zoom, arrow keys pan` });
    // Time axis: ticks relative to the start of the trace.
    const step = tickStepUs(view.endUs - view.startUs);
    for (let t = Math.ceil((view.startUs - full.startUs) / step) * step; t + full.startUs <= view.endUs + 1e-9; t += step) {
      const x = xOf(t + full.startUs, view);
      chart.append(svg('line', { class: 'tick', x1: x, x2: x, y1: AXIS_HEIGHT - 4, y2: height, 'data-us': t }));
      // Labels near the edges are anchored inwards so they are not cut off.
      const anchor = x > CHART_WIDTH - 30 ? 'end' : x < LABEL_WIDTH + 20 ? 'start' : 'middle';
      chart.append(svg('text', { class: 'tick-label', x, y: AXIS_HEIGHT - 8, 'text-anchor': anchor }, t === 0 ? '0' : formatUs(t)));
    }
    let row = 0;
    for (const t of traces) {
      const y0 = AXIS_HEIGHT + row * ROW_HEIGHT;
      chart.append(svg('text', { class: 'section-label', x: 4, y: y0 + ROW_HEIGHT / 2 + 4 }, t.label));
      row++;
      for (const lane of t.parsed.lanes) {
        drawLane(chart, lane, AXIS_HEIGHT + row * ROW_HEIGHT, t.label);
        row++;
      }
      drawMarks(chart, t.parsed, y0, AXIS_HEIGHT + row * ROW_HEIGHT, t.label);
    }
    chart.addEventListener('keydown', (e: KeyboardEvent) => {
      if (e.target !== chart) return;
      if (e.key === '+' || e.key === '=') zoom(0.5);
      else if (e.key === '-' || e.key === '_') zoom(2);
      else if (e.key === 'ArrowLeft') pan(-0.25);
      else if (e.key === 'ArrowRight') pan(0.25);
      else if (e.key === '0') { view = { ...full }; draw(); }
      else return;
      e.preventDefault();
      focusedKey = 'chart';
    });
    chart.addEventListener('wheel', (e: WheelEvent) => {
      e.preventDefault();
      const box = chart.getBoundingClientRect();
      const fx = ((e.clientX - box.left) / box.width) * CHART_WIDTH;
      const centre = view.startUs + ((fx - LABEL_WIDTH) / (CHART_WIDTH - LABEL_WIDTH)) * (view.endUs - view.startUs);
      if (e.ctrlKey || Math.abs(e.deltaY) > Math.abs(e.deltaX) && !e.shiftKey) zoom(e.deltaY > 0 ? 1.25 : 0.8, centre);
      else pan((e.deltaX || e.deltaY) > 0 ? 0.1 : -0.1);
    }, { passive: false });
    let dragX: number | undefined;
    chart.addEventListener('pointerdown', (e) => { dragX = e.clientX; });
    chart.addEventListener('pointerup', () => { dragX = undefined; });
    chart.addEventListener('pointermove', (e) => {
      if (dragX === undefined || e.buttons !== 1) return;
      const box = chart.getBoundingClientRect();
      const dxUs = ((dragX - e.clientX) / box.width) * CHART_WIDTH / (CHART_WIDTH - LABEL_WIDTH) * (view.endUs - view.startUs);
      dragX = e.clientX;
      const span = view.endUs - view.startUs;
      const start = Math.max(full.startUs, Math.min(full.endUs - span, view.startUs + dxUs));
      view = { startUs: start, endUs: start + span };
      draw();
    });
    const show = (e: Event) => {
      const g = (e.target as Element).closest('.span, .mark-event');
      if (g) details.textContent = g.getAttribute('aria-label') ?? '';
    };
    chart.addEventListener('mouseover', show);
    chart.addEventListener('focusin', show);
    container.replaceChildren(chart);
    if (focusedKey === 'chart') chart.focus();
  }

  /** A re-plan (instant event) as a line across its trace's lanes, focusable, with its reason. */
  function drawMarks(chart: SVGSVGElement, parsed: ParsedTrace, top: number, bottom: number, traceLabel: string): void {
    for (const m of parsed.marks) {
      if (m.atUs < view.startUs || m.atUs > view.endUs) continue;
      const x = xOf(m.atUs, view);
      const reason = typeof m.args.reason === 'string' ? `: ${m.args.reason}` : '';
      const label = `${traceLabel} · ${m.name} at ${formatUs(m.atUs - full.startUs)}${reason}`;
      const g = svg('g', { class: 'mark-event', role: 'img', tabindex: -1, 'aria-label': label, 'data-at-us': m.atUs });
      g.append(svg('line', { class: 'mark-line', x1: x, x2: x, y1: top + 2, y2: bottom }));
      g.append(svg('path', { class: 'mark-flag', d: `M ${x} ${top + 2} l 7 4 l -7 4 z` }));
      g.append(svg('text', { class: 'mark-label', x: x + 9, y: top + ROW_HEIGHT / 2 + 4 }, 're-plan'));
      chart.append(g);
    }
  }

  function drawLane(chart: SVGSVGElement, lane: TraceLane, y: number, traceLabel: string): void {
    const cls = laneClass(lane.lane);
    const total = full.endUs - full.startUs;
    chart.append(svg('rect', { class: 'lane-bg', x: LABEL_WIDTH, y: y + 2, width: CHART_WIDTH - LABEL_WIDTH, height: ROW_HEIGHT - 4 }));
    chart.append(svg('text', { class: 'lane-label', x: LABEL_WIDTH - 6, y: y + ROW_HEIGHT / 2 + 4, 'text-anchor': 'end', 'data-busy-us': lane.busyUs },
      `${lane.lane} ${Math.round((100 * lane.busyUs) / total)}% busy`));
    for (const s of lane.spans) {
      if (s.startUs + s.durUs < view.startUs || s.startUs > view.endUs) continue;
      const x0 = Math.max(LABEL_WIDTH, xOf(s.startUs, view));
      const x1 = Math.min(CHART_WIDTH, xOf(s.startUs + s.durUs, view));
      const w = Math.max(0.5, x1 - x0);
      const where = [s.args.layer !== undefined ? `layer ${String(s.args.layer)}` : '', s.args.op !== undefined ? String(s.args.op) : ''].filter(Boolean).join(' ');
      const label = `${traceLabel} · ${s.section} · ${lane.lane}: ${s.name}${where && !s.name.includes(where) ? ` (${where})` : ''} at ${formatUs(s.startUs - full.startUs)} for ${formatUs(s.durUs)}`;
      const g = svg('g', { class: `span ${cls}`, role: 'img', 'aria-label': label, 'data-lane': lane.key, 'data-section': s.section, 'data-start-us': s.startUs, 'data-dur-us': s.durUs });
      g.append(svg('rect', { x: x0, y: y + 3, width: w, height: ROW_HEIGHT - 6 }));
      if (w > 40) g.append(svg('text', { class: 'span-label', x: x0 + 3, y: y + ROW_HEIGHT / 2 + 4 }, s.name.slice(0, Math.floor(w / 6.5))));
      chart.append(g);
    }
  }

  root.replaceChildren(header, toolbar, container, details);
  draw();
}
