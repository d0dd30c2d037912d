// Issue 27 item 3: the editor completing on a remote server. A real LSP client process drives the
// engine (no local model) with completionEndpoint set to a real, separate `fulcrum serve --http`
// process; the completion comes from there, stats say where; a dead endpoint with a local model
// loaded falls back to it and the log says so.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { LspSession } from './lsp-session';

const repoRoot = path.resolve(__dirname, '../..');
const MODEL = path.resolve(repoRoot, '../shared/models/tiny-fim-coder.q8_0.gguf');
const TOKEN = 'lsp-remote-token';
const skip = existsSync(MODEL) ? false : `test model absent: ${MODEL}`;
let server: ChildProcess | undefined;
let url = '';
const URI = 'file:///work/add.py';
const TEXT = 'def add(a, b):\n    return \n\nprint(add(1, 2))\n';

before(async () => {
  if (skip) return;
  server = spawn(process.execPath, [path.join(repoRoot, 'bin/fulcrum.js'), 'serve', '--http', '--model', MODEL, '--port', '0', '--token', TOKEN, '--threads', '1'], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
  url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const t = setTimeout(() => reject(new Error(`server did not start: ${out}`)), 120_000);
    server!.stdout!.on('data', (d: Buffer) => { out += d; const m = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(out); if (m) { clearTimeout(t); resolve(m[1]!); } });
    server!.on('exit', (c) => { clearTimeout(t); reject(new Error(`server exited ${c}`)); });
  });
});
after(() => { server?.kill(); });

test('no local model: the completion comes from the remote Fulcrum; stats name the endpoint', { skip, timeout: 120_000 }, async () => {
  const lsp = LspSession.start();
  try {
    await lsp.initialize({ completionEndpoint: url, completionEndpointToken: TOKEN, maxCompletionTokens: 8 });
    lsp.openDocument(URI, TEXT, 'python');
    const list = await lsp.inlineCompletion(URI, 1, 11);
    assert.equal(list.items.length, 1, `logs: ${lsp.logs.join('\n')}`);
    assert.ok(String(list.items[0]!.insertText).length > 0);
    await lsp.waitFor(() => lsp.stats.length > 0, 'stats');
    assert.match(lsp.stats[0]!.format!, /^remote 127\.0\.0\.1:\d+ \(\/infill\)$/);
    assert.ok(lsp.stats[0]!.generatedTokens > 0, 'timings from the remote server');
    assert.deepEqual(lsp.remote, [{ endpoint: lsp.stats[0]!.format!.slice('remote '.length), ok: true }], 'fulcrum/remote says where it ran');
  } finally { await lsp.stop(); }
});

test('the prompt budget applies to remote completions: a large file is not sent whole', { skip, timeout: 120_000 }, async () => {
  const lsp = LspSession.start();
  try {
    await lsp.initialize({ completionEndpoint: url, completionEndpointToken: TOKEN, maxCompletionTokens: 4, promptBudget: 128, completionCache: false });
    const lines: string[] = [];
    for (let i = 0; i < 2000; i++) lines.push(`def f_${i}(x):`, `    return x * ${i}`, '');
    const big = lines.join('\n');
    lsp.openDocument('file:///work/big.py', big, 'python');
    await lsp.inlineCompletion('file:///work/big.py', 3000, 4);
    await lsp.waitFor(() => lsp.stats.length > 0, 'stats');
    // The server evaluated the whole prompt (nothing of it was cached). Without a local tokenizer
    // the budget is counted in estimated tokens (2.5 characters each), so allow half again; without
    // the budget the server would take about 500 tokens (its whole context).
    console.log(`  remote prompt for a 40 KB file with a 128-token budget: ${lsp.stats[0]!.promptTokens} tokens at the server`);
    assert.ok(lsp.stats[0]!.promptTokens > 0 && lsp.stats[0]!.promptTokens <= 1.5 * 128 + 8, `prompt tokens at the server: ${lsp.stats[0]!.promptTokens}`);
  } finally { await lsp.stop(); }
});

