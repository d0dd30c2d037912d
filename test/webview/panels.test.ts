// The plan, timeline, explanation and what-if webviews in headless Chromium, fed real engine
// results (the planner and simulator on preset models and machines) through the same postMessage
// channel the extension uses. Checks that the drawing matches the numbers, keyboard use, the CSP,
// names, contrast and focus (axe-core runs on every panel in accessibility.test.ts), and writes
// dark and light screenshots to test-artifacts/screenshots/.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { explainRequest, planRequest, simulateRequest } from '../../engine/plan/api';
import type { OpPlan, Plan } from '../../engine/plan/types';
import type { PresetsResult } from '../../engine/server/protocol';
import { GPU_PRESETS } from '../../engine/hardware/presets';
import { whatIfInputs } from '../../extension/whatif-params';
import { deviceMark, expertShareRows, opBusyMs, ratioColour, timeColour, timeScale } from '../../webviews/plan/heatmap';
import type { WhatIfSettings, WhatIfViewData } from '../../webviews/whatif/types';
import { repoRoot } from '../helpers/shared';
import { nativeOpTable } from '../../engine/native/op-table';
import { joinPlanOps, measuredChromeTrace } from '../../engine/runtime/trace';
import { Engine } from '../../engine/runtime/engine';
import { writeSyntheticModel } from '../../engine/model/synthetic';
import { GgmlType } from '../../engine/model/ggml-types';
import { planHardware } from '../helpers/policy-runs';
import { tempDir } from '../helpers/shared';
import { launchChromium, skipUnlessChromium } from './browser';
import { startHarness, type Harness } from './harness';
import { contrastRatio, cspBlocksInline, openView, postData, screenshot, unnamedFocusables } from './views';

const skip = skipUnlessChromium();
// An 8B model on a laptop GPU with a 4 GiB budget: the plan splits layers between CPU and GPU.
const INPUTS = { model: 'llama-3.1-8b:Q4_K', hardware: 'rtx4060-laptop-8gb+ryzen9-7950x', workload: 'batch=1,prompt=8192,gen=64,vram=4G', policy: 'auto' };
const THEMES = ['dark', 'light'] as const;
const BACKGROUND = { dark: '#1f1f1f', light: '#ffffff' };

let browser: Browser | undefined;
let harness: Harness | undefined;

before(async () => {
  if (skip) return;
  const build = spawnSync(process.execPath, ['scripts/bundle.mjs'], { cwd: repoRoot, encoding: 'utf8' });
  assert.equal(build.status, 0, `bundle failed:\n${build.stdout}\n${build.stderr}`);
  harness = await startHarness(path.join(repoRoot, 'dist', 'webviews'));
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await harness?.close();
});

