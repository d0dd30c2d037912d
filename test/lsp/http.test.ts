// The HTTP API as a client sees it, against a real `fulcrum serve --http` process on 127.0.0.1:
// the OpenAI-compatible endpoints, authentication and errors; a soak of 16 concurrent streaming
// clients (every stream's text equals that prompt's greedy text alone: nothing lost or
// cross-wired); a cancel storm (90 % of 1,000 requests cancelled mid-stream: no stuck slot, flat
// memory); and 2,000+ malformed, oversized, invalid-UTF-8, slow and half-closed requests that
// never crash the server or disturb a stream running beside them. Loops are bounded in count and
// time. FULCRUM_SOAK_SECONDS sets the soak's length (default 10; the issue's figure is 60).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';

import { Engine } from '../../engine/runtime/engine';
import { sharedPath, skipUnlessShared } from '../helpers/shared';
import { HttpServerProcess } from './http-server';

const MODEL = sharedPath('models', 'stories260K.gguf');
const skip = skipUnlessShared(MODEL);
const PROMPTS = ['Once upon a time', 'The cat', 'Lily and Ben went to the park. They saw a big', 'One day', 'Tom had a red ball', 'The sun was hot and', 'A little bird', 'Sara wanted to'];
const TOKENS = 24;
let server: HttpServerProcess;
let expected: Map<string, string>;

before(async () => {
  if (skip) return;
  const e = await Engine.load(MODEL, { threads: 1, contextLength: 256, device: 'cpu' });
  expected = new Map();
  for (const p of PROMPTS) expected.set(p, (await e.generate(p, { maxTokens: TOKENS, temperature: 0 })).text);
  e.dispose();
  server = await HttpServerProcess.start(MODEL, ['--ctx', '256', '--parallel', '4', '--threads', '1']);
});
after(async () => { await server?.stop(); });

test('endpoints, authentication and errors', { skip }, async () => {
  const h = await (await fetch(`${server.base}/health`)).json() as { status: string };
  assert.equal(h.status, 'ok');
  assert.equal((await fetch(`${server.base}/v1/models`)).status, 401, 'a token is required by default');
  assert.equal((await fetch(`${server.base}/v1/models`, { headers: { authorization: 'Bearer wrong' } })).status, 401);
  const models = await (await fetch(`${server.base}/v1/models`, { headers: server.headers() })).json() as { data: { id: string }[] };
  // The model's name and the file's base name (issue 26 item 10).
  assert.deepEqual(models.data.map((m) => m.id).slice(1), ['stories260K']);
  const res = await fetch(`${server.base}/v1/completions`, { method: 'POST', headers: server.headers(), body: JSON.stringify({ prompt: PROMPTS[0], max_tokens: TOKENS, temperature: 0 }) });
  const body = await res.json() as { choices: { text: string; finish_reason: string }[]; usage: { completion_tokens: number } };
  assert.equal(body.choices[0]!.text, expected.get(PROMPTS[0]!));
  assert.equal(body.usage.completion_tokens, TOKENS);
  const s = await server.stream(PROMPTS[1]!, TOKENS);
  assert.equal(s.text, expected.get(PROMPTS[1]!));
  assert.ok(s.done, 'the stream ends with [DONE]');
  const errors: [unknown, number, RegExp][] = [
    ['{"prompt": "x", "max_tokens": -1}', 400, /'max_tokens' must be in \[0, 4096\]/],
    ['{"prompt": 7}', 400, /'prompt' is required and must be a string/],
    ['{"prompt": "x", "temperature": "hot"}', 400, /'temperature' must be a number/],
    ['{"prompt": "x", "model": "gpt-4"}', 404, /model 'gpt-4' is not served here/],
    ['not json', 400, /not JSON/],
    [`{"prompt": "${'word '.repeat(400)}"}`, 400, /prompt has \d+ tokens but the context holds 256/],
  ];
  for (const [raw, status, re] of errors) {
    const r = await fetch(`${server.base}/v1/completions`, { method: 'POST', headers: server.headers(), body: raw as string });
    assert.equal(r.status, status, String(raw).slice(0, 60));
    assert.match(((await r.json()) as { error: { message: string } }).error.message, re);
  }
  assert.equal((await fetch(`${server.base}/nope`, { headers: server.headers() })).status, 404);
  assert.equal((await fetch(`${server.base}/v1/completions`, { headers: server.headers() })).status, 405);
  const big = await fetch(`${server.base}/v1/completions`, { method: 'POST', headers: server.headers(), body: `{"prompt": "${'a'.repeat(2 << 20)}"}` });
  assert.equal(big.status, 413);
  const metrics = await (await fetch(`${server.base}/metrics`, { headers: server.headers() })).text();
  assert.match(metrics, /fulcrum_generated_tokens_total \d+/);
  assert.match(metrics, /fulcrum_split_info\{split="CPU only"\} 1/);
});

