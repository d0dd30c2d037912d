// The Model Layers webview in headless Chromium, fed the real layer summary of
// ../shared/models/stories260K.gguf through the same postMessage channel the extension uses.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { readGguf } from '../../engine/model/gguf/index';
import { layerSummaries, summarizeModel } from '../../engine/model/summary';
import type { LayersResult } from '../../engine/server/protocol';
import { repoRoot, sharedPath, skipUnlessShared } from '../helpers/shared';
import { SCREENSHOTS, launchChromium, skipUnlessChromium } from './browser';
import { startLayersHarness, type Harness } from './harness';

const MODEL = sharedPath('models', 'stories260K.gguf');
const skip = skipUnlessChromium() || skipUnlessShared(MODEL);
const GROUPS = ['attention', 'ffn', 'norm', 'other'] as const;

let browser: Browser | undefined;
let harness: Harness | undefined;
let page: Page;
let data: LayersResult;
const cspViolations: string[] = [];

before(async () => {
  if (skip) return;
  // The shipped bundle (dist/webviews/layers.js + layers.css), freshly built.
  const build = spawnSync(process.execPath, ['scripts/bundle.mjs'], { cwd: repoRoot, encoding: 'utf8' });
  assert.equal(build.status, 0, `bundle failed:\n${build.stdout}\n${build.stderr}`);
  const file = readGguf(MODEL);
  data = { model: summarizeModel(file), layers: layerSummaries(file) };
  harness = await startLayersHarness(path.join(repoRoot, 'dist', 'webviews'));
  browser = await launchChromium();
  page = await (await browser.newContext({ viewport: { width: 1000, height: 760 } })).newPage();
  page.on('console', (m) => { if (/Content Security Policy/i.test(m.text())) cspViolations.push(m.text()); });
  await page.goto(harness.url);
  await page.waitForFunction(() => (window as unknown as { __posted: { type: string }[] }).__posted.some((m) => m.type === 'ready'));
});

after(async () => {
  await browser?.close();
  await harness?.close();
});

async function post(message: unknown): Promise<void> {
  await page.evaluate((m) => window.postMessage(m, '*'), message);
}

test('the page asks for data with a ready message and shows a waiting status', { skip }, async () => {
  assert.match(await page.locator('#status').textContent() ?? '', /Waiting for the engine/);
  assert.deepEqual(cspViolations, [], 'the page itself must load under its CSP');
});

test('renders one stacked bar and one table row per layer of stories260K', { skip }, async () => {
  await post({ type: 'layers', data });
  await page.locator('#layers-chart g.bar').first().waitFor();
  assert.ok(data.layers.length >= 2, 'the model has layers');
  assert.equal(await page.locator('#layers-chart g.bar').count(), data.layers.length);
  assert.equal(await page.locator('#layers-table tbody tr').count(), data.layers.length);
  assert.match(await page.locator('h1').textContent() ?? '', new RegExp(data.model.name));
  // The KV cache's format and size beside the weights (fulcrum.execution.kvFormat).
  assert.match(await page.locator('header .summary').first().textContent() ?? '', /KV cache F16, 640 B per position \(1\.25 MiB for the context\)$/);
  await page.screenshot({ path: path.join(SCREENSHOTS, 'webview-layers.png'), fullPage: true });
});

test('bar segments are sized in proportion to the bytes of each group', { skip }, async () => {
  const rects = await page.locator('#layers-chart rect.seg').evaluateAll((nodes) => nodes.map((n) => ({
    layer: Number(n.parentElement?.getAttribute('data-layer')),
    group: n.getAttribute('data-group') ?? '',
    bytes: Number(n.getAttribute('data-bytes')),
    px: n.getBoundingClientRect().width,
  })));
  // Every non-empty group of every layer is drawn, with its bytes.
  const expected = data.layers.flatMap((l) => GROUPS.map((g) => ({ layer: l.index, group: g, bytes: groupBytes(l, g) })))
    .filter((e) => e.bytes > 0);
  assert.deepEqual(rects.map(({ layer, group, bytes }) => ({ layer, group, bytes })), expected);
  // One scale for all: rendered pixels per byte are the same for every segment.
  const maxTotal = Math.max(...data.layers.map((l) => l.totalBytes));
  const widest = Math.max(...data.layers.map((l) => rects.filter((r) => r.layer === l.index).reduce((s, r) => s + r.px, 0)));
  const pxPerByte = widest / maxTotal;
  assert.ok(widest > 300, `the widest bar spans most of the chart (${widest} px)`);
  for (const r of rects) {
    assert.ok(Math.abs(r.px - r.bytes * pxPerByte) < 0.75, `layer ${r.layer} ${r.group}: ${r.px} px for ${r.bytes} bytes, expected ${r.bytes * pxPerByte}`);
  }
  // Segments of a bar touch end to end (stacked), left to right in group order.
  const layout = await page.locator('#layers-chart g.bar').first().evaluate((g) =>
    Array.from(g.querySelectorAll('rect')).map((r) => [Number(r.getAttribute('x')), Number(r.getAttribute('width'))] as const));
  for (let i = 1; i < layout.length; i++) assert.ok(Math.abs(layout[i]![0] - (layout[i - 1]![0] + layout[i - 1]![1])) < 1e-6);
});