describe('plan panel', { skip }, () => {
  const plan: Plan = planRequest(INPUTS);

  test('draws one cell per layer and op plus the LM head, coloured by predicted time on the legend\'s scale', async () => {
    const { page, cspViolations, pageErrors } = await openView(browser!, harness!, 'plan', 'dark', 900, 1000);
    await postData(page, { plan });
    await page.locator('#heatmap').waitFor();
    const decode = plan.stages.decode;
    const cells = await page.locator('#heatmap g.cell').evaluateAll((nodes) => nodes.map((n) => ({
      layer: Number(n.getAttribute('data-layer')), op: n.getAttribute('data-op'), ms: Number(n.getAttribute('data-ms')),
      fill: n.querySelector('rect.heat')?.getAttribute('fill'), mark: n.querySelector('text.mark')?.textContent ?? '',
    })));
    const expected = [...decode.layers.flatMap((l) => l.ops.map((o) => ({ layer: l.index, op: o }))), { layer: -1, op: decode.head }];
    assert.equal(cells.length, expected.length);
    const scale = timeScale(expected.map((e) => opBusyMs(e.op)));
    expected.forEach((e, i) => {
      const c = cells[i]!;
      assert.equal(c.layer, e.layer);
      assert.equal(c.op, e.op.name);
      assert.ok(Math.abs(c.ms - opBusyMs(e.op)) < 1e-9, `time of L${e.layer} ${e.op.name}`);
      assert.equal(c.fill, timeColour(scale, opBusyMs(e.op)), `colour of L${e.layer} ${e.op.name}`);
      assert.ok(c.mark.includes(deviceMark(e.op)), `device mark of L${e.layer} ${e.op.name}: ${c.mark}`);
    });
    // Longer time → brighter colour: the slowest and fastest cells sit at the legend's ends.
    const slow = expected.reduce((a, b) => (opBusyMs(b.op) > opBusyMs(a.op) ? b : a));
    assert.equal(cells[expected.indexOf(slow)]!.fill, '#fde725');
    // The plan splits: both devices appear.
    assert.ok(cells.some((c) => c.mark.startsWith('CPU')) && cells.some((c) => c.mark.startsWith('GPU')));
    // Per-layer totals and per-lane busy times are the plan's numbers.
    const rowTotals = await page.locator('#heatmap text.row-total[data-layer]').evaluateAll((n) => n.map((x) => Number(x.getAttribute('data-ms'))));
    assert.deepEqual(rowTotals, decode.layers.map((l) => l.predictedMs));
    const lanes = await page.locator('#lane-table tbody tr').evaluateAll((n) => n.map((x) => [x.getAttribute('data-lane'), Number(x.getAttribute('data-ms'))]));
    for (const [lane, ms] of lanes) assert.equal(ms, decode.predicted.perLane[lane as 'cpu']);
    const header = await page.locator('#plan-summary').textContent() ?? '';
    assert.match(header, new RegExp(`${plan.predicted.tokensPerSecond.toFixed(1)} tokens/s`));
    assert.match(header, new RegExp(plan.chosenPolicy));
    assert.match(await page.locator('#measured-note').textContent() ?? '', /Predicted times only/);
    assert.deepEqual(cspViolations, []);
    assert.deepEqual(pageErrors, []);
    await screenshot(page, 'webview-plan-dark');
    await page.context().close();
  });

  test('MoE plan: each layer\'s Experts cell shows its expert share (GPU fraction of expert bytes)', async () => {
    const moe = planRequest({ model: 'qwen3-coder-30b-a3b:Q4_K', hardware: 'rtx4060-laptop-8gb+ryzen9-7950x', workload: 'batch=1,prompt=1024,gen=64', policy: 'moe-offload' });
    const rows = expertShareRows(moe.stages.decode);
    assert.equal(rows.length, moe.model.nLayers);
    assert.ok(rows.some((r) => r.gpuBytesShare === 0) && rows.some((r) => r.gpuBytesShare === 1), 'expected host and GPU expert layers');
    const { page, pageErrors } = await openView(browser!, harness!, 'plan', 'dark', 900, 1400);
    await postData(page, { plan: moe });
    await page.locator('#heatmap').waitFor();
    const marks = await page.locator('#heatmap g.cell[data-op="Experts"]').evaluateAll((nodes) => nodes.map((n) => ({
      layer: Number(n.getAttribute('data-layer')), mark: n.querySelector('text.mark')?.textContent ?? '',
    })));
    assert.equal(marks.length, rows.length);
    for (const r of rows) assert.equal(marks.find((m) => m.layer === r.layer)?.mark, `${Math.round(r.gpuBytesShare * 100)}%G`, `L${r.layer}`);
    assert.deepEqual(pageErrors, []);
    await page.context().close();
  });

  test('keyboard: one tab stop into the grid, arrows move by cell and by layer, details follow focus', async () => {
    const { page } = await openView(browser!, harness!, 'plan', 'light', 900, 1000);
    await postData(page, { plan });
    await page.locator('#heatmap').waitFor();
    await page.locator('#heatmap g.cell[tabindex="0"]').focus();
    const ops = plan.stages.decode.layers[0]!.ops;
    const focused = () => page.evaluate(() => document.activeElement?.getAttribute('data-index'));
    assert.equal(await focused(), '0');
    assert.match(await page.locator('#cell-details').textContent() ?? '', new RegExp(`Layer 0 · ${ops[0]!.name}`));
    await page.keyboard.press('ArrowRight');
    assert.equal(await focused(), '1');
    await page.keyboard.press('ArrowDown');
    assert.equal(await focused(), String(1 + ops.length));
    assert.match(await page.locator('#cell-details').textContent() ?? '', new RegExp(`Layer 1 · ${ops[1]!.name}: .*predicted`));
    await page.keyboard.press('End');
    assert.equal(await focused(), String(2 * ops.length - 1));
    assert.equal(await page.locator('#heatmap g.cell[tabindex="0"]').count(), 1, 'a single tab stop');
    await screenshot(page, 'webview-plan-light');
    // Copy-as-llama.cpp asks the extension.
    await page.click('#copy-llamacpp');
    const posted = await page.evaluate(() => (window as unknown as { __posted: { type: string; action?: string }[] }).__posted);
    assert.ok(posted.some((m) => m.type === 'action' && m.action === 'copyLlamaCpp'));
    await page.context().close();
  });

  test('readable at a narrow panel width: nothing clipped, cell text contrasts with its colour', async () => {
    const { page } = await openView(browser!, harness!, 'plan', 'dark', 560, 900);
    await postData(page, { plan });
    await page.locator('#heatmap').waitFor();
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.ok(overflow <= 0, `the page scrolls sideways by ${overflow}px`);
    const box = await page.locator('#heatmap').boundingBox();
    assert.ok(box && box.x >= 0 && box.x + box.width <= 560, 'the heatmap fits the panel');
    const pairs = await page.locator('#heatmap g.cell').evaluateAll((nodes) => nodes.map((n) => ({
      fill: n.querySelector('rect.heat')?.getAttribute('fill') ?? '', text: getComputedStyle(n.querySelector('text.mark')!).fill,
    })));
    for (const p of pairs) {
      const rgb = p.text.match(/\d+/g)!.map(Number);
      const hex = `#${rgb.slice(0, 3).map((v) => v.toString(16).padStart(2, '0')).join('')}`;
      assert.ok(contrastRatio(p.fill, hex) >= 4.5, `mark ${hex} on ${p.fill}: contrast ${contrastRatio(p.fill, hex).toFixed(2)}`);
    }
    assert.deepEqual(await unnamedFocusables(page), []);
    await screenshot(page, 'webview-plan-narrow');
    await page.context().close();
  });

  test('high-contrast theme: the page takes the theme\'s colours; screenshot', async () => {
    const { page } = await openView(browser!, harness!, 'plan', 'hc', 900, 1000);
    await postData(page, { plan });
    await page.locator('#heatmap').waitFor();
    assert.equal(await page.evaluate(() => getComputedStyle(document.body).backgroundColor), 'rgb(0, 0, 0)');
    assert.equal(await page.locator('#heatmap text.row-label').first().evaluate((n) => getComputedStyle(n).fill), 'rgb(255, 255, 255)');
    await screenshot(page, 'webview-plan-high-contrast');
    await page.context().close();
  });

  test('with measured per-op times: colour by measured ÷ predicted, off-prediction cells outlined, both numbers in the details', async () => {
    // Test input, not a measurement: the runtime's measured trace does not exist yet, so the
    // display path is exercised with the plan's own predictions, CPU ops × 1.5.
    const scaled = (op: OpPlan) => opBusyMs(op) * (op.device === 'cpu' ? 1.5 : 1);
    const measured = {
      source: 'test input: predictions with CPU ops × 1.5 (not a measurement)',
      layers: plan.stages.decode.layers.map((l) => ({ index: l.index, ops: l.ops.map((o) => ({ name: o.name, ms: scaled(o) })) })),
      headMs: scaled(plan.stages.decode.head),
    };
    const { page, pageErrors } = await openView(browser!, harness!, 'plan', 'dark', 900, 1000);
    await postData(page, { plan, measured });
    await page.locator('#mode-select').selectOption('ratio');
    const cells = await page.locator('#heatmap g.cell').evaluateAll((nodes) => nodes.map((n) => ({
      device: n.getAttribute('data-device'), fill: n.querySelector('rect.heat')?.getAttribute('fill'), off: n.classList.contains('off-prediction'),
    })));
    for (const c of cells) {
      assert.equal(c.fill, ratioColour(c.device === 'cpu' ? 1.5 : 1));
      assert.equal(c.off, c.device === 'cpu', 'only cells 50 % off the prediction are outlined');
    }
    const focused = page.locator('#heatmap g.cell[tabindex="0"]');
    await focused.focus();
    // The focused cell's difference follows its device (the plan decides which side it runs on).
    const onCpu = (await focused.getAttribute('data-device')) === 'cpu';
    assert.match(await page.locator('#cell-details').textContent() ?? '', onCpu ? /predicted .*; measured .*\(\+50 % vs predicted\)/ : /predicted .*; measured .*\((\+|-)?0\.0 % vs predicted\)/);
    assert.match(await page.locator('#measured-note').textContent() ?? '', /not a measurement/);
    assert.match(await page.locator('#legend').getAttribute('aria-label') ?? '', /measured ÷ predicted/);
    assert.deepEqual(pageErrors, []);
    await page.context().close();
  });

  test('a fused kernel is one measured cell across the ops it covers (Attention = Scores + Softmax + WV), never split by the prediction', async () => {
    // Test input shaped as the runtime sends it (engine/runtime/trace.ts joinPlanOps): every op
    // measured as predicted, and the fused Attention kernel measured at 2× its parts' sum.
    const table = nativeOpTable().planOps;
    const measured = {
      source: 'test input: predictions, Attention kernel × 2 (not a measurement)',
      layers: plan.stages.decode.layers.map((l) => {
        const opMs: Record<string, number> = Object.fromEntries(l.ops.map((o) => [o.name, opBusyMs(o)]));
        opMs.Attention = 2 * l.ops.filter((o) => ['Scores', 'Softmax', 'WV'].includes(o.name)).reduce((s, o) => s + opBusyMs(o), 0);
        return { index: l.index, ops: joinPlanOps(l.ops.map((o) => o.name), opMs, table) };
      }),
    };
    const { page, pageErrors } = await openView(browser!, harness!, 'plan', 'dark', 900, 1000);
    await postData(page, { plan, measured });
    await page.locator('#mode-select').selectOption('ratio');
    const spans = await page.locator('#heatmap g.measured-span').evaluateAll((nodes) => nodes.map((n) => {
      const r = n.querySelector('rect.heat')!;
      return {
        layer: Number(n.getAttribute('data-layer')), covers: n.getAttribute('data-covers'), fill: r.getAttribute('fill'),
        x: Number(r.getAttribute('x')), width: Number(r.getAttribute('width')), off: n.classList.contains('off-prediction'), text: n.textContent,
      };
    }));
    assert.equal(spans.length, plan.stages.decode.layers.length, 'one fused cell per layer');
    const cellGeom = await page.locator('#heatmap g.cell').evaluateAll((nodes) => nodes.map((n) => ({
      layer: Number(n.getAttribute('data-layer')), op: n.getAttribute('data-op'), measured: n.getAttribute('data-measured-ms'),
      x: Number(n.querySelector('rect.heat')!.getAttribute('x')), width: Number(n.querySelector('rect.heat')!.getAttribute('width')),
    })));
    for (const sp of spans) {
      assert.equal(sp.covers, 'Scores Softmax WV');
      assert.equal(sp.fill, ratioColour(2));
      assert.ok(sp.off, 'twice the prediction is outlined');
      assert.match(sp.text ?? '', /Attention \(fused\)/);
      const parts = cellGeom.filter((c) => c.layer === sp.layer && ['Scores', 'Softmax', 'WV'].includes(c.op!));
      // Spans the three cells exactly: from the first one's left edge to the last one's right edge.
      assert.equal(sp.x, Math.min(...parts.map((c) => c.x)));
      assert.equal(sp.x + sp.width, Math.max(...parts.map((c) => c.x + c.width)));
      for (const c of parts) assert.equal(c.measured, null, `${c.op} L${c.layer} has no measured time of its own`);
      for (const c of cellGeom.filter((c) => c.layer === sp.layer && !['Scores', 'Softmax', 'WV'].includes(c.op!))) assert.notEqual(c.measured, null);
    }
    // A covered cell's details give the kernel's numbers, not a share.
    const scores = page.locator('#heatmap g.cell[data-op="Scores"]').first();
    await scores.dispatchEvent('mouseover');
    assert.match(await page.locator('#cell-details').textContent() ?? '', /Scores: .*measured only as one fused kernel, Attention \(Scores \+ Softmax \+ WV\): .* \(\+100 %\)/);
    await screenshot(page, 'webview-plan-measured-fused-dark');
    assert.deepEqual(pageErrors, []);
    await page.context().close();
  });

  test('the CSP blocks inline script and style', async () => {
    const { page } = await openView(browser!, harness!, 'plan', 'dark');
    const r = await cspBlocksInline(page);
    assert.equal(r.scriptRan, false);
    assert.equal(r.styleApplied, false);
    assert.ok(r.violations >= 2, `violations reported: ${r.violations}`);
    await page.context().close();
  });
});

