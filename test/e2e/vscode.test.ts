// The packaged extension in a real VS Code (code-server 4.100.3 = VS Code 1.100.3) driven by
// headless Debian Chromium, fully offline (recipe: ../shared/design/VSCODE-E2E.md). It builds
// the .vsix from the current tree, installs it, points fulcrum.modelPath at stories260K, and
// checks that the ghost text is the model's own greedy continuation, that the status bar shows
// the engine's speed, that the engine restarts after a crash, and that Show Model Layers draws
// the model's layers. Screenshots go to test-artifacts/screenshots/.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { Frame, Page } from 'playwright-core';
import { readGguf } from '../../engine/model/gguf/index';
import { layerSummaries } from '../../engine/model/summary';
import { Completer } from '../../engine/completion/completer';
import { explainRequest, planRequest } from '../../engine/plan/api';
import { Engine } from '../../engine/runtime/engine';
import { sharedPath } from '../helpers/shared';
import { SCREENSHOTS } from '../webview/browser';
import * as cs from './code-server';

const MODEL = sharedPath('models', 'stories260K.gguf');
/** The document the test types into: the last keystroke completes a word, then the engine continues. */
const DOC_BEFORE = 'Once upon a time, there was a littl';
const TYPED = 'e';
/** What the server asks the engine for (engine/server/handlers/completion.ts). */

const skip = cs.e2eSkipReason([MODEL]);

// The workload also fits the loaded stories260K (context 2048), which the status bar plans.
const PLAN_INPUTS = { model: 'llama-3.1-8b:Q4_K', hardware: 'rtx4060-laptop-8gb+ryzen9-7950x', workload: 'batch=1,prompt=2048,gen=64,vram=4G' };

const metrics: Record<string, number> = {};
let wb: cs.Workbench | undefined;
let page: Page;
let userDataDir = '';
let extensionsDir = '';
/** The engine's HTTP API port (fulcrum.http.port), a free one found before the settings are written. */
let HTTP_PORT = 0;

const since = (t: number) => Date.now() - t;

/** Webview content sits in nested iframes; search every frame. */
async function findFrameWith(selector: string, timeoutMs: number): Promise<Frame> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    for (const f of page.frames()) {
      try { if (await f.$(selector)) return f; } catch { /* frame navigating */ }
    }
    await page.waitForTimeout(200);
  }
  throw new Error(`no frame contains ${selector}`);
}

async function pickInQuickInput(key: string | readonly string[], text: string, row: string, settled?: () => Promise<void>): Promise<void> {
  await cs.pickInQuickInput(page, key, text, row, settled);
}

/** Runs a command from the palette. */
async function runCommand(title: string): Promise<void> {
  await pickInQuickInput('F1', `>${title}`, title);
}

/**
 * Runs a command that opens its own quick pick, and picks a row of it. The pick is a second quick
 * input after the palette's. CI runs saw its row resolved and then hidden before a click landed
 * (the quick input re-laid out under load, or closed when focus moved: Profile Machine once,
 * Select Model once, the row 'hidden' for the whole 10 s). So the row is picked by typing and
 * Enter, `settled` checks what the pick opens, and the whole command runs again if the pick is lost.
 */
async function runCommandAndPick(title: string, row: string, settled: () => Promise<void>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await runCommand(title);
      await page.locator('.quick-input-widget .monaco-list-row', { hasText: row }).first().waitFor({ state: 'visible', timeout: 20_000 });
      await page.locator('.quick-input-widget .quick-input-box input').fill(row, { timeout: 10_000 });
      await page.locator('.quick-input-widget .monaco-list-row.focused', { hasText: row }).first().waitFor({ state: 'visible', timeout: 10_000 });
      await page.keyboard.press('Enter');
      await settled();
      return;
    } catch (err) {
      if (attempt === 3) throw err;
      console.log(`# '${title}' pick of '${row}' lost (attempt ${attempt}): ${String((err as Error).message).split('\n')[0]}`);
      await page.keyboard.press('Escape');
      await page.waitForTimeout(500);
    }
  }
}

function statusItem() {
  return cs.statusItem(page);
}

async function waitForStatus(pattern: RegExp, timeoutMs: number): Promise<string> {
  return cs.waitForStatus(page, pattern, timeoutMs);
}

