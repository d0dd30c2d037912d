// `npm run test:electron`: the extension in a downloaded desktop VS Code (@vscode/test-electron).
// Needs network access to download VS Code on first use, so CI runs the offline code-server
// tier (test/e2e) instead; this is for developer machines. The suite (suite.ts) is bundled with
// esbuild because the extension host loads plain CommonJS.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as esbuild from 'esbuild';
import { runTests } from '@vscode/test-electron';
import { repoRoot, sharedPath } from '../helpers/shared';

async function main(): Promise<number> {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'fulcrum-electron-'));
  const suite = path.join(tmp, 'suite.js');
  await esbuild.build({
    entryPoints: [path.join(__dirname, 'suite.ts')], outfile: suite, bundle: true,
    platform: 'node', format: 'cjs', target: 'node20', external: ['vscode'],
  });
  const userData = path.join(tmp, 'user-data');
  mkdirSync(path.join(userData, 'User'), { recursive: true });
  writeFileSync(path.join(userData, 'User', 'settings.json'), JSON.stringify({
    'fulcrum.modelPath': process.env.FULCRUM_MODEL ?? sharedPath('models', 'stories260K.gguf'),
    'fulcrum.threads': 1,
    'telemetry.telemetryLevel': 'off',
    'update.mode': 'none',
  }));
  const workspace = path.join(tmp, 'ws');
  mkdirSync(workspace);
  writeFileSync(path.join(workspace, 'story.txt'), 'Once upon a time, there was a little');
  await runTests({
    version: process.env.VSCODE_VERSION ?? '1.100.3',
    extensionDevelopmentPath: repoRoot,
    extensionTestsPath: suite,
    launchArgs: [workspace, '--disable-extensions', '--user-data-dir', userData],
  });
  return 0;
}

main().then((code) => { process.exitCode = code; }, (err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exitCode = 1;
});
