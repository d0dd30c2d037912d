// `fulcrum plan|explain|simulate|presets` end to end through the CLI entry (child process).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot, tempDir } from '../helpers/shared';

function cli(...args: string[]): { code: number | null; out: string; err: string } {
  return cliEnv({}, ...args);
}

function cliEnv(env: Record<string, string>, ...args: string[]): { code: number | null; out: string; err: string } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'engine/cli.ts'), ...args], { cwd: repoRoot, encoding: 'utf8', timeout: 60_000, env: { ...process.env, ...env } });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

test('plan --json: stable fields', () => {
  const r = cli('plan', '--model', 'opt-30b', '--hardware', 'paper000', '--workload', 'batch=50,prompt=512,gen=32', '--json');
  assert.equal(r.code, 0, r.err);
  const plan = JSON.parse(r.out);
  assert.equal(plan.policy, 'auto');
  for (const k of ['layerMs', 'stepMs', 'tokensPerSecond']) assert.equal(typeof plan.predicted[k], 'number');
  assert.equal(plan.stages.decode.layers.length, 48);
  assert.equal(typeof plan.stages.decode.layers[0].ops[0].name, 'string');
  assert.ok(['cpu', 'gpu', 'split'].includes(plan.stages.decode.layers[0].ops[0].device));
});

test('simulate --trace writes a Chrome trace; explain prints decisions and what-ifs; --costs plans from a table', () => {
  const { dir, cleanup } = tempDir();
  try {
    const trace = path.join(dir, 't.json');
    const s = cli('simulate', '--model', 'llama-3.1-8b', '--hardware', 'rtx4060-laptop-8gb+ryzen9-7950x', '--workload', 'batch=1,prompt=4096,gen=64', '--trace', trace);
    assert.equal(s.code, 0, s.err);
    assert.match(s.out, /simulated: prefill/);
    assert.ok(JSON.parse(readFileSync(trace, 'utf8')).traceEvents.length > 0);
    const e = cli('explain', '--model', 'llama-3.1-8b', '--hardware', 'rtx4060-laptop-8gb+ryzen9-7950x', '--workload', 'batch=1,prompt=4096,gen=64', '--policy', 'layer-split');
    assert.equal(e.code, 0, e.err);
    assert.match(e.out, /decision layers-on-gpu/);
    assert.match(e.out, /what if:\n  - /);
    const costs = path.join(dir, 'c.json');
    writeFileSync(costs, JSON.stringify({ unit: 'ms', ops: [{ name: 'Q', cpu: 5.775, gpu: 0.323, h2d: 4.214 }, { name: 'FC.0', cpu: 23.216, h2d: 16.856 }] }));
    // Paper 000's workload (batch 50, prompt 512, gen 32): with the default prompt 1024 / gen 64
    // the KV of 50 sequences would not fit the preset's host memory, and the plan is refused.
    const c = cli('plan', '--model', 'opt-30b', '--hardware', 'paper000', '--workload', 'batch=50,prompt=512,gen=32', '--policy', 'split-points', '--costs', costs, '--json');
    assert.equal(c.code, 0, c.err);
    const plan = JSON.parse(c.out);
    assert.deepEqual(plan.stages.decode.layers[0].ops.map((o: { name: string; device: string }) => `${o.name}:${o.device}`), ['Q:cpu', 'FC.0:gpu']);
    // The paper's L (Eq. 5) is the policy's analytic figure; the printed one is the simulator's (≥ L).
    assert.ok(Math.abs(plan.details.analytic.layerMs - 16.856) < 1e-9);
    assert.ok(plan.predicted.layerMs >= 16.856 - 1e-9 && plan.predicted.layerMs < 16.856 * 1.05, `${plan.predicted.layerMs}`);
  } finally { cleanup(); }
});

test('errors: usage, unknown presets, missing profile — clear message, non-zero exit', () => {
  const a = cli('plan', '--hardware', 'paper000', '--workload', 'batch=1');
  assert.notEqual(a.code, 0);
  assert.match(a.err, /--model is required/);
  const b = cli('plan', '--model', 'gpt-5', '--hardware', 'paper000', '--workload', 'batch=1');
  assert.match(b.err, /unknown model preset 'gpt-5'/);
  const { dir, cleanup } = tempDir(); // an empty profile cache
  try {
    const c = cliEnv({ XDG_CACHE_HOME: dir }, 'plan', '--model', 'llama-2-7b', '--hardware', 'this', '--workload', 'batch=1');
    assert.notEqual(c.code, 0);
    assert.match(c.err, /run `fulcrum profile` first/);
  } finally { cleanup(); }
  const d = cli('presets', '--json');
  assert.equal(d.code, 0);
  assert.ok(JSON.parse(d.out).models.length >= 13);
});