/** Opens story.txt (Ctrl+P) unless an editor shows it, focuses its editor by clicking (see the recipe's focus gotcha), cursor at the end. */
async function openStoryAtEnd(): Promise<void> {
  const editor = page.locator('.monaco-editor', { has: page.locator('.view-lines', { hasText: 'Once upon a time' }) }).first();
  if (await editor.count() === 0) await pickInQuickInput('Control+P', 'story.txt', 'story.txt', () => editor.waitFor({ state: 'visible', timeout: 20_000 }));
  await editor.locator('.view-lines').click();
  await page.locator('.monaco-editor.focused', { hasText: 'Once upon a time' }).waitFor({ state: 'visible', timeout: 10_000 });
  await page.keyboard.press('Control+End');
}

/**
 * Sets a number setting as a user does, in the Settings editor (searched by its id), and waits
 * until the engine's log says the completion settings it got include it.
 */
async function setNumberSetting(id: string, value: number): Promise<void> {
  const logStart = cs.extensionLogs(userDataDir).length;
  await runCommand('Preferences: Open User Settings');
  const search = page.locator('.settings-editor .settings-header .monaco-editor textarea').first();
  await search.waitFor({ state: 'attached', timeout: 20_000 });
  await search.focus();
  await page.keyboard.press('Control+A');
  await page.keyboard.type(`@id:${id}`);
  // The list filters as the query is typed: wait for the one setting, then edit it as typed keys.
  await page.locator('.settings-editor .settings-count-widget', { hasText: '1 Setting Found' }).waitFor({ state: 'visible', timeout: 20_000 });
  const title = id.slice(id.lastIndexOf('.') + 1).replace(/([a-z])([A-Z])/g, '$1 $2').replace(/^./, (c) => c.toUpperCase());
  const input = page.locator('.settings-editor .setting-item-number', { hasText: title }).locator('input').first();
  await input.waitFor({ state: 'visible', timeout: 20_000 });
  await input.click();
  await page.keyboard.press('Control+A');
  await page.keyboard.type(String(value));
  await page.keyboard.press('Tab');
  const key = id.slice(id.lastIndexOf('.') + 1);
  const end = Date.now() + 20_000;
  while (!cs.extensionLogs(userDataDir).slice(logStart).includes(`${key} ${value}`)) {
    if (Date.now() > end) throw new Error(`the engine did not log ${key} ${value} within 20 s of setting ${id} in the Settings editor`);
    await page.waitForTimeout(200);
  }
  await page.keyboard.press('Control+W');
}

/** The ghost text once it reads `want` (or what it reads after `timeoutMs`). */
async function ghostTextBecomes(want: string, timeoutMs: number): Promise<string> {
  const ghost = page.locator('.monaco-editor .ghost-text-decoration');
  const end = Date.now() + timeoutMs;
  let shown = '';
  while (Date.now() < end) {
    // Monaco renders a long inline decoration as several spans; together they are the text.
    shown = (await ghost.allTextContents()).join('').replace(/\u00a0/g, ' ');
    if (shown === want) return shown;
    await page.waitForTimeout(100);
  }
  return shown;
}

/** Runs a test; on failure leaves a screenshot and the workbench DOM for the artifacts. */
function e2e(name: string, fn: () => Promise<void>): void {
  test(name, { skip }, async () => {
    try {
      await fn();
    } catch (err) {
      const slug = name.replace(/[^a-z0-9]+/gi, '-').slice(0, 40);
      await page?.screenshot({ path: path.join(SCREENSHOTS, `e2e-FAILED-${slug}.png`) }).catch(() => undefined);
      const html = await page?.locator('.monaco-workbench').evaluate((el) => el.outerHTML).catch(() => '');
      if (html) writeFileSync(path.join(SCREENSHOTS, `e2e-FAILED-${slug}.html`), html);
      throw err;
    }
  });
}

before(async () => {
  if (skip) { console.log(`# e2e skipped: ${skip}`); return; }
  HTTP_PORT = await cs.freePort();
  wb = await cs.startWorkbench({
    'fulcrum.modelPath': MODEL,
    // The engine serves the model over HTTP too (fulcrum/startHttp), on a port chosen here.
    'fulcrum.http.enabled': true,
    'fulcrum.http.port': HTTP_PORT,
    'fulcrum.http.requireToken': false,
    'fulcrum.threads': 1,
    // The panels plan an 8B preset on a laptop-GPU preset with a 4 GiB budget (a CPU/GPU split);
    // the status bar plans the loaded model on the same hardware.
    'fulcrum.plan.hardware': PLAN_INPUTS.hardware,
    'fulcrum.plan.model': PLAN_INPUTS.model,
    'fulcrum.plan.workload': PLAN_INPUTS.workload,
    // The panels are shot in a dark theme first, then a light one (below). Named here because
    // the workbench's own default follows the browser's colour scheme, which is light headless.
    'workbench.colorTheme': 'Default Dark Modern',
  }, { 'story.txt': DOC_BEFORE });
  ({ page, userDataDir, extensionsDir } = wb);
  Object.assign(metrics, wb.timings);
});

