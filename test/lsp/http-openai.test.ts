// The HTTP API as OpenAI's own client uses it (the official `openai` npm package) against a real
// `fulcrum serve --http` process, and the HTTP details clients trip over (issue 26 items 4, 5, 6,
// 10; issue 23 item 4): suffix (FIM), echo, logprobs, n, chat completions with the GGUF's own
// chat template, standard finish reasons, a case-insensitive bearer scheme, CORS off by default
// and on by --cors, /metrics counting 4xx as errors and client cancellations as cancelled, the
// file's base name as a model alias, and streams ended by shutdown as an error event.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { closeSync, openSync, readSync } from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';

import { readGguf, type GgufFile } from '../../engine/model/gguf';
import { writeGguf } from '../../engine/model/gguf/writer';
import { GgufValueType } from '../../engine/model/gguf/types';
import { Engine } from '../../engine/runtime/engine';
import { PromptBuilder } from '../../engine/completion/prompt';
import { sharedPath, skipUnlessShared, tempDir } from '../helpers/shared';
import { HttpServerProcess } from './http-server';

const CODER = sharedPath('models', 'tiny-fim-coder.q8_0.gguf');
const skip = skipUnlessShared(CODER);
// A template that writes BOS itself (so the tokenizer must not add a second) and plain-text role headers.
const TEMPLATE = "{{ bos_token }}{% for m in messages %}### {{ m.role }}:\n{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}### assistant:\n{% endif %}";

/** A copy of `src` with `tokenizer.chat_template` set: the same weights, a template to render. */
function withChatTemplate(src: string, dst: string, template: string): void {
  const file: GgufFile = readGguf(src);
  const fd = openSync(src, 'r');
  try {
    writeGguf(dst, {
      version: 3, alignment: file.alignment,
      kv: [...[...file.kv.values()].filter((k) => k.key !== 'general.alignment').map((k) => ({ key: k.key, type: k.type, value: k.value })),
        { key: 'tokenizer.chat_template', type: GgufValueType.STRING, value: template }],
      tensors: file.tensors.map((t) => ({
        name: t.name, dims: t.dims, type: t.type,
        data: () => { const b = Buffer.alloc(t.byteSize); readSync(fd, b, 0, t.byteSize, t.absOffset); return b; },
      })),
    });
  } finally { closeSync(fd); }
}

let dir: { dir: string; cleanup: () => void };
let model: string;
let server: HttpServerProcess;
let client: OpenAI;
let engine: Engine;

before(async () => {
  if (skip) return;
  dir = tempDir();
  model = path.join(dir.dir, 'coder-chat.gguf');
  withChatTemplate(CODER, model, TEMPLATE);
  engine = await Engine.load(model, { threads: 1, contextLength: 512, device: 'cpu' });
  server = await HttpServerProcess.start(model, ['--ctx', '512', '--parallel', '4', '--threads', '1', '--token', 'sekret']);
  client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'sekret', maxRetries: 0, timeout: 60_000 });
});
after(async () => { await server?.stop(); engine?.dispose(); dir?.cleanup(); });

