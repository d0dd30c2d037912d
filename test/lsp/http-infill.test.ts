// llama-server's /infill as llama.vscode and llama.vim send it (issue 23 item 3), replayed against
// a real `fulcrum serve --http` process on the trained tiny-fim-coder. The request shapes are the
// ones their sources build: llama.vscode src/llama-server.ts createRequestPayload (a completion,
// and the n_predict 0 warm-up its extra-context ring sends), llama.vim autoload/llama.vim (its
// FIM request with response_fields, and its ring update with response_fields [""]).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Engine } from '../../engine/runtime/engine';
import { PromptBuilder } from '../../engine/completion/prompt';
import { indentCut, projectFields } from '../../engine/server/http/infill';
import { sharedPath, skipUnlessShared } from '../helpers/shared';
import { HttpServerProcess } from './http-server';

const MODEL = sharedPath('models', 'tiny-fim-coder.q8_0.gguf');
const skip = skipUnlessShared(MODEL);

function pythonFile(tag: string, n: number): string {
  const lines = ['import os', 'import sys', ''];
  for (let i = 0; i < n; i++) lines.push(`def ${tag}_${i}(path, mode=${i % 3}):`, `    """Open ${tag} file ${i}."""`, `    with open(path) as f:`, `        return f.read() * ${i}`, '');
  return lines.join('\n');
}

let server: HttpServerProcess;
let reuseServer: HttpServerProcess;
let engine: Engine;

before(async () => {
  if (skip) return;
  engine = await Engine.load(MODEL, { threads: 1, contextLength: 512, maxSequences: 1, device: 'cpu' });
  server = await HttpServerProcess.start(MODEL, ['--ctx', '512', '--parallel', '4', '--threads', '1', '--no-auth']);
  reuseServer = await HttpServerProcess.start(MODEL, ['--ctx', '512', '--parallel', '2', '--threads', '1', '--no-auth', '--cache-reuse']);
});
after(async () => { await server?.stop(); await reuseServer?.stop(); engine?.dispose(); });

async function infill(base: string, body: Record<string, unknown>): Promise<{ status: number; json: Record<string, unknown> }> {
  const r = await fetch(`${base}/infill`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(60_000) });
  return { status: r.status, json: await r.json() as Record<string, unknown> };
}

test('llama.vscode\'s completion and its extra-context warm-up', { skip }, async () => {
  // A ring chunk as llama.vscode cuts them (ring_chunk_size 64 lines; here 24).
  const chunks = [{ text: pythonFile('helper', 5), time: 1732500000, filename: 'util.py' }];
  // createRequestPayload(noPredict = true): the ring's warm-up, empty prefix and suffix.
  const warm = await infill(server.base, { input_prefix: '', input_suffix: '', input_extra: chunks, prompt: '', n_predict: 0, samplers: [], cache_prompt: true, t_max_prompt_ms: 500, t_max_predict_ms: 1 });
  assert.equal(warm.status, 200, JSON.stringify(warm.json));
  assert.equal(warm.json.content, '');
  // createRequestPayload(noPredict = false) with its defaultRequestParams.
  const body = {
    input_prefix: 'import os\n\ndef read(path):\n', input_suffix: '\n\nprint(read("a"))\n', input_extra: chunks, prompt: '    ',
    n_predict: 24, top_k: 40, top_p: 0.99, stream: false, samplers: ['top_k', 'top_p', 'infill'], cache_prompt: true, n_indent: 4, t_max_prompt_ms: 500, t_max_predict_ms: 1000,
  };
  const r = await infill(server.base, body);
  assert.equal(r.status, 200, JSON.stringify(r.json));
  // The same prompt built by hand: extra chunks, prefix, suffix, then the typed part of the line after the middle token.
  const b = new PromptBuilder(engine.tokenizer);
  const fim = b.fim!;
  const ids = b.buildTokens(b.encodePart(body.input_prefix, fim.prefixSpace), b.encodePart(body.input_suffix, fim.suffixSpace), b.encodeExtra([{ name: 'util.py', text: chunks[0]!.text }]), b.encodePart('    ', false)).ids;
  const alone = await engine.scheduler().submit({ prompt: ids, maxTokens: 24, temperature: 0, stopIds: fim.stopIds, onlyStopIds: true, shouldStop: (t) => indentCut(t, 4) !== undefined }).result;
  const cut = indentCut(alone.text, 4);
  assert.equal(r.json.content, cut === undefined ? alone.text : alone.text.slice(0, cut));
  const timings = r.json.timings as Record<string, number>;
  assert.equal(typeof r.json.tokens_cached, 'number');
  assert.ok((r.json.tokens_cached as number) > 0, 'the warm-up left the extra context in the cache');
  assert.equal(timings.prompt_n, ids.length - (r.json.tokens_cached as number), 'prompt_n counts the evaluated tokens');
  assert.equal(r.json.truncated, false);
});

