// Builds the panel's DOM: model header, legend, SVG stacked bars and the same numbers as a
// table (the accessible reading of the chart). Only SVG attributes and CSS classes are set, never
// inline styles, so the strict Content-Security-Policy holds.
import type { LayersResult } from '../../engine/server/protocol';
import type { ToLayersView } from './messages';
import { GROUP_LABELS, GROUPS, formatBytes, groupBytes, layoutChart } from './chart';

const SVG_NS = 'http://www.w3.org/2000/svg';

function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number> = {}, text?: string): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

export function renderStatus(root: HTMLElement, message: string, isError: boolean): void {
  root.replaceChildren(el('p', { id: 'status', class: isError ? 'status error' : 'status', role: isError ? 'alert' : 'status' }, message));
}

type LayersMessage = Extract<ToLayersView, { type: 'layers' }>;

/** The chart's label column: wider when the labels carry where the layer runs ("embedding & output · GPU+CPU"). */
function labelWidth(runsOn: LayersMessage['runsOn']): number {
  return runsOn ? 200 : 140;
}

/**
 * The chart is laid out in the figure's own pixel width (not scaled from a fixed one), so its
 * labels keep the panel's text size in a narrow editor column; it is drawn again on resize.
 */
function chartWidth(figure: HTMLElement): number {
  return Math.max(320, Math.min(960, Math.floor(figure.clientWidth || 960)));
}

export function renderLayers(root: HTMLElement, message: LayersMessage): void {
  const { data, runsOn } = message;
  const { model, layers } = data;
  const total = layers.reduce((s, l) => s + l.totalBytes, 0);

  const header = el('header');
  header.append(el('h1', {}, `Model layers: ${model.name}`));
  header.append(el('p', { class: 'summary' },
    `${model.architecture} · ${model.nLayers} layers · ${model.parameters.toLocaleString('en-US')} parameters · ` +
    `weights ${formatBytes(total)} · file ${formatBytes(model.fileBytes)} · context ${model.contextLength} · ` +
    `KV cache ${model.kvFormat}, ${formatBytes(model.kvBytesPerToken)} per position (${formatBytes(model.kvBytesPerToken * model.contextLength)} for the context)`));
  // What runs (the "Runs on" column) and, apart from it, the plan panels' what-if plan.
  if (message.split !== undefined) header.append(el('p', { id: 'executing', class: 'summary' }, `Executing: ${message.split}`));
  if (message.whatIf !== undefined) header.append(el('p', { id: 'what-if', class: 'summary' }, `Plan panels (what-if for ${message.whatIf})`));

  const legend = el('ul', { class: 'legend', 'aria-label': 'Legend' });
  for (const g of GROUPS) {
    const item = el('li');
    item.append(el('span', { class: `swatch seg-${g}`, 'aria-hidden': 'true' }), document.createTextNode(GROUP_LABELS[g]));
    legend.append(item);
  }

  const figure = el('figure');
  const table = layersTable(message, total);
  // The table's title sits outside the region that scrolls sideways, so it stays in view.
  const title = el('h2', { id: 'layers-table-title', class: 'table-title' }, 'Weight bytes per layer');
  const tableWrap = el('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-labelledby': 'layers-table-title' });
  tableWrap.append(table);
  root.replaceChildren(header, legend, figure, title, tableWrap);

  const draw = () => {
    const width = chartWidth(figure);
    if (figure.dataset['width'] === String(width)) return;
    figure.dataset['width'] = String(width);
    const label = labelWidth(runsOn);
    const chart = layersChart(layers, runsOn, Math.max(120, width - label - 40), label);
    figure.replaceChildren(chart);
  };
  draw();
  linkHighlight(figure, table.tBodies[0]!);
  if (typeof ResizeObserver !== 'undefined') {
    resizeObserver?.disconnect();
    resizeObserver = new ResizeObserver(() => { if (figure.isConnected) draw(); });
    resizeObserver.observe(figure);
  }
}

/** One observer for the panel's one chart: a new render replaces it. */
let resizeObserver: ResizeObserver | undefined;

