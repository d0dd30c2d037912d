// Inline completions through the server on the real FIM model (tiny-fim-coder): the prompt is the
// model's FIM format around the cursor, the ghost text is the greedy middle cut by the rules,
// keystrokes reuse the KV cache, typing through a suggestion is served from the cache, the log
// names the FIM format; and a failed load keeps the model that was loaded.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { PromptBuilder } from '../../engine/completion/prompt';
import { fitContext } from '../../engine/completion/budget';
import { applyRules, cursorContext } from '../../engine/completion/rules';
import { runCompletion } from '../../engine/completion/runner';
import { Engine } from '../../engine/runtime/engine';
import type { CompletionExtendedParams, ModelInfo } from '../../engine/server/protocol';
import { sharedPath, skipUnlessShared, tempDir } from '../helpers/shared';
import { LspSession, rejection } from './lsp-session';

const MODEL = sharedPath('models', 'tiny-fim-coder.q8_0.gguf');
const URI = 'file:///work/queue.py';
const DOC = 'class Queue:\n    def __init__(self):\n        self.items = []\n\n    def put(self, item):\n        \n\n    def get(self):\n        return self.items.pop(0)\n';
const CURSOR_LINE = 5;
const CURSOR_CHAR = 8;

/** The ghost text of the first item ('' when there is none); the server sends plain strings. */
function shownText(list: { items: Array<{ insertText: unknown }> }): string {
  const text = list.items[0]?.insertText ?? '';
  assert.equal(typeof text, 'string');
  return text as string;
}

/** The completion the server should show, computed with the same parts in-process. */
async function expectedCompletion(before: string, after: string): Promise<string> {
  const engine = await Engine.load(MODEL, { threads: 1 });
  try {
    const builder = new PromptBuilder(engine.tokenizer);
    const fitted = fitContext(before, after, 1024, builder.overheadTokens, (t) => builder.encodePart(t, true).length);
    const prompt = builder.build(fitted.prefix, fitted.suffix);
    const result = await runCompletion(engine, prompt.ids, { maxTokens: 64, stopIds: prompt.stopIds });
    return applyRules(result.text, cursorContext(before, after));
  } finally {
    engine.dispose();
  }
}