test('the table holds the exact bytes per group, per layer and in total', { skip }, async () => {
  const rows = await page.locator('#layers-table tbody tr').evaluateAll((trs) => trs.map((tr) => ({
    label: tr.querySelector('th')?.textContent ?? '',
    cells: Object.fromEntries(Array.from(tr.querySelectorAll('td[data-group]')).map((td) => [td.getAttribute('data-group'), Number(td.getAttribute('data-bytes'))])),
  })));
  assert.deepEqual(rows.map((r) => r.label), data.layers.map((l) => l.label));
  data.layers.forEach((l, i) => {
    const cells = rows[i]!.cells;
    for (const g of GROUPS) assert.equal(cells[g], groupBytes(l, g), `${l.label} ${g}`);
    assert.equal(cells.total, l.totalBytes, `${l.label} total`);
    assert.equal(GROUPS.reduce((s, g) => s + groupBytes(l, g), 0), l.totalBytes, `${l.label}: groups add up to the total`);
  });
  const footTotal = await page.locator('#layers-table tfoot td[data-group="total"]').getAttribute('data-bytes');
  assert.equal(Number(footTotal), data.layers.reduce((s, l) => s + l.totalBytes, 0));
  // The table is named by the heading above its scrolling region.
  assert.equal(await page.locator('#layers-table').getAttribute('aria-labelledby'), 'layers-table-title');
  assert.equal(await page.locator('#layers-table-title').textContent(), 'Weight bytes per layer');
});

test('colours come from the VS Code theme variables', { skip }, async () => {
  await page.evaluate(() => document.documentElement.style.setProperty('--vscode-charts-blue', 'rgb(1, 2, 3)'));
  const fill = await page.locator('#layers-chart rect.seg-attention').first().evaluate((n) => getComputedStyle(n).fill);
  assert.equal(fill, 'rgb(1, 2, 3)');
});

test('keyboard focus on a bar highlights its table row', { skip }, async () => {
  await page.locator('#layers-chart g.bar').nth(1).focus();
  const label = await page.locator('#layers-chart g.bar').nth(1).getAttribute('data-label');
  const row = page.locator(`#layers-table tbody tr[data-label="${label}"]`);
  assert.match(await row.getAttribute('class') ?? '', /highlight/);
});

test('"Runs on" shows where each layer executes, with the executed split and the what-if plan apart', { skip }, async () => {
  // As the extension sends it for a model that runs its layers on a GPU and its head on the CPU.
  const runsOn: Record<number, string> = { [-1]: 'CPU' };
  for (const l of data.layers) if (l.index >= 0) runsOn[l.index] = l.index % 2 === 0 ? 'GPU' : 'GPU+CPU';
  await post({ type: 'layers', data, runsOn, split: 'GPU 3/5 layers (+2 split) · KV host', whatIf: 'laptop GPU: lia, GPU 5/5 · KV GPU' });
  await page.locator('#executing').waitFor();
  const cells = await page.locator('#layers-table tbody td.runs-on').allTextContents();
  assert.deepEqual(cells, data.layers.map((l) => runsOn[l.index]));
  const labels = await page.locator('#layers-chart text.bar-label').allTextContents();
  assert.deepEqual(labels, data.layers.map((l) => `${l.label} · ${runsOn[l.index]}`));
  assert.equal(await page.locator('#executing').textContent(), 'Executing: GPU 3/5 layers (+2 split) · KV host');
  assert.equal(await page.locator('#what-if').textContent(), 'Plan panels (what-if for laptop GPU: lia, GPU 5/5 · KV GPU)');
  // Without an execution (e.g. the engine answered before loading) no "Runs on" column is made up.
  await post({ type: 'layers', data });
  await page.locator('#layers-chart g.bar').first().waitFor();
  assert.equal(await page.locator('#layers-table td.runs-on').count(), 0);
  assert.equal(await page.locator('#executing').count(), 0);
});