function layersChart(layers: LayersResult['layers'], runsOn: LayersMessage['runsOn'], barAreaWidth: number, labelWidth: number): SVGSVGElement {
  const layout = layoutChart(layers, barAreaWidth, labelWidth);
  const chart = svg('svg', {
    id: 'layers-chart', class: 'chart', viewBox: `0 0 ${layout.width} ${layout.height}`, width: layout.width, height: layout.height,
    role: 'group', 'aria-label': `Weight bytes per layer, split by attention, FFN, norm and other; largest ${formatBytes(layout.maxBytes)}`,
  });
  for (const tick of layout.ticks) {
    chart.append(svg('line', { class: 'tick', x1: tick.x, x2: tick.x, y1: layout.top - 4, y2: layout.height }));
    chart.append(svg('text', { class: 'tick-label', x: tick.x, y: layout.top - 10, 'text-anchor': 'middle' }, formatBytes(Math.round(tick.bytes))));
  }
  for (const bar of layout.bars) {
    const { layer } = bar;
    const where = runsOn?.[layer.index];
    const description = `${layer.label}${where ? ` (runs on ${where})` : ''}: ` + GROUPS.map((g) => `${GROUP_LABELS[g]} ${formatBytes(groupBytes(layer, g))}`).join(', ') +
      `; total ${formatBytes(layer.totalBytes)}`;
    const group = svg('g', { class: 'bar', tabindex: 0, role: 'img', 'aria-label': description, 'data-layer': layer.index, 'data-label': layer.label });
    group.append(svg('title', {}, description));
    group.append(svg('text', { class: 'bar-label', x: layout.labelWidth - 8, y: bar.y + layout.barHeight / 2, 'text-anchor': 'end', 'dominant-baseline': 'middle' }, where ? `${layer.label} · ${where}` : layer.label));
    for (const seg of bar.segments) {
      if (seg.bytes === 0) continue;
      group.append(svg('rect', {
        class: `seg seg-${seg.group}`, x: seg.x, y: bar.y, width: seg.width, height: layout.barHeight,
        'data-group': seg.group, 'data-bytes': seg.bytes,
      }));
    }
    chart.append(group);
  }
  return chart;
}

function layersTable(message: LayersMessage, total: number): HTMLTableElement {
  const { data: { layers }, runsOn } = message;
  const table = el('table', { id: 'layers-table', 'aria-labelledby': 'layers-table-title' });
  const headRow = el('tr');
  for (const h of ['Layer', ...(runsOn ? ['Runs on'] : []), ...GROUPS.map((g) => GROUP_LABELS[g]), 'Total', 'Share']) headRow.append(el('th', { scope: 'col', ...(h === 'Runs on' ? { class: 'runs-on' } : {}) }, h));
  table.createTHead().append(headRow);
  const body = el('tbody');
  for (const layer of layers) {
    const row = el('tr', { 'data-layer': String(layer.index), 'data-label': layer.label });
    row.append(el('th', { scope: 'row' }, layer.label));
    if (runsOn) row.append(el('td', { class: 'runs-on', 'data-runs-on': runsOn[layer.index] ?? '' }, runsOn[layer.index] ?? '–'));
    for (const g of GROUPS) row.append(bytesCell(groupBytes(layer, g), g));
    row.append(bytesCell(layer.totalBytes, 'total'));
    row.append(el('td', { class: 'num' }, total > 0 ? `${((100 * layer.totalBytes) / total).toFixed(1)} %` : '–'));
    body.append(row);
  }
  table.append(body);
  const foot = el('tr');
  foot.append(el('th', { scope: 'row' }, 'All'));
  if (runsOn) foot.append(el('td', {}, ''));
  for (const g of GROUPS) foot.append(bytesCell(layers.reduce((s, l) => s + groupBytes(l, g), 0), g));
  foot.append(bytesCell(total, 'total'), el('td', { class: 'num' }, total > 0 ? '100.0 %' : '–'));
  table.createTFoot().append(foot);

  return table;
}

function bytesCell(bytes: number, group: string): HTMLTableCellElement {
  return el('td', { class: 'num', 'data-group': group, 'data-bytes': String(bytes), title: `${bytes.toLocaleString('en-US')} bytes` }, formatBytes(bytes));
}

/** Focusing or hovering a bar marks its table row, and the other way round (the chart inside `figure` is redrawn on resize). */
function linkHighlight(figure: HTMLElement, body: HTMLTableSectionElement): void {
  const mark = (label: string | null, on: boolean) => {
    if (label === null) return;
    for (const node of [...Array.from(figure.querySelectorAll('.bar')), ...Array.from(body.querySelectorAll('tr'))]) {
      if (node.getAttribute('data-label') === label) node.classList.toggle('highlight', on);
    }
  };
  for (const type of ['focusin', 'mouseover', 'focusout', 'mouseout'] as const) {
    const on = type === 'focusin' || type === 'mouseover';
    const handler = (e: Event) => {
      const target = (e.target as Element | null)?.closest('[data-label]');
      mark(target?.getAttribute('data-label') ?? null, on);
    };
    figure.addEventListener(type, handler);
    body.addEventListener(type, handler);
  }
}
