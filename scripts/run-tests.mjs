// Runs every test tier with node's test runner: test/<tier>/**/*.test.ts, TypeScript through tsx.
// Tiers run in order (fast first); `node scripts/run-tests.mjs unit papers` runs only those.
// A tier whose prerequisites are missing (no ../shared, no code-server, no Chromium) skips its
// tests with a printed reason rather than passing silently.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync, existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const allTiers = ['unit', 'runtime', 'papers', 'parity', 'lsp', 'webview', 'e2e'];
const tiers = process.argv.slice(2).length ? process.argv.slice(2) : allTiers;

function find(dir) {
  if (!existsSync(dir)) return [];
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) out.push(...find(p));
    else if (name.endsWith('.test.ts') || name.endsWith('.test.mjs')) out.push(p);
  }
  return out.sort();
}

const files = tiers.flatMap((t) => find(path.join(root, 'test', t)));
if (files.length === 0) {
  console.error(`no test files found for tiers: ${tiers.join(', ')}`);
  process.exit(1);
}
const r = spawnSync(process.execPath, [
  '--import', 'tsx',
  '--test', '--test-concurrency=1', '--test-reporter=spec',
  ...files.map((f) => path.relative(root, f)),
], { cwd: root, stdio: 'inherit', env: { ...process.env, FULCRUM_ROOT: root } });
process.exit(r.status ?? 1);