after(async () => {
  // Writes e2e-code-server.log and e2e-fulcrum-output.log (Output › Fulcrum) for the artifacts.
  await wb?.stop('e2e');
  if (!skip) {
    writeFileSync(path.join(SCREENSHOTS, 'e2e-metrics.json'), JSON.stringify(metrics, null, 2));
    console.log('# e2e metrics', JSON.stringify(metrics));
  }
});

e2e('the engine starts and loads fulcrum.modelPath (status bar: ready)', async () => {
  const t = Date.now();
  await waitForStatus(/Fulcrum: ready/, 60_000);
  metrics.workbenchToEngineReadyMs = since(t);
});

e2e('typing shows the model\'s greedy continuation as ghost text; Tab accepts it', async () => {
  // The expected text: the same engine and completion path (server defaults), in this process.
  const engine = await Engine.load(MODEL, { threads: 1 });
  const expected = await new Completer(engine).complete({ document: 'expected', before: DOC_BEFORE + TYPED, after: '', timeLimitMs: Infinity });
  engine.dispose();
  const firstLine = expected.text.split('\n')[0]!;
  assert.ok(firstLine.trim().length > 0, `the model continues the line (got ${JSON.stringify(expected.text)})`);

  await openStoryAtEnd();

  const t = Date.now();
  await page.keyboard.type(TYPED);
  const ghost = page.locator('.monaco-editor .ghost-text-decoration');
  await ghost.first().waitFor({ state: 'visible', timeout: 30_000 });
  metrics.typeToGhostTextMs = since(t);
  // A slow moment may show the text so far first (fulcrum.completions.showPartialAfterMs); the
  // whole suggestion replaces it in place.
  const shown = await ghostTextBecomes(firstLine, 10_000);
  await page.screenshot({ path: path.join(SCREENSHOTS, 'e2e-ghost-text.png') });
  assert.equal(shown, firstLine, 'the ghost text is the engine\'s greedy continuation');

  const status = await waitForStatus(/tok\/s/, 10_000);
  const speed = Number(/([\d.]+) tok\/s/.exec(status)?.[1]);
  assert.ok(speed > 0, `status bar shows the last completion's speed: '${status}'`);
  metrics.statusTokensPerSecond = speed;

  await page.keyboard.press('Tab');
  await page.locator('.monaco-editor .view-line', { hasText: `${DOC_BEFORE}${TYPED}${firstLine}`.trimEnd() })
    .waitFor({ state: 'visible', timeout: 10_000 });
  await page.screenshot({ path: path.join(SCREENSHOTS, 'e2e-accepted.png') });
  // The accepted suggestion may span lines (the cursor was at the end of a line), which scrolls
  // the story's first line out of view; undo it so the next tests find the editor by that line.
  await page.keyboard.press('Control+Z');
  await page.locator('.monaco-editor .view-line', { hasText: 'Once upon a time' }).waitFor({ state: 'visible', timeout: 10_000 });
});

