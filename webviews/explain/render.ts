// The explanation: the plan's decisions, each with the alternatives and their predicted costs,
// why each lost, and the binding resource; then the what-if suggestions the engine computed.
import type { Decision, Plan } from '../../engine/server/protocol';
import { el, svg } from '../shared/dom';
import { formatMs, formatPercent } from '../shared/format';

export const RESOURCE_WORDS: Record<string, string> = {
  'vram-capacity': 'VRAM capacity', 'pcie-bandwidth': 'PCIe bandwidth', 'cpu-memory-bandwidth': 'CPU memory bandwidth',
  'gpu-compute': 'GPU compute', 'cpu-compute': 'CPU compute', 'gpu-memory-bandwidth': 'GPU memory bandwidth',
  'host-memory-capacity': 'host memory capacity', 'nvme-bandwidth': 'NVMe bandwidth', 'launch-overhead': 'kernel launch overhead',
};

function metricText(value: number | null, metric: string): string {
  if (value === null || !Number.isFinite(value)) return '—';
  return metric === 'tokensPerSecond' ? `${value.toFixed(1)} tok/s` : formatMs(value);
}

function decisionSection(d: Decision, index: number): HTMLElement {
  const section = el('section', { class: 'decision', 'data-decision': d.id, 'aria-labelledby': `decision-${index}` });
  section.append(el('h2', { id: `decision-${index}` }, `${d.id}: ${d.chosen}`));
  section.append(el('p', {}, d.reason));
  section.append(el('p', { class: 'muted' }, `Binding resource: ${RESOURCE_WORDS[d.binding] ?? d.binding}`));
  if (d.alternatives.length === 0) return section;
  const values = d.alternatives.map((a) => (a.predictedMs === null || !Number.isFinite(a.predictedMs) ? 0 : a.predictedMs));
  const max = Math.max(...values, 0);
  const table = el('table', { class: 'alternatives' });
  table.append(el('caption', {}, `Alternatives for ${d.id}`));
  const head = el('tr');
  for (const h of ['Alternative', 'Predicted', '', 'Why it lost']) head.append(el('th', { scope: 'col', class: h === 'Predicted' ? 'num' : '' }, h));
  table.createTHead().append(head);
  const body = el('tbody');
  d.alternatives.forEach((a, i) => {
    const chosen = a.note === 'chosen';
    const row = el('tr', { class: chosen ? 'chosen' : '', 'data-ms': String(a.predictedMs ?? '') });
    row.append(el('th', { scope: 'row' }, chosen ? `${a.label} (chosen)` : a.label));
    row.append(el('td', { class: 'num' }, metricText(a.predictedMs, a.metric)));
    const barCell = el('td', { class: 'bar-cell' });
    if (max > 0 && values[i]! > 0) {
      const bar = svg('svg', { class: 'alt-bar', viewBox: '0 0 100 8', preserveAspectRatio: 'none', 'aria-hidden': 'true' });
      bar.append(svg('rect', { class: chosen ? 'alt-fill chosen' : 'alt-fill', x: 0, y: 0, width: (100 * values[i]!) / max, height: 8 }));
      barCell.append(bar);
    }
    row.append(barCell, el('td', {}, chosen ? '—' : a.note ?? ''));
    body.append(row);
  });
  table.append(body);
  const wrap = el('div', { class: 'scroll-x' });
  wrap.append(table);
  section.append(wrap);
  return section;
}

export function renderExplanationBody(plan: Plan): HTMLElement[] {
  const e = plan.explanation;
  const out: HTMLElement[] = [el('p', { id: 'explain-summary' }, e.summary),
    el('p', { class: 'note' }, `Binding resource overall: ${RESOURCE_WORDS[e.binding] ?? e.binding}`)];
  e.decisions.forEach((d, i) => out.push(decisionSection(d, i)));
  if (e.whatIf.length) {
    const table = el('table', { id: 'whatif-table' });
    table.append(el('caption', {}, 'What if…'));
    const head = el('tr');
    for (const h of ['Change', 'Predicted effect', 'Tokens/s']) head.append(el('th', { scope: 'col', class: h === 'Tokens/s' ? 'num' : '' }, h));
    table.createTHead().append(head);
    const body = el('tbody');
    for (const w of e.whatIf) {
      const row = el('tr');
      row.append(el('th', { scope: 'row' }, w.change), el('td', {}, w.effect), el('td', { class: 'num' }, formatPercent(w.speedup)));
      body.append(row);
    }
    table.append(body);
    out.push(table);
  }
  return out;
}

export function renderExplain(root: HTMLElement, plan: Plan): void {
  const header = el('header');
  header.append(el('h1', {}, `Why this plan: ${plan.model.name}`));
  header.append(el('p', { class: 'summary' }, `${plan.chosenPolicy} on ${plan.hardware.name} · ${plan.predicted.tokensPerSecond.toFixed(1)} tokens/s predicted · ` +
    `batch ${plan.workload.batch}, prompt ${plan.workload.prompt}, gen ${plan.workload.gen}`));
  root.replaceChildren(header, ...renderExplanationBody(plan));
}
