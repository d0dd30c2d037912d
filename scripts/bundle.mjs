// Bundles the engine, CLI, LSP server, extension and webviews with esbuild. Entry points that
// do not exist yet are skipped, so each part adds its entry here once and builds from then on.
import * as esbuild from 'esbuild';
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const node = [
  ['engine/cli.ts', 'dist/cli.js'],
  ['engine/server/main.ts', 'dist/server.js'],
  ['engine/server/planner/plan-worker.ts', 'dist/plan-worker.js'],
  ['extension/extension.ts', 'dist/extension.js'],
  ['test/bench/bench-cpu.ts', 'dist/bench-cpu.js'],
  ['test/bench/bench-plan.ts', 'dist/bench-plan.js'],
];
const browser = [
  ['webviews/layers/main.ts', 'dist/webviews/layers.js'],
  ['webviews/plan/main.ts', 'dist/webviews/plan.js'],
  ['webviews/timeline/main.ts', 'dist/webviews/timeline.js'],
  ['webviews/explain/main.ts', 'dist/webviews/explain.js'],
  ['webviews/whatif/main.ts', 'dist/webviews/whatif.js'],
];
mkdirSync(path.join(root, 'dist'), { recursive: true });
const jobs = [];
for (const [src, out] of node) {
  if (!existsSync(path.join(root, src))) continue;
  jobs.push(esbuild.build({
    entryPoints: [path.join(root, src)],
    outfile: path.join(root, out),
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    sourcemap: true,
    // vscode is provided by the editor; node-llama-cpp and onnxruntime-node are loaded at run
    // time from node_modules (benchmarks and tests only); the addon is found on disk.
    external: ['vscode', 'node-llama-cpp', 'onnxruntime-node', '*.node'],
    logLevel: 'warning',
  }));
}
for (const [src, out] of browser) {
  if (!existsSync(path.join(root, src))) continue;
  jobs.push(esbuild.build({
    entryPoints: [path.join(root, src)],
    outfile: path.join(root, out),
    bundle: true,
    platform: 'browser',
    target: 'es2022',
    format: 'iife',
    sourcemap: false,
    logLevel: 'warning',
  }));
}
await Promise.all(jobs);
console.log(`bundled ${jobs.length} entry points`);
