// Headless Debian Chromium through playwright-core (never a downloaded browser), with the flags
// of the offline VS Code recipe (shared/design/VSCODE-E2E.md).
import { existsSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { repoRoot } from '../helpers/shared';

export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
export const SCREENSHOTS = path.join(repoRoot, 'test-artifacts', 'screenshots');

export function skipUnlessChromium(): false | string {
  return existsSync(CHROMIUM) ? false : `Chromium not found at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM)`;
}

export async function launchChromium(): Promise<Browser> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // Keeps crashpad's folder out of $HOME.
    env: { ...process.env, XDG_CONFIG_HOME: path.join(os.tmpdir(), 'fulcrum-chromium-config') },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}
