// The editor's engine and the HTTP API in one process, through one door (the runtime's
// scheduler): the LSP server loads the model, fulcrum/startHttp serves it on 127.0.0.1, and for
// FULCRUM_SOAK_SECONDS (default 60, the figure) 16 HTTP clients stream completions while
// an LSP client keeps asking for inline completions in four documents. Every HTTP stream equals
// its prompt's greedy text alone, and every inline completion equals the one the same document
// got before the load started: nothing lost or cross-wired between the two surfaces. Then the
// server moves with the model: fulcrum/stopHttp ends it and a second start serves again.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Engine } from '../../engine/runtime/engine';
import type { HttpServerInfo } from '../../engine/server/protocol';
import { sharedPath, skipUnlessShared } from '../helpers/shared';
import { HttpApiClient } from './http-server';
import { LspSession } from './lsp-session';

const MODEL = sharedPath('models', 'stories260K.gguf');
const PROMPTS = ['Once upon a time', 'The cat', 'Lily and Ben went to the park. They saw a big', 'One day', 'Tom had a red ball', 'The sun was hot and', 'A little bird', 'Sara wanted to'];
const DOCS = ['Once upon a time, there was a little dog named Max. Max liked to', 'Lily went to the store with her mom. She wanted to buy', 'The big tree in the garden was', 'Tim and Sam played with a ball. The ball'];
const TOKENS = 24;

test('HTTP clients and editor completions share one engine process: none lost or cross-wired', { skip: skipUnlessShared(MODEL), timeout: 600_000 }, async () => {
  const e = await Engine.load(MODEL, { threads: 1, contextLength: 512, device: 'cpu' });
  const expected = new Map<string, string>();
  for (const p of PROMPTS) expected.set(p, (await e.generate(p, { maxTokens: TOKENS, temperature: 0 })).text);
  e.dispose();

  const lsp = LspSession.start();
  try {
    await lsp.initialize({ modelPath: MODEL, threads: 1, completionCache: false, device: 'cpu' });
    await lsp.waitFor(() => lsp.states.some((s) => s.state === 'ready'), 'the model to load');
    const uri = (k: number) => `file:///doc-${k}.txt`;
    DOCS.forEach((text, k) => lsp.openDocument(uri(k), text));
    const complete = async (k: number) => {
      const r = await lsp.inlineCompletion(uri(k), 0, DOCS[k]!.length);
      return r.items.map((i) => (typeof i.insertText === 'string' ? i.insertText : i.insertText.value)).join('\u0000');
    };
    // Each document's completion with the engine otherwise idle: the reference.
    const reference: string[] = [];
    for (let k = 0; k < DOCS.length; k++) reference.push(await complete(k));
    assert.ok(reference.some((r) => r.length > 0), 'the references are completions');

    const info = await lsp.request<HttpServerInfo>('fulcrum/startHttp', { port: 0 });
    assert.match(info.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.ok(info.token && info.token.length >= 16, 'a bearer token is required by default');
    assert.equal((await fetch(`${info.url}/v1/models`)).status, 401);
    const http = new HttpApiClient(info.url, info.token ?? undefined);
    assert.deepEqual(await lsp.request<HttpServerInfo>('fulcrum/startHttp', { port: 0 }), info, 'a second start returns the running server');

    const seconds = Number(process.env.FULCRUM_SOAK_SECONDS ?? 60);
    const until = Date.now() + seconds * 1000;
    let streams = 0, completions = 0;
    const httpClient = async (k: number): Promise<void> => {
      for (let round = 0; Date.now() < until && round < 100_000; round++) {
        const prompt = PROMPTS[(k + round) % PROMPTS.length]!;
        const s = await http.stream(prompt, TOKENS);
        assert.equal(s.text, expected.get(prompt), `HTTP client ${k} round ${round}: '${prompt}' got a different text`);
        assert.ok(s.done);
        streams++;
      }
    };
    const editor = async (): Promise<void> => {
      for (let round = 0; Date.now() < until && round < 100_000; round++) {
        const k = round % DOCS.length;
        assert.equal(await complete(k), reference[k], `inline completion ${round} in document ${k} differs from its reference`);
        completions++;
      }
    };
    await Promise.all([...Array.from({ length: 16 }, (_, k) => httpClient(k)), editor()]);
    console.log(`  ${seconds} s: ${streams} HTTP streams by 16 clients and ${completions} inline completions in one engine process, none lost or cross-wired`);
    assert.ok(streams >= 16 && completions >= DOCS.length);

    await lsp.request('fulcrum/stopHttp');
    await assert.rejects(fetch(`${info.url}/health`), 'stopped');
    const again = await lsp.request<HttpServerInfo>('fulcrum/startHttp', { port: 0, token: null });
    assert.equal(again.token, null);
    const h = await (await fetch(`${again.url}/v1/models`)).json() as { data: { id: string }[] };
    // The model's name and the file's base name (issue 26 item 10), served without a token.
    assert.equal(h.data.length, 2, 'no authentication when the token is null');
    assert.ok(lsp.alive);
  } finally {
    await lsp.stop();
  }
});