describe('timeline panel', { skip }, () => {
  const sim = simulateRequest({ ...INPUTS, policy: 'split-points', trace: true });

  test('lanes and spans come from the Chrome trace; zoom and pan change the time axis; export asks the extension', async () => {
    for (const theme of THEMES) {
      const { page, cspViolations, pageErrors } = await openView(browser!, harness!, 'timeline', theme, 1000, 600);
      await postData(page, { predicted: sim.trace, title: `${sim.plan.model.name}, ${sim.plan.chosenPolicy}` });
      await page.locator('#timeline').waitFor();
      const section = await page.locator('#section-select').inputValue();
      assert.match(section, /decode/);
      const events = sim.trace!.traceEvents.filter((e) => e.ph === 'X');
      const decodePid = sim.trace!.traceEvents.find((e) => e.name === 'process_name' && String(e.args?.name).includes('decode'))!.pid;
      const decodeSpans = events.filter((e) => e.pid === decodePid);
      assert.equal(await page.locator('#timeline g.span').count(), decodeSpans.length);
      // Each span's x and width are its ts and dur on one linear scale.
      const drawn = await page.locator('#timeline g.span rect').evaluateAll((nodes) => nodes.map((n) => ({
        x: Number(n.getAttribute('x')), w: Number(n.getAttribute('width')),
        ts: Number(n.parentElement!.getAttribute('data-start-us')), dur: Number(n.parentElement!.getAttribute('data-dur-us')),
      })));
      const t0 = Math.min(...decodeSpans.map((e) => e.ts));
      const t1 = Math.max(...decodeSpans.map((e) => e.ts + (e.dur ?? 0)));
      const pxPerUs = (1000 - 170) / (t1 - t0);
      for (const d of drawn) {
        assert.ok(Math.abs(d.x - (170 + (d.ts - t0) * pxPerUs)) < 1e-6);
        if (d.dur * pxPerUs > 0.5) assert.ok(Math.abs(d.w - d.dur * pxPerUs) < 1e-6);
      }
      // Lanes: CPU and GPU always; busy % from the trace.
      const labels = await page.locator('#timeline text.lane-label').allTextContents();
      assert.ok(labels.some((l) => l.startsWith('CPU')) && labels.some((l) => l.startsWith('GPU')), labels.join(' | '));
      await screenshot(page, `webview-timeline-${theme}`);
      if (theme === 'dark') {
        const range = async () => page.locator('#view-range').textContent();
        const before = await range();
        await page.click('#zoom-in');
        await page.click('#zoom-in');
        const zoomed = await range();
        assert.notEqual(zoomed, before);
        const spansZoomed = await page.locator('#timeline g.span').count();
        assert.ok(spansZoomed < decodeSpans.length, 'zooming in culls spans outside the view');
        await page.locator('#timeline').focus();
        await page.keyboard.press('ArrowRight');
        assert.notEqual(await range(), zoomed, 'arrow keys pan');
        await screenshot(page, 'webview-timeline-zoomed');
        await page.click('#export-trace');
        const posted = await page.evaluate(() => (window as unknown as { __posted: { action?: string }[] }).__posted);
        assert.ok(posted.some((m) => m.action === 'exportTrace'));
        assert.deepEqual(await unnamedFocusables(page), []);
      }
      assert.deepEqual(cspViolations, []);
      assert.deepEqual(pageErrors, []);
      await page.context().close();
    }
  });
});