test('16 concurrent streaming clients: every stream equals its prompt alone', { skip }, async () => {
  const seconds = Number(process.env.FULCRUM_SOAK_SECONDS ?? 10);
  const until = Date.now() + seconds * 1000;
  let streams = 0;
  const client = async (k: number): Promise<void> => {
    for (let round = 0; Date.now() < until && round < 10_000; round++) {
      const prompt = PROMPTS[(k + round) % PROMPTS.length]!;
      const s = await server.stream(prompt, TOKENS);
      assert.equal(s.text, expected.get(prompt), `client ${k} round ${round}: '${prompt}' got a different text`);
      assert.ok(s.done);
      streams++;
    }
  };
  await Promise.all(Array.from({ length: 16 }, (_, k) => client(k)));
  console.log(`  soak: ${streams} streams by 16 clients in ${seconds} s, none lost or cross-wired`);
  assert.ok(streams >= 16);
});

test('cancel storm: 1,000 requests, 90 % cancelled mid-stream, no stuck slot, flat memory', { skip }, async () => {
  const rssBefore = server.rssBytes();
  let completed = 0, cancelled = 0;
  for (let batch = 0; batch < 1000 / 50; batch++) {
    await Promise.all(Array.from({ length: 50 }, async (_, i) => {
      const cancel = (batch * 50 + i) % 10 !== 0;
      const s = await server.stream(PROMPTS[i % PROMPTS.length]!, TOKENS, (n) => cancel && n === 2);
      if (cancel) {
        assert.ok(s.cancelled, `request ${batch * 50 + i} ended before it could be cancelled`);
        cancelled++;
      } else {
        assert.equal(s.text, expected.get(PROMPTS[i % PROMPTS.length]!), `request ${batch * 50 + i}`);
        completed++;
      }
    }));
  }
  // Every slot comes back: the server goes idle.
  let h = { running: -1, queued: -1 };
  for (let i = 0; i < 50 && (h.running !== 0 || h.queued !== 0); i++) {
    h = await (await fetch(`${server.base}/health`)).json() as typeof h;
    if (h.running !== 0 || h.queued !== 0) await new Promise((r) => setTimeout(r, 100));
  }
  assert.deepEqual([h.running, h.queued], [0, 0], 'no request holds a slot after the storm');
  const grew = server.rssBytes() - rssBefore;
  console.log(`  cancel storm: ${completed} completed, ${cancelled} cancelled; server RSS ${(rssBefore / 2 ** 20).toFixed(1)} -> ${(server.rssBytes() / 2 ** 20).toFixed(1)} MiB`);
  assert.ok(grew < 64 << 20, `server memory grew by ${(grew / 2 ** 20).toFixed(1)} MiB`);
  // And it still answers correctly.
  assert.equal((await server.stream(PROMPTS[2]!, TOKENS)).text, expected.get(PROMPTS[2]!));
});

function rawRequest(port: number, payload: Buffer | string, opts: { halfClose?: boolean; slowMs?: number } = {}): Promise<string> {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    let out = '';
    sock.on('data', (b) => { out += b.toString('latin1'); });
    sock.on('error', () => resolve(out));
    sock.on('close', () => resolve(out));
    sock.setTimeout(5_000, () => sock.destroy());
    sock.on('connect', async () => {
      const data = Buffer.isBuffer(payload) ? payload : Buffer.from(payload, 'latin1');
      if (opts.slowMs) {
        for (let i = 0; i < data.length; i += 16) { sock.write(data.subarray(i, i + 16)); await new Promise((r) => setTimeout(r, opts.slowMs)); }
      } else sock.write(data);
      if (opts.halfClose) sock.end();
    });
  });
}

