// The what-if panel: controls for VRAM, context, generated tokens, batch, weight format and a
// GPU preset ("this machine with a GPU I do not have"). Every change re-plans through the engine
// at once; the newest request supersedes older ones. Results show the baseline, the what-if and
// the difference, and how long the re-plan took from the input to the redrawn panel.
import type { Plan } from '../../engine/server/protocol';
import { el } from '../shared/dom';
import { formatBytes, formatMs, formatPercent } from '../shared/format';
import { renderExplanationBody } from '../explain/render';
import type { WhatIfSettings, WhatIfViewData } from './types';

type Post = (action: string, args: Record<string, unknown>) => void;

const CONTEXTS = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072];

interface Session { id: string; results: HTMLElement; timing: HTMLElement; sentAt: Map<number, number>; latest: number }
let session: Session | undefined;

function gpuLayers(plan: Plan): number {
  return plan.stages.decode.layers.filter((l) => l.ops.every((o) => o.weights === undefined || (o.device === 'gpu' && o.weights === 'gpu'))).length;
}

function kvWhere(plan: Plan): string {
  const n = plan.stages.decode.layers.length;
  const gpu = plan.stages.decode.layers.filter((l) => l.kv.device === 'gpu').length;
  return gpu === n ? 'VRAM' : gpu === 0 ? 'host' : `${gpu}/${n} layers in VRAM`;
}

function labelled(id: string, label: string, control: HTMLElement): HTMLElement {
  const wrap = el('div', { class: 'control' });
  wrap.append(el('label', { for: id }, label), control);
  return wrap;
}

function select(id: string, options: [string, string][], value: string): HTMLSelectElement {
  const s = el('select', { id });
  for (const [v, text] of options) {
    const o = el('option', { value: v }, text);
    if (v === value) o.selected = true;
    s.append(o);
  }
  return s;
}

export function renderWhatIf(root: HTMLElement, data: WhatIfViewData, post: Post): void {
  if (session?.id !== data.session || !root.contains(session.results)) buildControls(root, data, post);
  showResults(data);
}

function buildControls(root: HTMLElement, data: WhatIfViewData, post: Post): void {
  const s = data.baselineSettings;
  const header = el('header');
  header.append(el('h1', {}, `What if…: ${data.modelLabel}`));
  header.append(el('p', { class: 'summary' }, `Baseline: ${data.baseline.chosenPolicy} on ${data.hardware}, ${data.baseline.predicted.tokensPerSecond.toFixed(1)} tokens/s. Change a control: the engine re-plans at once.`));

  const vramMax = Math.max(48, Math.ceil(data.baseline.memory.gpuCapacityBytes / 2 ** 30) * 2);
  const vramOn = el('input', { id: 'vram-override', type: 'checkbox' });
  vramOn.checked = s.vramGiB !== null;
  const vram = el('input', { id: 'vram', type: 'range', min: '0', max: String(vramMax), step: '0.5', value: String(s.vramGiB ?? data.baseline.memory.gpuCapacityBytes / 2 ** 30) });
  const vramValue = el('output', { id: 'vram-value', for: 'vram' });
  const prompt = select('prompt', CONTEXTS.map((c) => [String(c), `${c} tokens`]), String(s.prompt));
  if (!CONTEXTS.includes(s.prompt)) prompt.prepend(el('option', { value: String(s.prompt), selected: '' }, `${s.prompt} tokens`));
  const gen = el('input', { id: 'gen', type: 'number', min: '1', max: '8192', value: String(s.gen) });
  const batch = el('input', { id: 'batch', type: 'number', min: '1', max: '256', value: String(s.batch) });
  const format = select('format', [['', data.modelIsPreset ? 'preset default' : "the file's own"], ...data.presets.formats.map((f): [string, string] => [f, f])], s.format ?? '');
  if (!data.modelIsPreset) format.disabled = true;
  const gpu = select('gpu', [['', 'as profiled / as given'], ...data.presets.gpus.map((g): [string, string] => [g.key, `${g.key} (${formatBytes(g.memoryBytes)})`])], s.gpu ?? '');

  const controls = el('form', { class: 'controls', 'aria-label': 'What-if settings' });
  const vramRow = el('div', { class: 'control' });
  vramRow.append(el('label', { for: 'vram-override' }, 'Set VRAM'), vramOn, el('label', { for: 'vram', class: 'visually-hidden' }, 'VRAM budget in GiB'), vram, vramValue);
  controls.append(vramRow, labelled('prompt', 'Context (prompt tokens)', prompt), labelled('gen', 'Generated tokens', gen),
    labelled('batch', 'Batch (sequences)', batch), labelled('format', 'Weight format', format), labelled('gpu', 'GPU preset', gpu));
  controls.addEventListener('submit', (e) => e.preventDefault());
  const timing = el('p', { id: 'replan-time', class: 'muted', 'aria-live': 'polite' });
  const results = el('div', { id: 'whatif-results' });
  const note = el('p', { class: 'muted' }, `Thread count is not a what-if yet: the engine plans with the profiled CPU. GPU presets on 'this' send --hardware this+GPU.`);
  root.replaceChildren(header, controls, note, timing, results);
  session = { id: data.session, results, timing, sentAt: new Map(), latest: 0 };

  const read = (): WhatIfSettings => ({
    vramGiB: vramOn.checked ? Number(vram.value) : null,
    prompt: Number(prompt.value), gen: Math.max(1, Math.round(Number(gen.value) || 1)), batch: Math.max(1, Math.round(Number(batch.value) || 1)),
    format: format.value || null, gpu: gpu.value || null,
  });
  const update = () => {
    vram.disabled = !vramOn.checked;
    vramValue.textContent = vramOn.checked ? `${Number(vram.value).toFixed(1)} GiB` : 'hardware default';
  };
  let nextId = 1;
  const send = () => {
    update();
    const requestId = nextId++;
    session!.sentAt.set(requestId, performance.now());
    session!.latest = requestId;
    timing.textContent = 'Re-planning…';
    post('replan', { requestId, settings: read() });
  };
  update();
  for (const c of [vramOn, prompt, format, gpu]) c.addEventListener('change', send);
  for (const c of [vram, gen, batch]) c.addEventListener('input', send);
}