describe('timeline panel: a re-plan between measured steps', { skip }, () => {
  test('a batch re-plan of a real run (loopback) is a line across the measured lanes, at its time, with its reason', { timeout: 300_000 }, async () => {
    // A real run: a synthetic model planned for batch 1 on the loopback device serves 4 requests at
    // once, so the first step of 4 sequences re-plans (engine/runtime/replan.ts) while tracing.
    const { dir, cleanup } = tempDir();
    let measured;
    let reason = '';
    try {
      const file = path.join(dir, 'batch.gguf');
      writeSyntheticModel(file, { architecture: 'llama', nLayers: 2, nEmbd: 128, nHeads: 4, nKvHeads: 4, nFf: 256, nVocab: 320, contextLength: 128, seed: 3, weightType: GgmlType.Q8_0 });
      const engine = await Engine.load(file, { threads: 1, contextLength: 128, device: 'loopback', maxSequences: 4, policy: 'gpu-only', hardware: planHardware('loopback'), workload: { batch: 1, prompt: 16, gen: 8 } });
      try {
        engine.setTracing(true);
        await Promise.all([[1, 2, 3], [4, 5], [6, 7, 8, 9], [10]].map((p) => engine.scheduler().submit({ prompt: p, maxTokens: 4, temperature: 0, onlyStopIds: true, stopIds: new Set() }).result));
        reason = engine.execution.replans![0]!.reason;
        measured = measuredChromeTrace(engine.takeTrace(), (st) => `measured step ${st}`);
      } finally {
        engine.dispose();
      }
    } finally {
      cleanup();
    }
    const mark = measured.traceEvents.find((e) => e.ph === 'i')!;
    assert.ok(mark, 'the trace has the re-plan');
    const { page, pageErrors } = await openView(browser!, harness!, 'timeline', 'dark', 1000, 700);
    await postData(page, { predicted: simulateRequest({ ...INPUTS, trace: true }).trace, measured, title: 'synthetic, gpu-only: batch re-plan' });
    await page.locator('#timeline').waitFor();
    const drawn = await page.locator('#timeline g.mark-event').evaluateAll((nodes) => nodes.map((n) => ({
      label: n.getAttribute('aria-label'), at: Number(n.getAttribute('data-at-us')), x: Number(n.querySelector('line')!.getAttribute('x1')),
    })));
    assert.equal(drawn.length, 1);
    assert.equal(drawn[0]!.at, mark.ts);
    assert.ok(drawn[0]!.label!.includes(reason), drawn[0]!.label!);
    assert.match(drawn[0]!.label!, /Measured \(runtime\) · re-plan \(batch\)/);
    // At its time on the measured steps' axis: between the spans before and after it.
    const spans = await page.locator('#timeline g.span').evaluateAll((nodes) => nodes.map((n) => ({ ts: Number(n.getAttribute('data-start-us')), x: Number(n.querySelector('rect')!.getAttribute('x')) })));
    const after = spans.filter((sp) => sp.ts >= mark.ts && sp.x > 170);
    assert.ok(after.length > 0 && after.every((sp) => sp.x >= drawn[0]!.x - 1e-6), 'spans after the re-plan start right of its line');
    // The run is a section per step (a set of lanes each, most nearly empty): drawn as one row per
    // lane name, each span keeping its step in its details, the re-plan line across all of them.
    const laneNames = new Set(measured.traceEvents.filter((e) => e.ph === 'M' && e.name === 'thread_name').map((e) => String(e.args!.name)));
    const sections = new Set(measured.traceEvents.filter((e) => e.ph === 'M' && e.name === 'process_name').map((e) => String(e.args!.name)));
    assert.ok(sections.size > 2 && laneNames.size >= 2, `a run of ${sections.size} steps on ${laneNames.size} lanes`);
    const rows = await page.locator('#timeline text').evaluateAll((nodes) => nodes.map((n) => ({ cls: n.getAttribute('class'), text: n.textContent ?? '', y: Number(n.getAttribute('y')) })));
    const measuredTop = rows.find((r) => r.cls === 'section-label' && r.text === 'Measured (runtime)')!.y;
    const measuredLanes = rows.filter((r) => r.cls === 'lane-label' && r.y > measuredTop).map((r) => r.text.replace(/ \d+% busy$/, ''));
    assert.deepEqual([...measuredLanes].sort(), [...laneNames].sort(), 'one measured row per lane name');
    const measuredSpans = await page.locator('#timeline g.span[data-lane^="merged:"]').evaluateAll((nodes) => nodes.map((n) => ({
      lane: n.getAttribute('data-lane')!, section: n.getAttribute('data-section')!, label: n.getAttribute('aria-label')!,
    })));
    assert.ok(measuredSpans.every((sp) => sections.has(sp.section) && sp.label.includes(` · ${sp.section} · `)), 'each span names its step');
    const busiest = [...new Set(measuredSpans.map((sp) => sp.lane))].map((l) => new Set(measuredSpans.filter((sp) => sp.lane === l).map((sp) => sp.section)).size);
    assert.ok(Math.max(...busiest) > 1, 'a merged row holds the spans of several steps');
    const line = await page.locator('#timeline g.mark-event line').evaluate((n) => [Number(n.getAttribute('y1')), Number(n.getAttribute('y2'))]);
    const laneYs = rows.filter((r) => r.cls === 'lane-label' && r.y > measuredTop).map((r) => r.y);
    assert.ok(line[0]! < Math.min(...laneYs) && line[1]! > Math.max(...laneYs), 'the re-plan line crosses every measured row');
    await page.locator('#timeline g.mark-event').dispatchEvent('mouseover');
    assert.ok((await page.locator('#span-details').textContent() ?? '').includes(reason));
    await screenshot(page, 'webview-timeline-replan-dark');
    assert.deepEqual(pageErrors, []);
    await page.context().close();
  });
});