test('llama.vim\'s FIM request with response_fields, and its ring update with [""]', { skip }, async () => {
  const fields = ['content', 'timings/prompt_n', 'timings/prompt_ms', 'timings/prompt_per_token_ms', 'timings/prompt_per_second', 'timings/predicted_n', 'timings/predicted_ms', 'timings/predicted_per_token_ms', 'timings/predicted_per_second', 'truncated', 'tokens_cached'];
  const r = await infill(server.base, {
    id_slot: 0, input_prefix: 'class Store:\n    def get(self, key):\n', input_suffix: '\n', input_extra: [{ text: 'x = 1\n', time: 0, filename: 'a.py' }], prompt: '        return ',
    n_predict: 16, stop: [], n_indent: 8, top_k: 40, top_p: 0.90, samplers: ['top_k', 'top_p', 'infill'], stream: false, cache_prompt: true, t_max_prompt_ms: 500, t_max_predict_ms: 1000, response_fields: fields,
  });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  assert.deepEqual(Object.keys(r.json).sort(), [...fields].sort(), 'flattened keys, as llama.vim reads them');
  assert.equal(typeof r.json['timings/prompt_n'], 'number');
  const ring = await infill(server.base, {
    id_slot: 0, input_prefix: '', input_suffix: '', input_extra: [{ text: 'y = 2\n', time: 0, filename: 'b.py' }], prompt: '', n_predict: 0, temperature: 0.0, samplers: [], stream: false, cache_prompt: true, t_max_prompt_ms: 1, t_max_predict_ms: 1, response_fields: [''],
  });
  assert.equal(ring.status, 200);
  assert.deepEqual(ring.json, {});
  assert.deepEqual(projectFields({ a: { b: 1 } }, ['a/b', 'a/c', '']), { 'a/b': 1 });
});

test('a request larger than the context is cut the way llama-server cuts it, never refused', { skip }, async () => {
  const big = pythonFile('big', 600);
  const r = await infill(server.base, { input_prefix: big, input_suffix: big, input_extra: [{ filename: 'x.py', text: big }], n_predict: 8 });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  assert.equal(r.json.truncated, true);
  const t = r.json.timings as Record<string, number>;
  assert.ok(t.prompt_n! + (r.json.tokens_cached as number) <= 512, 'the prompt fits the context');
  // The text near the cursor is kept: the end of the prefix and the start of the suffix.
  const small = await infill(server.base, { input_prefix: big.slice(-300), input_suffix: big.slice(0, 80), n_predict: 8 });
  assert.equal(small.json.truncated, false);
  assert.equal(indentCut('x = 1\n        y = 2\n    z = 3\n', 8), 'x = 1\n        y = 2'.length);
  assert.equal(indentCut('x\n\n        y', 8), undefined, 'blank lines do not end the middle');
});

test('A → B → A over /infill reuses A\'s cache; a keystroke with --cache-reuse evaluates a few tokens', { skip }, async () => {
  const a = pythonFile('alpha', 60), b = pythonFile('beta', 60);
  const at = (s: string) => s.indexOf('\n', s.length / 2) + 1;
  const reqA = { input_prefix: a.slice(0, at(a)), input_suffix: a.slice(at(a)), n_predict: 4 };
  const reqB = { input_prefix: b.slice(0, at(b)), input_suffix: b.slice(at(b)), n_predict: 4 };
  await infill(server.base, reqA);
  await infill(server.base, reqB);
  const back = await infill(server.base, reqA);
  const t = back.json.timings as Record<string, number>;
  const total = t.prompt_n! + (back.json.tokens_cached as number);
  console.log(`  A → B → A: tokens_cached ${back.json.tokens_cached} of ${total}`);
  assert.ok((back.json.tokens_cached as number) >= 0.95 * total);
  await infill(reuseServer.base, reqA);
  const typed = await infill(reuseServer.base, { ...reqA, input_prefix: `${reqA.input_prefix}    x` });
  const tt = typed.json.timings as Record<string, number>;
  console.log(`  keystroke with --cache-reuse: evaluated ${tt.prompt_n}, cached ${typed.json.tokens_cached}`);
  assert.ok(tt.prompt_n! <= 8, `evaluated ${tt.prompt_n}`);
});