function row(label: string, base: string, current: string, delta = ''): HTMLTableRowElement {
  const r = el('tr');
  r.append(el('th', { scope: 'row' }, label), el('td', { class: 'num' }, base), el('td', { class: 'num' }, current), el('td', { class: 'num delta' }, delta));
  return r;
}

function showResults(data: WhatIfViewData): void {
  const s = session!;
  const base = data.baseline;
  if (data.error) {
    if (data.error.requestId !== s.latest) return;
    s.results.replaceChildren(el('p', { class: 'error', role: 'alert', id: 'whatif-error' }, data.error.message));
    s.timing.textContent = '';
    return;
  }
  const cur = data.current?.plan ?? base;
  // A result for an older request than the newest sent is stale: the engine superseded it.
  if (data.current && data.current.requestId !== s.latest) return;
  const table = el('table', { id: 'whatif-compare' });
  table.append(el('caption', {}, data.current ? `Baseline vs what-if (${data.current.hardware})` : 'Baseline'));
  const head = el('tr');
  for (const h of ['', 'Baseline', 'What-if', 'Change']) head.append(el('th', { scope: 'col', class: h ? 'num' : '' }, h));
  table.createTHead().append(head);
  const body = el('tbody');
  const rel = (a: number, b: number) => (a > 0 ? formatPercent(b / a - 1) : '');
  body.append(
    row('Policy', base.chosenPolicy, cur.chosenPolicy, base.chosenPolicy === cur.chosenPolicy ? '' : 'changed'),
    row('Tokens/s (decode)', base.predicted.tokensPerSecond.toFixed(1), cur.predicted.tokensPerSecond.toFixed(1), rel(base.predicted.tokensPerSecond, cur.predicted.tokensPerSecond)),
    row('Decode step', formatMs(base.predicted.stepMs), formatMs(cur.predicted.stepMs), rel(base.predicted.stepMs, cur.predicted.stepMs)),
    row('Prefill', formatMs(base.predicted.prefillMs), formatMs(cur.predicted.prefillMs), rel(base.predicted.prefillMs, cur.predicted.prefillMs)),
    row('Layers on the GPU', `${gpuLayers(base)}/${base.model.nLayers}`, `${gpuLayers(cur)}/${cur.model.nLayers}`, String(gpuLayers(cur) - gpuLayers(base) || '')),
    row('KV cache', kvWhere(base), kvWhere(cur)),
    row('VRAM used', formatBytes(base.memory.gpuBytes), formatBytes(cur.memory.gpuBytes), `of ${formatBytes(cur.memory.gpuCapacityBytes)}`),
  );
  body.querySelectorAll('tr')[1]?.setAttribute('data-tokens-per-second', String(cur.predicted.tokensPerSecond));
  table.append(body);
  s.results.replaceChildren(table, el('h2', {}, 'Explanation of the what-if plan'), ...renderExplanationBody(cur));
  if (data.current) {
    const sent = s.sentAt.get(data.current.requestId);
    // Measured after the browser has laid out and painted the new table.
    requestAnimationFrame(() => requestAnimationFrame(() => {
      if (sent !== undefined) {
        const ms = performance.now() - sent;
        s.timing.textContent = `Re-planned and redrawn in ${ms.toFixed(0)} ms.`;
        s.timing.setAttribute('data-ms', ms.toFixed(1));
      }
    }));
  }
}