test('in a narrow editor column the chart keeps its text size and the table scrolls with the layer names in view', { skip }, async () => {
  const narrow = await browser!.newPage({ viewport: { width: 480, height: 760 } });
  try {
    await narrow.goto(harness!.url);
    await narrow.waitForFunction(() => (window as unknown as { __posted: { type: string }[] }).__posted.some((m) => m.type === 'ready'));
    const runsOn: Record<number, string> = Object.fromEntries(data.layers.map((l) => [l.index, 'GPU+CPU']));
    await narrow.evaluate((m) => window.postMessage(m, '*'), { type: 'layers', data, runsOn, split: 'CPU only', whatIf: 'laptop GPU: auto, GPU 5/5 · KV GPU' });
    await narrow.locator('#layers-chart g.bar').first().waitFor();
    // The chart is laid out in the panel's width: one SVG unit per pixel, so 11 px labels stay 11 px.
    const scale = await narrow.locator('#layers-chart').evaluate((svgNode) => svgNode.getBoundingClientRect().width / (svgNode as SVGSVGElement).viewBox.baseVal.width);
    assert.ok(Math.abs(scale - 1) < 0.01, `chart drawn at its own size (scale ${scale})`);
    const labelPx = await narrow.locator('#layers-chart text.bar-label').first().evaluate((t) => t.getBoundingClientRect().height);
    assert.ok(labelPx >= 10, `bar labels readable (${labelPx} px tall)`);
    const chartRight = await narrow.locator('#layers-chart').evaluate((n) => n.getBoundingClientRect().right);
    assert.ok(chartRight <= 480, `the chart fits the panel (right edge ${chartRight})`);
    // The table is wider than the panel: its region scrolls sideways, and the layer names stay.
    const wrap = narrow.locator('.table-wrap');
    const { scrollWidth, clientWidth } = await wrap.evaluate((n) => ({ scrollWidth: n.scrollWidth, clientWidth: n.clientWidth }));
    await narrow.screenshot({ path: path.join(SCREENSHOTS, 'webview-layers-narrow.png'), fullPage: true });
    if (scrollWidth > clientWidth) {
      await wrap.evaluate((n) => { n.scrollLeft = n.scrollWidth; });
      const box = await wrap.evaluate((n) => n.getBoundingClientRect().toJSON() as DOMRect);
      const first = await narrow.locator('#layers-table tbody tr th').first().evaluate((n) => n.getBoundingClientRect().toJSON() as DOMRect);
      const last = await narrow.locator('#layers-table thead th').last().evaluate((n) => n.getBoundingClientRect().toJSON() as DOMRect);
      assert.ok(Math.abs(first.left - box.left) < 1, `the layer column stays at the left edge (${first.left} vs ${box.left})`);
      assert.ok(last.right <= box.right + 1, `the last column scrolls into view (${last.right} vs ${box.right})`);
      await narrow.screenshot({ path: path.join(SCREENSHOTS, 'webview-layers-narrow-scrolled.png'), fullPage: true });
    }
  } finally {
    await narrow.close();
  }
});

test('the Content-Security-Policy blocks scripts without the nonce', { skip }, async () => {
  const blocked = await page.evaluate(() => new Promise<boolean>((resolve) => {
    document.addEventListener('securitypolicyviolation', () => resolve(true), { once: true });
    const s = document.createElement('script');
    s.textContent = 'window.__injected = true;';
    document.body.append(s);
    setTimeout(() => resolve(false), 2000);
  }));
  assert.equal(blocked, true, 'an inline script without the nonce raised a CSP violation');
  assert.equal(await page.evaluate(() => (window as unknown as { __injected?: boolean }).__injected), undefined);
});

test('an error message from the extension is shown as an alert', { skip }, async () => {
  await post({ type: 'error', message: 'no model loaded: send fulcrum/loadModel' });
  const status = page.locator('#status.error[role="alert"]');
  assert.equal(await status.textContent(), 'no model loaded: send fulcrum/loadModel');
  await page.screenshot({ path: path.join(SCREENSHOTS, 'webview-layers-error.png') });
});

function groupBytes(l: LayersResult['layers'][number], g: (typeof GROUPS)[number]): number {
  return g === 'attention' ? l.attentionBytes : g === 'ffn' ? l.ffnBytes : g === 'norm' ? l.normBytes : l.otherBytes;
}