test('a dead endpoint falls back to the local model and the log says so', { skip, timeout: 180_000 }, async () => {
  const lsp = LspSession.start();
  try {
    await lsp.initialize({ modelPath: MODEL, completionEndpoint: 'http://127.0.0.1:1', completionEndpointKind: 'infill', maxCompletionTokens: 8 });
    await lsp.waitFor(() => lsp.states.some((s) => s.state === 'ready'), 'local model ready', 120_000);
    lsp.openDocument(URI, TEXT, 'python');
    const list = await lsp.inlineCompletion(URI, 1, 11);
    assert.ok(lsp.logs.some((l) => /remote endpoint failed \(127\.0\.0\.1:1\/infill: .*\); completing with the local model/.test(l)), lsp.logs.join('\n'));
    await lsp.waitFor(() => lsp.stats.length > 0, 'stats');
    assert.ok(!/^remote/.test(lsp.stats[0]!.format ?? ''), 'the local model answered');
    assert.equal(lsp.remote.length, 1);
    assert.deepEqual({ ...lsp.remote[0], reason: undefined }, { endpoint: '127.0.0.1:1 (/infill)', ok: false, reason: undefined, fallback: 'local' });
    assert.match(lsp.remote[0]!.reason!, /^127\.0\.0\.1:1\/infill: /);
    assert.ok(Array.isArray(list.items));
  } finally { await lsp.stop(); }
});

test('a slow endpoint falls back to the local model at the completion time limit', { skip, timeout: 180_000 }, async () => {
  // An HTTP server that takes requests and never answers them: the slow endpoint.
  const pending: http.ServerResponse[] = [];
  const slow = http.createServer((_req, res) => { pending.push(res); });
  await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
  const port = (slow.address() as { port: number }).port;
  const lsp = LspSession.start();
  try {
    await lsp.initialize({ modelPath: MODEL, completionEndpoint: `http://127.0.0.1:${port}`, completionEndpointKind: 'infill', completionTimeLimitMs: 400, maxCompletionTokens: 8 });
    await lsp.waitFor(() => lsp.states.some((s) => s.state === 'ready'), 'local model ready', 120_000);
    lsp.openDocument(URI, TEXT, 'python');
    await lsp.inlineCompletion(URI, 1, 11);
    assert.equal(pending.length, 1, 'the endpoint was asked first');
    assert.deepEqual(lsp.remote.map((r) => [r.ok, r.fallback, r.reason]), [[false, 'local', `127.0.0.1:${port}/infill: no answer within 400 ms`]]);
    await lsp.waitFor(() => lsp.stats.length > 0, 'stats');
    assert.ok(!/^remote/.test(lsp.stats[0]!.format ?? ''), 'the local model answered');
  } finally {
    await lsp.stop();
    for (const r of pending) r.destroy();
    slow.close();
  }
});

test('a dead endpoint without a local model: no ghost text, no error, and fulcrum/remote says nothing could answer', { skip, timeout: 60_000 }, async () => {
  const lsp = LspSession.start();
  try {
    await lsp.initialize({ completionEndpoint: 'http://127.0.0.1:1', completionEndpointKind: 'infill', maxCompletionTokens: 8 });
    lsp.openDocument(URI, TEXT, 'python');
    const list = await lsp.inlineCompletion(URI, 1, 11);
    assert.deepEqual(list.items, []);
    await lsp.waitFor(() => lsp.remote.length > 0, 'fulcrum/remote');
    assert.equal(lsp.remote[0]!.ok, false);
    assert.equal(lsp.remote[0]!.fallback, 'none');
    assert.match(lsp.remote[0]!.reason!, /^127\.0\.0\.1:1\/infill: /);
    assert.ok(lsp.logs.some((l) => /remote endpoint failed .*; no local model to fall back to/.test(l)), lsp.logs.join('\n'));
    assert.equal(lsp.stats.length, 0, 'nothing completed');
  } finally { await lsp.stop(); }
});

test('a bad endpoint setting is a clear error', { skip, timeout: 60_000 }, async () => {
  const lsp = LspSession.start();
  try {
    await assert.rejects(lsp.initialize({ completionEndpoint: 'ftp://x' }), /completionEndpoint 'ftp:\/\/x' must be an http\(s\) URL/);
  } finally { lsp.child.kill(); }
});