describe('explanation panel', { skip }, () => {
  const plan = explainRequest(INPUTS);

  test('shows every decision with its alternatives, predicted costs and why each lost, and the what-ifs', async () => {
    for (const theme of THEMES) {
      const { page, cspViolations } = await openView(browser!, harness!, 'explain', theme, 900, 1000);
      await postData(page, plan);
      await page.locator('#explain-summary').waitFor();
      assert.equal(await page.locator('#explain-summary').textContent(), plan.explanation.summary);
      assert.equal(await page.locator('section.decision').count(), plan.explanation.decisions.length);
      const first = plan.explanation.decisions[0]!;
      const rows = await page.locator('section.decision').first().locator('tbody tr').allTextContents();
      assert.equal(rows.length, first.alternatives.length);
      for (const [i, a] of first.alternatives.entries()) {
        assert.ok(rows[i]!.includes(a.label));
        if (a.note && a.note !== 'chosen') assert.ok(rows[i]!.includes(a.note), `row ${i} says why ${a.label} lost`);
      }
      // Bars are proportional to the predicted cost.
      const bars = await page.locator('section.decision').first().locator('rect.alt-fill').evaluateAll((n) => n.map((x) => Number(x.getAttribute('width'))));
      const values = first.alternatives.map((a) => a.predictedMs).filter((v): v is number => typeof v === 'number' && Number.isFinite(v) && v > 0);
      const max = Math.max(...values);
      assert.deepEqual(bars.map((b) => b.toFixed(6)), values.map((v) => ((100 * v) / max).toFixed(6)));
      assert.equal(await page.locator('#whatif-table tbody tr').count(), plan.explanation.whatIf.length);
      assert.deepEqual(cspViolations, []);
      await screenshot(page, `webview-explain-${theme}`);
      await page.context().close();
    }
  });
});