e2e('a suggestion still decoding at fulcrum.completions.showPartialAfterMs is shown as far as it goes, then completed in place', async () => {
  const typed = ' She';
  const engine = await Engine.load(MODEL, { threads: 1 });
  const expected = await new Completer(engine).complete({ document: 'expected', before: DOC_BEFORE + typed, after: '', timeLimitMs: Infinity });
  engine.dispose();
  const firstLine = expected.text.split('\n')[0]!;
  assert.ok(firstLine.trim().split(/\s+/).length > 2, `a first line of several words (got ${JSON.stringify(expected.text)})`);
  // A 1 ms deadline: the engine answers with the first word and tells the editor when the rest
  // is in its cache; only the extension's re-trigger can then show the whole line.
  const logStart = cs.extensionLogs(userDataDir).length;
  await setNumberSetting('fulcrum.completions.showPartialAfterMs', 1);
  await openStoryAtEnd();
  await page.keyboard.press('Control+A');
  await page.keyboard.type(DOC_BEFORE + typed);
  await page.locator('.monaco-editor .ghost-text-decoration').first().waitFor({ state: 'visible', timeout: 30_000 });
  const shown = await ghostTextBecomes(firstLine, 15_000);
  await page.screenshot({ path: path.join(SCREENSHOTS, 'e2e-ghost-text-completed.png') });
  assert.equal(shown, firstLine, 'the whole greedy line replaces the text shown early');
  assert.match(cs.extensionLogs(userDataDir).slice(logStart), /completion: partial after \d+ ms[^\n]*\n(.*\n)*.*the full suggestion is ready/, 'the engine answered with the text so far, then the extension showed the whole');
  await setNumberSetting('fulcrum.completions.showPartialAfterMs', 300);
  await page.keyboard.press('Escape');
  await page.keyboard.press('Control+A');
  await page.keyboard.type(DOC_BEFORE);
  await page.keyboard.press('Escape');
  await page.waitForTimeout(1000);
});

e2e('command "Fulcrum: Show Model Layers" draws every layer of the model', async () => {
  const layers = layerSummaries(readGguf(MODEL));
  const t = Date.now();
  await runCommand('Fulcrum: Show Model Layers');
  const frame = await findFrameWith('#layers-chart g.bar', 30_000);
  metrics.commandToChartMs = since(t);
  assert.equal(await frame.locator('#layers-chart g.bar').count(), layers.length);
  assert.equal(await frame.locator('#layers-table tbody tr').count(), layers.length);
  const labels = await frame.locator('#layers-table tbody tr th').allTextContents();
  assert.deepEqual(labels, layers.map((l) => l.label));
  // Where each layer runs is what executes (the CPU here, as the status bar says), not the plan
  // panels' what-if plan for the GPU preset, which is named apart from it.
  assert.deepEqual(await frame.locator('#layers-table tbody td.runs-on').allTextContents(), layers.map(() => 'CPU'));
  assert.equal(await frame.locator('#executing').textContent(), 'Executing: CPU only');
  assert.match(await frame.locator('#what-if').textContent() ?? '', /^Plan panels \(what-if for .+: .+\)$/);
  await page.waitForTimeout(300); // let the iframe paint
  await page.screenshot({ path: path.join(SCREENSHOTS, 'e2e-model-layers.png') });
});

e2e('the status bar shows what runs (the CPU here), the panels\' plan only in its tooltip', async () => {
  const text = await waitForStatus(/CPU only/, 30_000);
  assert.match(text, /Fulcrum: ready/);
  assert.doesNotMatch(text, /GPU \d+\/\d+/, 'no GPU split for a model that runs on the CPU');
});

/** Runs a command and returns the webview frame holding `selector`, after it painted. */
async function panel(title: string, selector: string, metric: string): Promise<Frame> {
  // One panel at a time, at the editor's full width, for readable screenshots.
  await closeEditors();
  const t = Date.now();
  await runCommand(title);
  const frame = await findFrameWith(selector, 60_000);
  metrics[metric] = since(t);
  await page.waitForTimeout(400);
  return frame;
}

async function closeEditors(): Promise<void> {
  await runCommand('View: Close All Editors');
  await page.waitForTimeout(300);
}

e2e('Fulcrum: Show Offload Plan draws the heatmap of the engine\'s plan', async () => {
  const plan = planRequest(PLAN_INPUTS);
  const frame = await panel('Fulcrum: Show Offload Plan', '#heatmap g.cell', 'commandToPlanMs');
  const cells = plan.stages.decode.layers.reduce((n, l) => n + l.ops.length, 0) + 1;
  assert.equal(await frame.locator('#heatmap g.cell').count(), cells);
  assert.match(await frame.locator('#plan-summary').textContent() ?? '', new RegExp(`${plan.predicted.tokensPerSecond.toFixed(1)} tokens/s`));
  // The dark shots show a dark workbench and a panel drawn in its dark colours.
  await page.locator('.monaco-workbench.vs-dark').waitFor({ timeout: 20_000 });
  await frame.locator('body.vscode-dark').waitFor({ timeout: 10_000 });
  await page.screenshot({ path: path.join(SCREENSHOTS, 'e2e-plan-dark.png') });
});