test('completions through the openai client: text, stream, n, echo, logprobs, suffix, the file name as model', { skip }, async () => {
  const prompt = 'def parse_args(argv):\n    ';
  const alone = (await engine.generate(prompt, { maxTokens: 12, temperature: 0 })).text;
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id).includes('coder-chat'), true, 'the file\'s base name is listed');
  const r = await client.completions.create({ model: 'coder-chat', prompt, max_tokens: 12, temperature: 0 });
  assert.equal(r.choices[0]!.text, alone);
  assert.equal(r.choices[0]!.finish_reason, 'length');
  // n: two greedy choices are the same text; echo puts the prompt first.
  const two = await client.completions.create({ model: 'coder-chat', prompt, max_tokens: 12, temperature: 0, n: 2, echo: true });
  assert.deepEqual(two.choices.map((c) => [c.index, c.text]), [[0, prompt + alone], [1, prompt + alone]]);
  assert.equal(two.usage?.completion_tokens, 24);
  // logprobs: the chosen token is the most likely one under greedy decoding, and probabilities are ≤ 1.
  const lp = await client.completions.create({ model: 'coder-chat', prompt, max_tokens: 6, temperature: 0, logprobs: 3 });
  const l = lp.choices[0]!.logprobs!;
  assert.equal(l.tokens!.length, 6);
  assert.equal(l.tokens!.join(''), lp.choices[0]!.text);
  for (let i = 0; i < 6; i++) {
    const top = l.top_logprobs![i]!;
    assert.equal(Object.keys(top).length <= 3 && Object.keys(top).length >= 1, true);
    assert.ok(l.token_logprobs![i]! <= 0 && l.token_logprobs![i]! >= Math.max(...Object.values(top)) - 1e-6, `token ${i} is the argmax`);
  }
  // Streaming: the pieces add up to the same text, ending with a standard finish_reason.
  const stream = await client.completions.create({ model: 'coder-chat', prompt, max_tokens: 12, temperature: 0, stream: true });
  let text = '', finish: string | null = null;
  for await (const c of stream) { text += c.choices[0]?.text ?? ''; finish = c.choices[0]?.finish_reason ?? finish; }
  assert.equal(text, alone);
  assert.equal(finish, 'length');
  // suffix: the same fill-in-the-middle prompt the editor's completions build.
  const fim = new PromptBuilder(engine.tokenizer).build('def add(a, b):\n    return ', '\n\nprint(add(1, 2))\n', []);
  const middle = await engine.scheduler().submit({ prompt: fim.ids, maxTokens: 8, temperature: 0, stopIds: fim.stopIds }).result;
  const s = await client.completions.create({ model: 'coder-chat', prompt: 'def add(a, b):\n    return ', suffix: '\n\nprint(add(1, 2))\n', max_tokens: 8, temperature: 0 });
  assert.equal(s.choices[0]!.text, middle.text);
  await assert.rejects(client.completions.create({ model: 'coder-chat', prompt: 'x', suffix: 'y', echo: true, max_tokens: 1 }), /'echo' and 'suffix' cannot be combined/);
});

test('chat completions render the GGUF\'s own template (BOS once), streaming and not', { skip }, async () => {
  const messages = [{ role: 'system' as const, content: 'You write Python.' }, { role: 'user' as const, content: 'A function that adds two numbers.' }];
  const rendered = `<｜begin▁of▁sentence｜>### system:\nYou write Python.\n### user:\nA function that adds two numbers.\n### assistant:\n`;
  const ids = engine.tokenizer.encode(rendered, { addBos: false, parseSpecial: true });
  assert.equal(ids.filter((i) => i === engine.tokenizer.bos).length, 1, 'the template wrote BOS as one special token');
  const alone = await engine.scheduler().submit({ prompt: ids, maxTokens: 16, temperature: 0 }).result;
  const r = await client.chat.completions.create({ model: 'coder-chat', messages, max_tokens: 16, temperature: 0 });
  assert.equal(r.usage?.prompt_tokens, ids.length, 'the prompt is the rendered template, BOS not doubled');
  assert.equal(r.choices[0]!.message.content, alone.text);
  assert.equal(r.choices[0]!.message.role, 'assistant');
  assert.ok(['stop', 'length'].includes(r.choices[0]!.finish_reason));
  const stream = await client.chat.completions.create({ model: 'coder-chat', messages, max_tokens: 16, temperature: 0, stream: true, stream_options: { include_usage: true } });
  let text = '', finish: string | null = null, usage = 0;
  for await (const c of stream) {
    text += c.choices[0]?.delta.content ?? '';
    finish = c.choices[0]?.finish_reason ?? finish;
    if (c.usage) usage = c.usage.completion_tokens;
  }
  assert.equal(text, alone.text);
  assert.equal(finish, r.choices[0]!.finish_reason);
  assert.equal(usage, alone.generatedTokens);
  await assert.rejects(client.chat.completions.create({ model: 'coder-chat', messages: [], max_tokens: 1 }), /'messages' is required/);
  await assert.rejects(client.chat.completions.create({ model: 'coder-chat', messages, tools: [{ type: 'function', function: { name: 'f' } }] }), /'tools' is not supported/);
});