describe('LSP inline completion with fill-in-the-middle', { skip: skipUnlessShared(MODEL) }, () => {
  let lsp: LspSession;
  const scratch = tempDir('fulcrum-lsp-fim-');
  const cursor = DOC.split('\n').slice(0, CURSOR_LINE).join('\n').length + 1 + CURSOR_CHAR;

  before(async () => {
    lsp = LspSession.start();
    await lsp.initialize({ modelPath: MODEL, threads: 1, completionTimeLimitMs: 0 });
    await lsp.waitFor(() => lsp.states.some((s) => s.state === 'ready'), 'state ready');
    lsp.openDocument(URI, DOC, 'python');
  });
  after(async () => {
    await lsp.stop();
    scratch.cleanup();
  });

  test('the ghost text is the greedy FIM middle, cut by the rules; the log names the format', async () => {
    const expected = await expectedCompletion(DOC.slice(0, cursor), DOC.slice(cursor));
    const list = await lsp.inlineCompletion(URI, CURSOR_LINE, CURSOR_CHAR);
    const shown = shownText(list);
    assert.equal(shown, expected);
    const stats = lsp.stats.at(-1)!;
    assert.equal(stats.format, 'deepseek-coder');
    assert.ok(stats.promptTokens > 40, JSON.stringify(stats));
    assert.ok(lsp.logs.some((l) => l.includes('fill-in-the-middle format deepseek-coder')), lsp.logs.join('\n'));
  });

  test('a keystroke reuses the KV cache of the shared prompt prefix', async () => {
    void lsp.connection.sendNotification('textDocument/didChange', {
      textDocument: { uri: URI, version: 2 },
      contentChanges: [{ range: { start: { line: CURSOR_LINE, character: CURSOR_CHAR }, end: { line: CURSOR_LINE, character: CURSOR_CHAR } }, text: 'x' }],
    });
    await lsp.inlineCompletion(URI, CURSOR_LINE, CURSOR_CHAR + 1);
    const stats = lsp.stats.at(-1)!;
    assert.notEqual(stats.stopReason, 'cached');
    // Everything before the cursor except the last token or so was in the KV cache already.
    assert.ok((stats.reusedTokens ?? 0) >= 30, JSON.stringify(stats));
    assert.ok((stats.reusedTokens ?? 0) < stats.promptTokens);
  });

  test('typing the start of a shown suggestion keeps the rest without running the model', async () => {
    // Back to the original text: the first suggestion is in the cache.
    void lsp.connection.sendNotification('textDocument/didChange', {
      textDocument: { uri: URI, version: 3 },
      contentChanges: [{ range: { start: { line: CURSOR_LINE, character: CURSOR_CHAR }, end: { line: CURSOR_LINE, character: CURSOR_CHAR + 1 } }, text: '' }],
    });
    const first = shownText(await lsp.inlineCompletion(URI, CURSOR_LINE, CURSOR_CHAR));
    assert.equal(lsp.stats.at(-1)!.stopReason, 'cached');
    const typed = first.slice(0, 2);
    assert.equal(typed.includes('\n'), false, 'the suggestion starts on the cursor line');
    void lsp.connection.sendNotification('textDocument/didChange', {
      textDocument: { uri: URI, version: 4 },
      contentChanges: [{ range: { start: { line: CURSOR_LINE, character: CURSOR_CHAR }, end: { line: CURSOR_LINE, character: CURSOR_CHAR } }, text: typed }],
    });
    const rest = await lsp.inlineCompletion(URI, CURSOR_LINE, CURSOR_CHAR + typed.length);
    assert.equal(lsp.stats.at(-1)!.stopReason, 'cached');
    assert.equal(shownText(rest), first.slice(typed.length));
  });

  test('show what we have: a completion still decoding at the deadline shows its text so far, and the full text follows from the cache', async () => {
    const expected = await expectedCompletion(DOC.slice(0, cursor), DOC.slice(cursor));
    assert.ok(expected.length > 4, `a completion of several tokens is compared: ${JSON.stringify(expected)}`);
    const uri = 'file:///work/queue-partial.py';
    lsp.openDocument(uri, DOC, 'python');
    const extended: CompletionExtendedParams[] = [];
    lsp.connection.onNotification('fulcrum/completionExtended', (p: CompletionExtendedParams) => { extended.push(p); });
    // A 1 ms deadline: the first token that gives text to show answers the request.
    void lsp.connection.sendNotification('fulcrum/completionOptions', { showPartialAfterMs: 1, completionCache: true });
    const partial = shownText(await lsp.inlineCompletion(uri, CURSOR_LINE, CURSOR_CHAR));
    assert.ok(partial.length > 0 && partial.length < expected.length, `partial ${JSON.stringify(partial)} of ${JSON.stringify(expected)}`);
    assert.ok(expected.startsWith(partial), `partial ${JSON.stringify(partial)} begins ${JSON.stringify(expected)}`);
    await lsp.waitFor(() => extended.length > 0, 'fulcrum/completionExtended');
    assert.deepEqual(extended[0], { textDocument: { uri, version: 1 }, position: { line: CURSOR_LINE, character: CURSOR_CHAR }, length: expected.length, partialLength: partial.length });
    assert.equal(lsp.stats.at(-1)!.stopReason === 'partial', false, 'stats are sent for the full completion only');
    const full = shownText(await lsp.inlineCompletion(uri, CURSOR_LINE, CURSOR_CHAR));
    assert.equal(lsp.stats.at(-1)!.stopReason, 'cached');
    assert.equal(full, expected);
    assert.ok(lsp.logs.some((l) => /completion: partial after \d+ ms/.test(l)), 'the log says a partial text was shown');
    void lsp.connection.sendNotification('fulcrum/completionOptions', { showPartialAfterMs: 0 });
  });

  test('maxPromptMs: a cold prompt over it is cut, the whole prompt is read in the background, and the next completion uses it', async () => {
    const big = Array.from({ length: 120 }, (_, i) => `def handler_${i}(request):\n    return request.get("key_${i}", ${i})\n`).join('\n');
    const line = big.split('\n').length - 1;
    // A completion with no limit measures the prompt speed (its whole prompt is evaluated).
    void lsp.connection.sendNotification('fulcrum/completionOptions', { completionCache: false, maxPromptMs: 0 });
    // (Text unlike big.py's: runs of its tokens would otherwise be reused, moved, by big.py's prompt.)
    const unlike = Array.from({ length: 60 }, (_, i) => `class Worker${i}:\n    size = ${i * 3}\n`).join('\n');
    lsp.openDocument('file:///work/measure.py', unlike, 'python');
    await lsp.inlineCompletion('file:///work/measure.py', unlike.split('\n').length - 1, 0);
    // 1 ms: any cold prompt is over it, so the cut is the smallest budget.
    void lsp.connection.sendNotification('fulcrum/completionOptions', { maxPromptMs: 1 });
    const uri = 'file:///work/big.py';
    lsp.openDocument(uri, big, 'python');
    await lsp.inlineCompletion(uri, line, 0);
    const cutStats = lsp.stats.at(-1)!;
    assert.ok(cutStats.promptTokens <= 64, `the cut prompt has ${cutStats.promptTokens} tokens`);
    assert.ok(cutStats.wholePromptTokens !== undefined && cutStats.wholePromptTokens > cutStats.promptTokens, 'fulcrum/stats names the whole prompt');
    const cutLog = lsp.logs.find((l) => /completion: prompt cut to 64 of \d+ tokens/.test(l));
    assert.ok(cutLog, 'the log says the prompt was cut');
    const whole = Number(/of (\d+) tokens/.exec(cutLog)![1]);
    await lsp.waitFor(() => lsp.logs.some((l) => l.includes('the whole prompt is read (')), 'the background read of the whole prompt');
    await lsp.inlineCompletion(uri, line, 0);
    const next = lsp.stats.at(-1)!;
    assert.equal(next.promptTokens, whole, 'the next completion uses the whole prompt');
    assert.equal(next.reusedTokens, whole - 1, 'read in the background: only the last token is evaluated');
    assert.equal(next.wholePromptTokens, undefined, 'not cut');
    assert.equal(cutStats.wholePromptTokens, whole);
    void lsp.connection.sendNotification('fulcrum/completionOptions', { completionCache: true, maxPromptMs: 0 });
  });

  test('fulcrum/completionOptions changes the settings of the next completion; bad values are logged', async () => {
    void lsp.connection.sendNotification('fulcrum/completionOptions', { maxCompletionTokens: 2, completionCache: false, promptBudget: 128 });
    void lsp.connection.sendNotification('fulcrum/completionOptions', { maxCompletionTokens: -5 });
    await lsp.inlineCompletion(URI, 1, 4);
    const stats = lsp.stats.at(-1)!;
    assert.ok(stats.generatedTokens <= 2, JSON.stringify(stats));
    assert.ok(stats.promptTokens <= 128, JSON.stringify(stats));
    await lsp.waitFor(() => lsp.logs.some((l) => l.includes('maxCompletionTokens')), 'the bad value logged');
    void lsp.connection.sendNotification('fulcrum/completionOptions', { maxCompletionTokens: 64, completionCache: true, promptBudget: 1024 });
  });

  test('with extraContext, a completion in another file has the first file\'s chunk in its prompt', async () => {
    const other = 'file:///work/other.py';
    lsp.openDocument(other, 'import os\n\ndef main():\n    \n', 'python');
    void lsp.connection.sendNotification('fulcrum/completionOptions', { completionCache: false, extraContext: false });
    await lsp.inlineCompletion(other, 3, 4);
    const without = lsp.stats.at(-1)!.promptTokens;
    void lsp.connection.sendNotification('fulcrum/completionOptions', { extraContext: true });
    await lsp.inlineCompletion(other, 3, 4);
    const withExtra = lsp.stats.at(-1)!.promptTokens;
    // queue.py (a few dozen tokens) was where completions ran before.
    assert.ok(withExtra > without + 30, `${withExtra} prompt tokens with extra context, ${without} without`);
    void lsp.connection.sendNotification('fulcrum/completionOptions', { completionCache: true, extraContext: false });
  });

  test('loading a file that is not a model keeps the loaded model and says why in plain words', async () => {
    const bad = path.join(scratch.dir, 'notes.gguf');
    writeFileSync(bad, 'these are notes, not a model');
    const err = await rejection(lsp.request('fulcrum/loadModel', { path: bad }));
    assert.match(err.message, /^cannot load .*notes\.gguf: /);
    assert.doesNotMatch(err.message, /fulcrum\//);
    const info = await lsp.request<ModelInfo>('fulcrum/modelInfo');
    assert.equal(info.state, 'ready');
    assert.equal(info.summary?.path, MODEL);
    const list = await lsp.inlineCompletion(URI, CURSOR_LINE, CURSOR_CHAR + 2);
    assert.ok(Array.isArray(list.items), 'completions still work');
  });
});