describe('what-if panel', { skip }, () => {
  test('a control change re-plans through the planner and redraws the comparison; a GPU preset swaps the GPU of the hardware', async () => {
    const baseline = explainRequest(INPUTS);
    const presets: PresetsResult = {
      gpus: GPU_PRESETS.map((g) => ({ key: g.key, name: g.gpu.name, memoryBytes: g.gpu.memoryBytes })), machines: [], models: [],
      formats: ['F16', 'Q8_0', 'Q4_K'],
    };
    const baselineSettings: WhatIfSettings = { vramGiB: 4, prompt: 8192, gen: 64, batch: 1, format: null, gpu: null };
    const data: WhatIfViewData = { session: 's1', presets, modelLabel: baseline.model.name, modelIsPreset: true, hardware: INPUTS.hardware, baseline, baselineSettings };
    for (const theme of THEMES) {
      const { page, cspViolations } = await openView(browser!, harness!, 'whatif', theme, 900, 1100);
      await postData(page, data);
      await page.locator('#whatif-compare').waitFor();
      // Act as the extension: answer each 'replan' with the planner's result (whatIfInputs is the extension's mapping).
      const answer = async () => {
        const msg = await page.waitForFunction(() => {
          const posted = (window as unknown as { __posted: { action?: string; args?: unknown; handled?: boolean }[] }).__posted;
          const m = posted.find((x) => x.action === 'replan' && !x.handled);
          if (m) m.handled = true;
          return m?.args;
        });
        const args = await msg.jsonValue() as { requestId: number; settings: WhatIfSettings };
        const next = whatIfInputs({ ...INPUTS }, args.settings, true);
        const plan = explainRequest({ model: next.model!, hardware: next.hardware, workload: next.workload, policy: next.policy });
        await postData(page, { ...data, current: { requestId: args.requestId, plan, settings: args.settings, hardware: next.hardware } });
        return { next, plan };
      };
      // More VRAM → more layers on the GPU → faster.
      await page.locator('#vram').fill('7');
      const r1 = await answer();
      assert.equal(r1.next.workload, 'batch=1,prompt=8192,gen=64,vram=7G');
      await page.locator('#replan-time[data-ms]').waitFor();
      const tps = Number(await page.locator('#whatif-compare tbody tr[data-tokens-per-second]').getAttribute('data-tokens-per-second'));
      assert.equal(tps, r1.plan.predicted.tokensPerSecond);
      assert.ok(r1.plan.predicted.tokensPerSecond > baseline.predicted.tokensPerSecond, 'more VRAM is faster');
      const ms = Number(await page.locator('#replan-time').getAttribute('data-ms'));
      console.log(`what-if (${theme}): slider → planner → redrawn panel ${ms.toFixed(0)} ms (planner in-process, no LSP hop)`);
      // A GPU preset: the host keeps its CPU, the GPU is swapped.
      await page.selectOption('#gpu', 'rtx4090');
      const r2 = await answer();
      assert.equal(r2.next.hardware, 'rtx4090+ryzen9-7950x');
      await page.locator('#whatif-compare caption', { hasText: 'rtx4090+ryzen9-7950x' }).waitFor();
      assert.deepEqual(cspViolations, []);
      assert.deepEqual(await unnamedFocusables(page), []);
      await screenshot(page, `webview-whatif-${theme}`);
      await page.context().close();
    }
  });
});
