// Issue 27 item 3 (client part): the engine's remote completion client against a real Fulcrum
// HTTP server started as a separate process (`fulcrum serve --http`), through /infill and
// /v1/completions, with the token, cancellation, and a clear error for a wrong token or a dead host.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { RemoteCompletionClient, RemoteEndpointError } from '../../engine/completion/remote/client';

const repoRoot = path.resolve(__dirname, '../..');
const MODEL = path.resolve(repoRoot, '../shared/models/tiny-fim-coder.q8_0.gguf');
const TOKEN = 'remote-test-token';
const skip = existsSync(MODEL) ? false : `test model absent: ${MODEL}`;
let server: ChildProcess | undefined;
let url = '';

before(async () => {
  if (skip) return;
  server = spawn(process.execPath, [path.join(repoRoot, 'bin/fulcrum.js'), 'serve', '--http', '--model', MODEL, '--port', '0', '--token', TOKEN, '--threads', '1'], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
  url = await new Promise<string>((resolve, reject) => {
    let out = '';
    let err = '';
    const t = setTimeout(() => reject(new Error(`server did not start in 120 s: ${out}${err}`)), 120_000);
    server!.stdout!.on('data', (d: Buffer) => { out += d; const m = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(out); if (m) { clearTimeout(t); resolve(m[1]!); } });
    server!.stderr!.on('data', (d: Buffer) => { err += d; });
    server!.on('exit', (c) => { clearTimeout(t); reject(new Error(`server exited ${c}: ${err}`)); });
  });
});
after(() => { server?.kill(); });

const req = { prefix: 'def add(a, b):\n    return ', suffix: '\n\nprint(add(1, 2))\n', maxTokens: 8 };

test('auto kind: /infill on a Fulcrum server, with the token', { skip }, async () => {
  const c = new RemoteCompletionClient({ url, token: TOKEN });
  const r = await c.complete(req);
  assert.equal(r.kind, 'infill');
  assert.ok(r.text.length > 0, 'the remote model generated text');
  assert.match(c.describe(), /127\.0\.0\.1:\d+ \(\/infill\)/);
});

test('openai kind: /v1/completions on the same server (URL with /v1 accepted)', { skip }, async () => {
  const c = new RemoteCompletionClient({ url: `${url}/v1/`, token: TOKEN, kind: 'openai' });
  const r = await c.complete(req);
  assert.equal(r.kind, 'openai');
  assert.equal(typeof r.text, 'string');
});

test('greedy: /infill twice gives the same text', { skip }, async () => {
  const c = new RemoteCompletionClient({ url, token: TOKEN, kind: 'infill' });
  assert.equal((await c.complete(req)).text, (await c.complete(req)).text);
});

test('a wrong token is an error naming the status and the setting', { skip }, async () => {
  const c = new RemoteCompletionClient({ url, token: 'wrong', kind: 'infill' });
  await assert.rejects(c.complete(req), (e: RemoteEndpointError) => e.status === 401 && /fulcrum\.completions\.token/.test(e.message));
});

test('cancellation: an aborted request rejects with the caller\'s reason', { skip }, async () => {
  const c = new RemoteCompletionClient({ url, token: TOKEN, kind: 'infill' });
  const ac = new AbortController();
  ac.abort(new Error('superseded'));
  await assert.rejects(c.complete({ ...req, signal: ac.signal }), /superseded/);
});

test('a dead endpoint and a bad URL are clear errors', async () => {
  const c = new RemoteCompletionClient({ url: 'http://127.0.0.1:1', kind: 'infill', timeoutMs: 2000 });
  await assert.rejects(c.complete(req), (e: Error) => e instanceof RemoteEndpointError && /127\.0\.0\.1:1\/infill/.test(e.message));
  assert.throws(() => new RemoteCompletionClient({ url: 'ftp://x' }), /only http and https/);
  assert.throws(() => new RemoteCompletionClient({ url: 'not a url' }), /not a URL/);
});

test('a slow endpoint: no answer within the time limit is an error naming the limit', async () => {
  // An HTTP server that takes requests and never answers them: the slow endpoint.
  const pending: http.ServerResponse[] = [];
  const slow = http.createServer((_req, res) => { pending.push(res); });
  await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
  try {
    const port = (slow.address() as { port: number }).port;
    const c = new RemoteCompletionClient({ url: `http://127.0.0.1:${port}`, kind: 'infill', timeoutMs: 300 });
    const t0 = performance.now();
    await assert.rejects(c.complete(req), (e: Error) => e instanceof RemoteEndpointError && e.message === `127.0.0.1:${port}/infill: no answer within 300 ms`);
    assert.ok(performance.now() - t0 < 3000, 'gave up at the limit');
    assert.equal(pending.length, 1, 'the request reached the server');
  } finally {
    for (const r of pending) r.destroy();
    slow.close();
  }
});
