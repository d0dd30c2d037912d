// The pieces of an e2e run in a real VS Code (code-server + headless Chromium, recipe:
// ../shared/design/VSCODE-E2E.md) that do not depend on the scenario: build and install the
// .vsix, start code-server on a free port with given settings and workspace files, open the
// workbench, drive quick inputs, read the Fulcrum status bar item, and stop everything.
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { addonPath } from '../../engine/native/addon';
import { repoRoot } from '../helpers/shared';
import { SCREENSHOTS, launchChromium, skipUnlessChromium } from '../webview/browser';

export const CODE_SERVER = process.env.CODE_SERVER ?? path.join(repoRoot, '.vscode-e2e', 'code-server', 'node_modules', '.bin', 'code-server');
const VSCE = path.join(repoRoot, 'node_modules', '.bin', 'vsce');

/** Why the e2e tier cannot run here (false: it can); `files` are shared files the scenario needs. */
export function e2eSkipReason(files: string[]): false | string {
  if (!existsSync(CODE_SERVER)) return `code-server not installed at ${CODE_SERVER} (run ../shared/tools/install-code-server.sh .vscode-e2e/code-server)`;
  const chromium = skipUnlessChromium();
  if (chromium) return chromium;
  for (const f of files) if (!existsSync(f)) return `shared file ${f} is absent`;
  if (!existsSync(addonPath())) return `native addon ${addonPath()} is not built (npm run build:native)`;
  return false;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/** The settings every scenario starts from: no tips, no telemetry, only the engine's ghost text. */
const BASE_SETTINGS = {
  'workbench.startupEditor': 'none',
  'workbench.tips.enabled': false,
  'workbench.enableExperiments': false,
  'telemetry.telemetryLevel': 'off',
  'update.mode': 'none',
  'extensions.autoCheckUpdates': false,
  'extensions.autoUpdate': false,
  'extensions.ignoreRecommendations': true,
  'security.workspace.trust.enabled': false,
  'editor.inlineSuggest.enabled': true,
  'editor.quickSuggestions': { other: false, comments: false, strings: false },
  'editor.wordBasedSuggestions': 'off',
  'git.enabled': false,
  'chat.commandCenter.enabled': false,
};

export interface Workbench {
  page: Page;
  /** How long the start took: building the .vsix, installing it, code-server to a ready workbench. */
  timings: { buildVsixMs: number; installExtensionMs: number; serverStartToWorkbenchReadyMs: number };
  userDataDir: string;
  extensionsDir: string;
  /** code-server's own output so far. */
  log(): string;
  /** Rewrites settings.json with `changes` merged in (VS Code applies file changes). */
  updateSettings(changes: Record<string, unknown>): void;
  /** Closes the browser, stops code-server's process group, saves its log and the extension's. */
  stop(prefix: string): Promise<void>;
}

/**
 * Builds and installs the .vsix exactly as `npm run package` does (minus the native build),
 * starts code-server with `settings` over the base ones, opens the workspace holding `files` and
 * waits until the explorer lists `files`' first name (the remote connection is up).
 */
export async function startWorkbench(settings: Record<string, unknown>, files: Record<string, string>): Promise<Workbench> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  let t = Date.now();
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'fulcrum-e2e-'));
  const vsix = path.join(tmp, 'fulcrum.vsix');
  const bundle = spawnSync(process.execPath, ['scripts/bundle.mjs'], { cwd: repoRoot, encoding: 'utf8' });
  assert.equal(bundle.status, 0, `bundle failed:\n${bundle.stdout}\n${bundle.stderr}`);
  const pack = spawnSync(VSCE, ['package', '--no-dependencies', '--skip-license', '-o', vsix], { cwd: repoRoot, encoding: 'utf8' });
  assert.equal(pack.status, 0, `vsce package failed:\n${pack.stdout}\n${pack.stderr}`);
  const buildVsixMs = Date.now() - t;

  const userDataDir = path.join(tmp, 'user-data');
  const extensionsDir = path.join(tmp, 'extensions');
  const workspace = path.join(tmp, 'ws');
  for (const d of [userDataDir, extensionsDir, workspace, path.join(userDataDir, 'User')]) mkdirSync(d, { recursive: true });
  const settingsFile = path.join(userDataDir, 'User', 'settings.json');
  writeFileSync(settingsFile, JSON.stringify({ ...BASE_SETTINGS, ...settings }, null, 2));
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(workspace, name), text);

  const env = { ...process.env, XDG_CONFIG_HOME: path.join(tmp, 'xdg-config'), XDG_DATA_HOME: path.join(tmp, 'xdg-data') };
  const dirs = ['--user-data-dir', userDataDir, '--extensions-dir', extensionsDir];
  t = Date.now();
  const inst = spawnSync(CODE_SERVER, [...dirs, '--install-extension', vsix, '--force'], { env, encoding: 'utf8' });
  assert.equal(inst.status, 0, `install-extension failed:\n${inst.stdout}\n${inst.stderr}`);
  assert.match(inst.stdout, /successfully installed/);
  const installExtensionMs = Date.now() - t;

  let serverLog = '';
  const port = await freePort();
  t = Date.now();
  const server: ChildProcess = spawn(CODE_SERVER, [...dirs, '--auth', 'none', '--bind-addr', `127.0.0.1:${port}`,
    '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust',
    '--disable-getting-started-override', '--ignore-last-opened', workspace],
  { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true }); // own process group: see stop()
  server.stdout?.on('data', (b: Buffer) => { serverLog += b.toString(); });
  server.stderr?.on('data', (b: Buffer) => { serverLog += b.toString(); });
  let browser: Browser | undefined;

  const stop = async (prefix: string): Promise<void> => {
    await browser?.close();
    if (server.pid !== undefined) {
      // code-server, its extension host and the engine share the process group spawned here.
      const pid = server.pid;
      const alive = () => { try { process.kill(-pid, 0); return true; } catch { return false; } };
      const tStop = Date.now();
      try { process.kill(-pid, 'SIGTERM'); } catch { /* gone */ }
      while (alive() && Date.now() - tStop < 5000) await new Promise((r) => setTimeout(r, 50));
      if (alive()) process.kill(-pid, 'SIGKILL');
    }
    writeFileSync(path.join(SCREENSHOTS, `${prefix}-code-server.log`), serverLog);
    writeFileSync(path.join(SCREENSHOTS, `${prefix}-fulcrum-output.log`), extensionLogs(userDataDir));
    rmSync(tmp, { recursive: true, force: true });
  };

  try {
    await waitForHttp(`http://127.0.0.1:${port}/healthz`, 30_000, () => serverLog);
    browser = await launchChromium();
    const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
    page.on('pageerror', (e) => console.log('[pageerror]', e.message));
    await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(workspace)}`);
    await page.locator('.monaco-workbench').waitFor({ state: 'visible', timeout: 60_000 });
    await page.locator('.explorer-folders-view .monaco-list-row', { hasText: Object.keys(files)[0]! }).waitFor({ state: 'visible', timeout: 60_000 });
    return {
      page, userDataDir, extensionsDir, log: () => serverLog, stop,
      timings: { buildVsixMs, installExtensionMs, serverStartToWorkbenchReadyMs: Date.now() - t },
      updateSettings: (changes) => writeFileSync(settingsFile, JSON.stringify({ ...JSON.parse(readFileSync(settingsFile, 'utf8')), ...changes }, null, 2)),
    };
  } catch (err) {
    await stop('e2e-start-FAILED');
    throw err;
  }
}

async function waitForHttp(url: string, timeoutMs: number, log: () => string): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    try { if ((await fetch(url)).ok) return; } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`code-server did not answer ${url} within ${timeoutMs} ms\n${log()}`);
}

/** The extension's own log (Output › Fulcrum) files under the user data folder. */
export function extensionLogs(userDataDir: string): string {
  const logs: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(p);
      else if (/Fulcrum/.test(entry.name)) logs.push(readFileSync(p, 'utf8'));
    }
  };
  try { walk(path.join(userDataDir, 'logs')); } catch { /* no logs yet */ }
  return logs.join('\n----\n');
}

/**
 * Opens a quick input with `key`, types `text`, picks the row showing `row`, then waits for
 * `settled`. A quick input closes when something else takes the focus (seen under load), so the
 * sequence is retried up to three times.
 */
export async function pickInQuickInput(page: Page, key: string | readonly string[], text: string, row: string, settled?: () => Promise<void>): Promise<void> {
  const input = page.locator('.quick-input-widget .quick-input-box input');
  for (let attempt = 1; ; attempt++) {
    try {
      for (const k of typeof key === 'string' ? [key] : key) await page.keyboard.press(k);
      await input.waitFor({ state: 'visible', timeout: 10_000 });
      await input.fill(text, { timeout: 10_000 });
      await page.locator('.quick-input-widget .monaco-list-row', { hasText: row }).first().waitFor({ state: 'visible', timeout: 20_000 });
      await page.keyboard.press('Enter');
      await settled?.();
      return;
    } catch (err) {
      if (attempt === 3) throw err;
      console.log(`# quick input '${text}' lost (attempt ${attempt}): ${String((err as Error).message).split('\n')[0]}`);
      await page.keyboard.press('Escape');
      await page.waitForTimeout(500);
    }
  }
}

export function statusItem(page: Page) {
  return page.locator('.statusbar-item', { hasText: 'Fulcrum:' }).first();
}

/** Waits until the Fulcrum status bar item's text matches; returns it. */
export async function waitForStatus(page: Page, pattern: RegExp, timeoutMs: number): Promise<string> {
  const end = Date.now() + timeoutMs;
  let text = '';
  while (Date.now() < end) {
    text = (await statusItem(page).textContent().catch(() => '')) ?? '';
    if (pattern.test(text)) return text;
    await page.waitForTimeout(100);
  }
  throw new Error(`status bar never matched ${pattern}; last: '${text}'`);
}

/** The ghost text shown in the editor (Monaco splits a long decoration into several spans). */
export async function ghostText(page: Page, timeoutMs: number): Promise<string> {
  const ghost = page.locator('.monaco-editor .ghost-text-decoration');
  await ghost.first().waitFor({ state: 'visible', timeout: timeoutMs });
  await page.waitForTimeout(200);
  return (await ghost.allTextContents()).join('').replace(/\u00a0/g, ' ');
}