e2e('Fulcrum: Show Timeline draws the simulated step', async () => {
  const frame = await panel('Fulcrum: Show Timeline', '#timeline g.span', 'commandToTimelineMs');
  assert.ok(await frame.locator('#timeline g.span').count() > 10);
  await page.screenshot({ path: path.join(SCREENSHOTS, 'e2e-timeline-dark.png') });
});

e2e('Fulcrum: Explain Decision shows the decisions and alternatives', async () => {
  const plan = explainRequest(PLAN_INPUTS);
  const frame = await panel('Fulcrum: Explain Decision', 'section.decision', 'commandToExplainMs');
  assert.equal(await frame.locator('section.decision').count(), plan.explanation.decisions.length);
  await page.screenshot({ path: path.join(SCREENSHOTS, 'e2e-explain-dark.png') });
});

e2e('Fulcrum: What-If re-plans through the engine when a control changes', async () => {
  const frame = await panel('Fulcrum: What-If', '#whatif-compare', 'commandToWhatIfMs');
  const expected = planRequest({ ...PLAN_INPUTS, workload: 'batch=2,prompt=2048,gen=64,vram=4G' });
  await frame.locator('#batch').fill('2');
  await frame.locator('#replan-time[data-ms]').waitFor({ timeout: 30_000 });
  const tps = Number(await frame.locator('#whatif-compare tbody tr[data-tokens-per-second]').getAttribute('data-tokens-per-second'));
  assert.ok(Math.abs(tps - expected.predicted.tokensPerSecond) < 1e-9, `what-if tokens/s ${tps} = planner ${expected.predicted.tokensPerSecond}`);
  metrics.whatIfInputToRedrawMs = Number(await frame.locator('#replan-time').getAttribute('data-ms'));
  await page.screenshot({ path: path.join(SCREENSHOTS, 'e2e-whatif-dark.png') });
});

e2e('Fulcrum: Profile Machine shows progress and can be cancelled', async () => {
  const toast = page.locator('.notification-toast', { hasText: 'Fulcrum: profiling this machine' });
  await runCommandAndPick('Fulcrum: Profile Machine', 'Full profile', () => toast.waitFor({ state: 'visible', timeout: 20_000 }));
  await page.waitForTimeout(400); // the toast slides in
  await page.screenshot({ path: path.join(SCREENSHOTS, 'e2e-profile-progress.png') });
  await toast.hover();
  await toast.locator('.monaco-button', { hasText: 'Cancel' }).click();
  await page.locator('.notification-toast', { hasText: 'profiling cancelled' }).waitFor({ state: 'visible', timeout: 30_000 });
});

e2e('Fulcrum: Select Model plans the picked file before loading it', async () => {
  await runCommandAndPick('Fulcrum: Select Model', 'Browse for a GGUF file', () =>
    page.locator('.quick-input-widget', { hasText: 'Select a GGUF model' }).waitFor({ state: 'visible', timeout: 20_000 }));
  // code-server's open dialog is the workbench's simple file dialog: a path in a quick input.
  const input = page.locator('.quick-input-widget .quick-input-box input');
  await input.waitFor({ state: 'visible' });
  // The dialog writes its start folder into the input once it has read it: fill after that, and
  // again if the folder arrived in between (seen under load: the folder and the path run together).
  await page.waitForFunction(() => ((document.querySelector('.quick-input-widget .quick-input-box input') as HTMLInputElement | null)?.value ?? '').length > 0, undefined, { timeout: 10_000 }).catch(() => undefined);
  for (let attempt = 0; attempt < 3; attempt++) {
    await input.fill(MODEL);
    await page.waitForTimeout(300);
    if ((await input.inputValue()) === MODEL) break;
  }
  const dialog = page.locator('.monaco-dialog-box');
  // The simple file dialog may take the first Enter to complete the typed path (seen under load):
  // Enter again while the quick input is still open, up to three times.
  for (let attempt = 0; attempt < 3; attempt++) {
    await page.keyboard.press('Enter');
    try {
      await dialog.waitFor({ state: 'visible', timeout: 10_000 });
      break;
    } catch (e) {
      if (attempt === 2 || !(await input.isVisible())) throw e;
    }
  }
  const text = await dialog.textContent() ?? '';
  assert.match(text, /Fits on rtx4060-laptop-8gb\+ryzen9-7950x: .* tokens\/s predicted/);
  await page.screenshot({ path: path.join(SCREENSHOTS, 'e2e-select-model.png') });
  await dialog.locator('.monaco-button', { hasText: 'Load' }).click();
  // A modal left open would block every later step: the dialog must be gone.
  await dialog.waitFor({ state: 'hidden', timeout: 10_000 });
  await waitForStatus(/Fulcrum: ready/, 30_000);
});