test('bearer scheme in any case; OPTIONS answered without a token; CORS only with --cors', { skip }, async () => {
  for (const scheme of ['bearer', 'BEARER', 'Bearer']) {
    assert.equal((await fetch(`${server.base}/v1/models`, { headers: { authorization: `${scheme} sekret` } })).status, 200, scheme);
  }
  assert.equal((await fetch(`${server.base}/v1/models`, { headers: { authorization: 'bearer wrong' } })).status, 401);
  const pre = await fetch(`${server.base}/v1/completions`, { method: 'OPTIONS', headers: { origin: 'http://localhost:3000', 'access-control-request-method': 'POST' } });
  assert.equal(pre.status, 204);
  assert.equal(pre.headers.get('access-control-allow-origin'), null, 'CORS is off by default');
  const corsServer = await HttpServerProcess.start(model, ['--ctx', '256', '--threads', '1', '--token', 'sekret', '--cors', 'http://localhost:3000']);
  try {
    const ok = await fetch(`${corsServer.base}/v1/completions`, { method: 'OPTIONS', headers: { origin: 'http://localhost:3000', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' } });
    assert.equal(ok.status, 204);
    assert.equal(ok.headers.get('access-control-allow-origin'), 'http://localhost:3000');
    assert.match(ok.headers.get('access-control-allow-headers') ?? '', /authorization/);
    const other = await fetch(`${corsServer.base}/v1/models`, { headers: { origin: 'http://evil.example', authorization: 'Bearer sekret' } });
    assert.equal(other.headers.get('access-control-allow-origin'), null, 'an origin not listed gets no CORS header');
  } finally { await corsServer.stop(); }
});

test('/metrics counts 4xx answers as errors and clients that leave as cancelled', { skip }, async () => {
  const count = async (outcome: string) => {
    const text = await (await fetch(`${server.base}/metrics`, { headers: { authorization: 'Bearer sekret' } })).text();
    return Number(new RegExp(`fulcrum_http_requests_total\\{outcome="${outcome}"\\} (\\d+)`).exec(text)?.[1]);
  };
  const [err0, can0] = [await count('error'), await count('cancelled')];
  for (let i = 0; i < 5; i++) {
    const r = await fetch(`${server.base}/v1/completions`, { method: 'POST', headers: { authorization: 'Bearer sekret', 'content-type': 'application/json' }, body: '{"prompt": 7}' });
    assert.equal(r.status, 400);
  }
  assert.equal((await fetch(`${server.base}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"prompt": "x"}' })).status, 401);
  // A client that leaves mid-stream.
  const ac = new AbortController();
  const res = await fetch(`${server.base}/v1/completions`, { method: 'POST', headers: { authorization: 'Bearer sekret', 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'import os\n', max_tokens: 400, stream: true }), signal: ac.signal });
  const reader = res.body!.getReader();
  await reader.read();
  ac.abort();
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(await count('error'), err0 + 6);
  assert.equal(await count('cancelled'), can0 + 1);
});

test('a stream cut by server shutdown ends with an error event the openai client raises, not a made-up finish_reason', { skip }, async () => {
  const own = await HttpServerProcess.start(model, ['--ctx', '512', '--threads', '1', '--token', 'sekret']);
  const c = new OpenAI({ baseURL: `${own.base}/v1`, apiKey: 'sekret', maxRetries: 0, timeout: 60_000 });
  const stream = await c.completions.create({ model: 'coder-chat', prompt: 'import os\n', max_tokens: 480, temperature: 0, stream: true });
  const finishes: (string | null)[] = [];
  let pieces = 0;
  await assert.rejects((async () => {
    for await (const ch of stream) {
      finishes.push(ch.choices[0]?.finish_reason ?? null);
      if (++pieces === 2) void own.stop();
    }
  })(), /stopped before this completion ended/);
  assert.ok(finishes.every((f) => f === null || f === 'stop' || f === 'length'), `finish reasons: ${finishes.join(',')}`);
});
