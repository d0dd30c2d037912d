// axe-core (from npm) on every panel — plan (with a real measured run of stories260K beside its
// plan), timeline (simulated and measured steps), explanation, what-if and model layers — in the
// dark, light and high-contrast themes, in headless Chromium: no serious or critical violation.
// axe is evaluated through the DevTools protocol (page.evaluate), which the panels' CSP does not
// govern, so the page under test is exactly the shipped one. Screenshots of the measured plan and
// timeline land in test-artifacts/screenshots/.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { readGguf } from '../../engine/model/gguf/index';
import { layerSummaries, summarizeModel } from '../../engine/model/summary';
import { explainRequest, simulateRequest } from '../../engine/plan/api';
import { Engine } from '../../engine/runtime/engine';
import { measureRun, type MeasureResult } from '../../engine/runtime/measure';
import { thisMachineProfile } from '../../engine/profile/profiler';
import type { ViewName } from '../../webviews/shared/page';
import { GPU_PRESETS } from '../../engine/hardware/presets';
import type { PresetsResult } from '../../engine/server/protocol';
import type { WhatIfSettings, WhatIfViewData } from '../../webviews/whatif/types';
import { repoRoot, sharedPath, skipUnlessShared } from '../helpers/shared';
import { launchChromium, skipUnlessChromium } from './browser';
import { startHarness, type Harness } from './harness';
import { openView, postData, screenshot } from './views';

const MODEL = sharedPath('models', 'stories260K.gguf');
const skip = skipUnlessChromium() || skipUnlessShared(MODEL);
const INPUTS = { model: 'llama-3.1-8b:Q4_K', hardware: 'rtx4060-laptop-8gb+ryzen9-7950x', workload: 'batch=1,prompt=8192,gen=64,vram=4G', policy: 'auto' };
const AXE = readFileSync(createRequire(__filename).resolve('axe-core/axe.min.js'), 'utf8');

let browser: Browser | undefined;
let harness: Harness | undefined;
let measured: MeasureResult;

before(async () => {
  if (skip) return;
  const build = spawnSync(process.execPath, ['scripts/bundle.mjs'], { cwd: repoRoot, encoding: 'utf8' });
  assert.equal(build.status, 0, `bundle failed:\n${build.stdout}\n${build.stderr}`);
  const engine = await Engine.load(MODEL, { threads: 1, device: 'cpu' });
  try { measured = await measureRun(engine, { promptTokens: 32, decodeSteps: 6, hardware: thisMachineProfile }); } finally { engine.dispose(); }
  harness = await startHarness(path.join(repoRoot, 'dist', 'webviews'));
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await harness?.close();
});

interface Violation { id: string; impact: string | null; help: string; nodes: number; target: string }

async function axe(page: Page): Promise<Violation[]> {
  await page.evaluate(AXE);
  return page.evaluate(async () => {
    const w = window as unknown as { axe: { run(ctx: Document, opts: unknown): Promise<{ violations: { id: string; impact: string | null; help: string; nodes: { target: string[] }[] }[] }> } };
    const r = await w.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.length, target: v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ') }));
  });
}

function whatIfData(): WhatIfViewData {
  const baseline = explainRequest(INPUTS);
  const presets: PresetsResult = {
    gpus: GPU_PRESETS.map((g) => ({ key: g.key, name: g.gpu.name, memoryBytes: g.gpu.memoryBytes })), machines: [], models: [], formats: ['F16', 'Q8_0', 'Q4_K'],
  };
  const baselineSettings: WhatIfSettings = { vramGiB: 4, prompt: 8192, gen: 64, batch: 1, format: null, gpu: null };
  return { session: 'a11y', presets, modelLabel: baseline.model.name, modelIsPreset: true, hardware: INPUTS.hardware, baseline, baselineSettings };
}

const cases: { view: ViewName; data: () => unknown; name: string }[] = [
  { view: 'plan', name: 'plan-measured', data: () => ({ plan: measured.plan, measured: measured.measured }) },
  { view: 'plan', name: 'plan-split', data: () => ({ plan: explainRequest(INPUTS) }) },
  { view: 'timeline', name: 'timeline-measured', data: () => ({ predicted: measured.predictedTrace, measured: measured.measuredTrace, title: 'stories260K, cpu-only: measured' }) },
  { view: 'timeline', name: 'timeline-split', data: () => ({ predicted: simulateRequest({ ...INPUTS, policy: 'split-points', trace: true }).trace, title: 'split-points' }) },
  { view: 'explain', name: 'explain', data: () => explainRequest(INPUTS) },
  { view: 'whatif', name: 'whatif', data: whatIfData },
  { view: 'layers', name: 'layers', data: () => { const f = readGguf(MODEL); return { model: summarizeModel(f), layers: layerSummaries(f) }; } },
];

for (const c of cases) {
  test(`axe-core: ${c.name} has no serious or critical violation in dark, light and high-contrast themes`, { skip }, async () => {
    for (const theme of ['dark', 'light', 'hc'] as const) {
      const { page, pageErrors } = await openView(browser!, harness!, c.view, theme, 1000, 900);
      await postData(page, c.data());
      await page.waitForTimeout(300);
      const bad = (await axe(page)).filter((v) => v.impact === 'serious' || v.impact === 'critical');
      if (theme !== 'hc' && c.name.endsWith('measured')) await screenshot(page, `a11y-${c.name}-${theme}`);
      assert.deepEqual(bad, [], `${c.name} (${theme}): ${JSON.stringify(bad, null, 1)}`);
      assert.deepEqual(pageErrors, []);
      await page.context().close();
    }
  });
}

test('the plan panel shows the measured run beside its predictions (real runtime numbers)', { skip }, async () => {
  const { page } = await openView(browser!, harness!, 'plan', 'dark', 1000, 900);
  await postData(page, { plan: measured.plan, measured: measured.measured });
  await page.locator('#mode-select').selectOption('ratio');
  assert.match(await page.locator('#measured-note').textContent() ?? '', /runtime: \d+ decode steps/);
  const focused = page.locator('#heatmap g.cell[tabindex="0"]');
  await focused.focus();
  assert.match(await page.locator('#cell-details').textContent() ?? '', /predicted .*; measured .*vs predicted/);
  // The runtime's fused attention kernel: one measured cell per layer over Scores, Softmax and WV,
  // with the measured kernel time as the runtime reported it.
  const spans = await page.locator('#heatmap g.measured-span').evaluateAll((nodes) => nodes.map((n) => ({ layer: Number(n.getAttribute('data-layer')), covers: n.getAttribute('data-covers'), ms: Number(n.getAttribute('data-measured-ms')) })));
  assert.equal(spans.length, measured.plan.stages.decode.layers.length);
  for (const sp of spans) {
    assert.equal(sp.covers, 'Scores Softmax WV');
    assert.equal(sp.ms, measured.measured.layers.find((l) => l.index === sp.layer)!.ops.find((o) => o.name === 'Attention')!.ms);
  }
  await page.context().close();
});