test('2,000 fuzzed requests never crash the server or disturb a running stream', { skip }, async () => {
  const port = Number(new URL(server.base).port);
  const auth = `Authorization: Bearer ${server.token}\r\n`;
  const post = (body: Buffer | string, extra = '') => {
    const b = Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8');
    return Buffer.concat([Buffer.from(`POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}Content-Type: application/json\r\nContent-Length: ${b.length}\r\nConnection: close\r\n${extra}\r\n`, 'latin1'), b]);
  };
  // A deterministic generator of bad bodies.
  let seed = 12345;
  const rnd = () => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed / 0x7fffffff; };
  const values = [null, true, -1, 0, 1e308, -1e308, 2 ** 53 + 1, 'x', '', [], {}, [1, 2], { a: 1 }, '\u0000', 'é'.repeat(1000), NaN];
  const keys = ['prompt', 'max_tokens', 'temperature', 'top_p', 'top_k', 'stop', 'stream', 'seed', 'model', 'n', 'min_p', 'repeat_penalty'];
  const bodies: Buffer[] = [];
  for (let i = 0; i < 2000; i++) {
    const kind = i % 10;
    if (kind < 6) {
      const o: Record<string, unknown> = {};
      for (const k of keys) if (rnd() < 0.4) o[k] = values[Math.floor(rnd() * values.length)];
      if (rnd() < 0.5) o.max_tokens = Math.floor(rnd() * 3);  // the valid ones stay short
      bodies.push(post(JSON.stringify(o)));
    } else if (kind === 6) bodies.push(post(JSON.stringify({ prompt: 'x' }).slice(0, Math.floor(rnd() * 12))));  // truncated JSON
    else if (kind === 7) bodies.push(post(Buffer.from([0x7b, 0x22, 0x70, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0xc3, 0x28, 0x22, 0x7d])));  // invalid UTF-8
    else if (kind === 8) bodies.push(Buffer.from(`POST /v1/completions HTTP/1.1\r\nHost: x\r\n${auth}Content-Length: ${Math.floor(rnd() * 1e12)}\r\n\r\n{`, 'latin1'));  // lying length
    else bodies.push(Buffer.from(['GARBAGE\r\n\r\n', 'GET /../../etc/passwd HTTP/1.1\r\n\r\n', `POST /v1/completions HTTP/1.1\r\n${auth}Transfer-Encoding: chunked\r\n\r\nzz\r\n`][i % 3]!, 'latin1'));
  }
  // A stream that must come through untouched while the fuzz runs.
  const beside = server.stream(PROMPTS[0]!, TOKENS);
  const statuses = new Map<string, number>();
  for (let i = 0; i < bodies.length; i += 25) {
    await Promise.all(bodies.slice(i, i + 25).map(async (b) => {
      const out = await rawRequest(port, b, { halfClose: i % 50 === 0 });
      if (out === '') { statuses.set('closed', (statuses.get('closed') ?? 0) + 1); return; }
      const status = /^HTTP\/1\.1 (\d{3})/.exec(out)?.[1] ?? 'none';
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
      assert.ok(!status.startsWith('5'), `a 5xx answer: ${out.slice(0, 300)}`);
    }));
  }
  // 10 MB bodies and slow clients, a few of each.
  const huge = Buffer.alloc(10 << 20, 0x61);
  for (let i = 0; i < 3; i++) {
    // Refused from the declared length: a 413, or the connection closed under the client while it still writes.
    const out = await rawRequest(port, post(huge));
    assert.ok(out === '' || /^HTTP\/1\.1 413/.test(out), out.slice(0, 200));
  }
  const slow = await Promise.all([0, 1, 2].map(() => rawRequest(port, post('{"prompt": "Once", "max_tokens": 2}'), { slowMs: 20 })));
  for (const s of slow) assert.match(s, /^HTTP\/1\.1 200/);
  const b = await beside;
  assert.equal(b.text, expected.get(PROMPTS[0]!), 'the stream beside the fuzz is intact');
  console.log(`  fuzz: ${bodies.length + 6} requests; answers ${[...statuses.entries()].map(([k, v]) => `${k}: ${v}`).join(', ')}`);
  assert.equal(server.child.exitCode, null, 'the server is still running');
  assert.equal((await fetch(`${server.base}/health`)).status, 200);
});

test('/infill: the FIM middle of a model with FIM tokens (equal to the completion runner\'s greedy middle); 501 with the reason without them', { skip }, async () => {
  const r = await fetch(`${server.base}/infill`, { method: 'POST', headers: server.headers(), body: JSON.stringify({ input_prefix: 'def f(', input_suffix: ')\n' }) });
  assert.equal(r.status, 501);
  assert.match(((await r.json()) as { error: { message: string } }).error.message, /no fill-in-the-middle tokens/);
  const fimModel = sharedPath('models', 'tiny-fim-coder.q8_0.gguf');
  if (skipUnlessShared(fimModel)) return;
  const { PromptBuilder } = await import('../../engine/completion/prompt');
  const { runCompletion } = await import('../../engine/completion/runner');
  const cases = [{ prefix: 'def add(a, b):\n    ', suffix: '\n\nprint(add(1, 2))\n' }, { prefix: 'import os\n\nclass Config:\n    def __init__(self', suffix: '' }];
  const e = await Engine.load(fimModel, { threads: 1, contextLength: 512, device: 'cpu' });
  const want: string[] = [];
  for (const c of cases) {
    const p = new PromptBuilder(e.tokenizer).build(c.prefix, c.suffix);
    want.push((await runCompletion(e, p.ids, { maxTokens: 24, stopIds: p.stopIds })).text);
  }
  e.dispose();
  const fim = await HttpServerProcess.start(fimModel, ['--ctx', '512', '--parallel', '2', '--threads', '1', '--no-auth']);
  try {
    for (const [i, c] of cases.entries()) {
      const res = await fetch(`${fim.base}/infill`, { method: 'POST', headers: fim.headers(), body: JSON.stringify({ input_prefix: c.prefix, input_suffix: c.suffix, n_predict: 24 }) });
      assert.equal(res.status, 200);
      const j = await res.json() as { content: string; stop: boolean; tokens_predicted: number };
      assert.equal(j.content, want[i], `case ${i}`);
      assert.ok(j.stop);
    }
    const bad = await fetch(`${fim.base}/infill`, { method: 'POST', headers: fim.headers(), body: JSON.stringify({ input_extra: 'x', input_prefix: 'a' }) });
    assert.equal(bad.status, 400);
  } finally {
    await fim.stop();
  }
});