e2e('the panels follow a light theme', async () => {
  // The theme is switched as a user does, with the theme picker (writing settings.json
  // from outside was not always picked up: the workbench stayed dark for 20-30 s in 5 of 6 runs);
  // the tests after this one do not depend on the theme, so it stays light.
  // Ctrl+K Ctrl+T (by name, the palette also offers 'Browse Color Themes in Marketplace'),
  // through the shared quick-input helper: its retry closes a picker that vanished before the
  // name was typed (once in CI the input was found visible and then hidden for 30 s).
  await page.keyboard.press('Escape');
  await pickInQuickInput(['Control+K', 'Control+T'], 'Light Modern', 'Light Modern', () => page.locator('.monaco-workbench.vs').waitFor({ timeout: 20_000 }));
  // The profiling test before this one leaves a 'profiling cancelled' toast over the panels.
  await runCommand('Notifications: Clear All Notifications');
  await panel('Fulcrum: Show Offload Plan', '#heatmap g.cell', 'commandToPlanLightMs');
  await page.screenshot({ path: path.join(SCREENSHOTS, 'e2e-plan-light.png') });
  await panel('Fulcrum: Show Timeline', '#timeline g.span', 'commandToTimelineLightMs');
  await page.screenshot({ path: path.join(SCREENSHOTS, 'e2e-timeline-light.png') });
  await panel('Fulcrum: Explain Decision', 'section.decision', 'commandToExplainLightMs');
  await page.screenshot({ path: path.join(SCREENSHOTS, 'e2e-explain-light.png') });
  await panel('Fulcrum: What-If', '#whatif-compare', 'commandToWhatIfLightMs');
  await page.screenshot({ path: path.join(SCREENSHOTS, 'e2e-whatif-light.png') });
  await panel('Fulcrum: Show Model Layers', '#layers-chart g.bar', 'commandToLayersLightMs');
  await page.screenshot({ path: path.join(SCREENSHOTS, 'e2e-model-layers-light.png') });
  await closeEditors();
});

e2e('with fulcrum.completions.enabled off, typing shows no ghost text', async () => {
  await runCommand('Fulcrum: Toggle Completions');
  // The extension host has the new setting once the status bar says so.
  const statusBefore = await waitForStatus(/completions off/, 10_000);
  await openStoryAtEnd();
  await page.keyboard.type(' The');
  // Absence can only be observed for a while: ghost text came within ~0.3 s above.
  await page.waitForTimeout(2000);
  assert.equal(await page.locator('.monaco-editor .ghost-text-decoration').count(), 0);
  assert.equal(await statusItem().textContent(), statusBefore, 'no completion ran (tokens/s unchanged)');
  await page.screenshot({ path: path.join(SCREENSHOTS, 'e2e-completions-off.png') });
  await runCommand('Fulcrum: Toggle Completions');
  await waitForStatus(/^(?!.*completions off).*Fulcrum: ready/, 10_000);
  await openStoryAtEnd();
  await page.keyboard.type('.');
  await page.locator('.monaco-editor .ghost-text-decoration').first().waitFor({ state: 'visible', timeout: 30_000 });
  await page.keyboard.press('Escape');
});

e2e('the engine serves the editor\'s model over HTTP (fulcrum.http.enabled)', async () => {
  const engine = await Engine.load(MODEL, { threads: 1 });
  const want = (await engine.generate('Once upon a time', { maxTokens: 16, temperature: 0 })).text;
  engine.dispose();
  const res = await engineHttp('/v1/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 16, temperature: 0 }) });
  const body = await res.json() as { choices: { text: string }[] };
  assert.equal(body.choices[0]!.text, want, 'the HTTP API gives the greedy text of the same model');
});

e2e('the engine killed mid-stream is restarted within 3 s and the next completion works', async () => {
  const enginePids = findEnginePids();
  assert.equal(enginePids.length, 1, `one engine process runs (found ${enginePids.join(', ')})`);
  // A long HTTP stream from the engine; it is killed once the first pieces arrived.
  const res = await fetch(`http://127.0.0.1:${HTTP_PORT}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 4000, temperature: 0, stream: true }),
  });
  const reader = res.body!.getReader();
  await reader.read();
  const killedAt = Date.now();
  process.kill(enginePids[0]!, 'SIGKILL');
  await reader.read().catch(() => undefined);  // the stream ends with the process
  let restarted: number[] = [];
  while (Date.now() - killedAt < 10_000) {
    restarted = findEnginePids().filter((p) => p !== enginePids[0]);
    if (restarted.length) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  const restartMs = Date.now() - killedAt;
  metrics.engineRestartMs = restartMs;
  assert.equal(restarted.length, 1, 'a new engine process runs');
  assert.ok(restartMs <= 3000, `the engine was restarted ${restartMs} ms after it was killed (limit 3000 ms)`);
  await waitForStatus(/Fulcrum: ready/, 60_000);
  metrics.engineRestartToReadyMs = Date.now() - killedAt;
  // The next completion works: ghost text in the editor, and the HTTP API is back.
  await openStoryAtEnd();
  await page.keyboard.type(' a');
  await page.locator('.monaco-editor .ghost-text-decoration').first().waitFor({ state: 'visible', timeout: 30_000 });
  await page.keyboard.press('Escape');
  assert.equal((await engineHttp('/health')).status, 200);
});

/** GET/POST on the engine's HTTP API, retried while it (re)starts. */
async function engineHttp(route: string, init?: RequestInit): Promise<Response> {
  const end = Date.now() + 30_000;
  for (;;) {
    try {
      const r = await fetch(`http://127.0.0.1:${HTTP_PORT}${route}`, { ...init, signal: AbortSignal.timeout(10_000) });
      if (r.status !== 503) return r;
    } catch (e) {
      if (Date.now() > end) throw e;
    }
    if (Date.now() > end) throw new Error(`the HTTP API at port ${HTTP_PORT} did not answer ${route}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The engine processes of this test's extension install (their command line names its dist/server.js). */
function findEnginePids(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (cmdline.some((a) => a.startsWith(extensionsDir) && a.endsWith(path.join('dist', 'server.js')))) pids.push(Number(entry));
    } catch { /* process ended */ }
  }
  return pids;
}

e2e('after repeated crashes the engine is not restarted and an error is shown', async () => {
  // One crash happened in the previous test; the policy gives up at the fifth within 3 minutes.
  for (let crash = 2; crash <= 5; crash++) {
    const pids = await waitForEnginePid(30_000);
    process.kill(pids[0]!, 'SIGKILL');
    if (crash === 5) break;
    // The status bar still says 'ready' until the extension sees the exit: wait for the next
    // engine process first, then for it to be ready (a kill during its initialization would be
    // an initialization failure, not the crash this test counts).
    const end = Date.now() + 60_000;
    while (!findEnginePids().some((pid) => pid !== pids[0])) {
      if (Date.now() > end) throw new Error(`no engine was started again after crash ${crash}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    await waitForStatus(/Fulcrum: ready/, 60_000);
  }
  const toast = page.locator('.notifications-toasts .notification-list-item-message', { hasText: 'Fulcrum: the engine exited 5 times' });
  await toast.first().waitFor({ state: 'visible', timeout: 20_000 });
  const gaveUp = await waitForStatus(/Fulcrum: error/, 10_000);
  // The engine is gone: no completion speed or split of the model it had beside "error".
  assert.doesNotMatch(gaveUp, /tok\/s|GPU \d|CPU/, `status bar after giving up: ${gaveUp}`);
  assert.deepEqual(findEnginePids(), [], 'no engine runs');
  // Editing and saving a document with no engine: the language client's failed notifications
  // stay in the log (Output › Fulcrum), with no toast of their own beside Fulcrum's.
  await openStoryAtEnd();
  await page.keyboard.type(' x');
  await page.keyboard.press('Control+S');
  await page.waitForTimeout(2000);
  const libraryToasts = page.locator('.notifications-toasts .notification-list-item-message', { hasText: /Sending document notification|Connection is disposed/ });
  await page.screenshot({ path: path.join(SCREENSHOTS, 'e2e-engine-gave-up.png') });
  assert.equal(await libraryToasts.count(), 0, `no language-client toast: ${(await libraryToasts.allTextContents()).join(' | ')}`);
});

async function waitForEnginePid(timeoutMs: number): Promise<number[]> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const pids = findEnginePids();
    if (pids.length === 1) return pids;
    if (Date.now() > end) throw new Error(`expected one engine process, found ${pids.length}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
