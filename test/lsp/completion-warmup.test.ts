// fulcrum/warmCompletion through the server (issue 23 item 2): the editor says a document got
// focus with the cursor somewhere; the engine evaluates the prompt a completion there would have,
// so the first inline completion evaluates one prompt token instead of all of them, and shows the
// same ghost text as a cold completion. A real LSP client process, tiny-fim-coder.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { fitContext, DEFAULT_PROMPT_BUDGET } from '../../engine/completion/budget';
import { DEFAULT_MAX_TOKENS } from '../../engine/completion/completer';
import { PromptBuilder } from '../../engine/completion/prompt';
import { applyRules, cursorContext } from '../../engine/completion/rules';
import { runCompletion } from '../../engine/completion/runner';
import { Engine } from '../../engine/runtime/engine';
import { sharedPath, skipUnlessShared } from '../helpers/shared';
import { LspSession } from './lsp-session';

const MODEL = sharedPath('models', 'tiny-fim-coder.q8_0.gguf');

function pythonFile(tag: string, n: number): string {
  const lines = ['import os', ''];
  for (let i = 0; i < n; i++) lines.push(`def ${tag}_${i}(request, retries=${i % 7}):`, `    value = request.get("${tag}_${i}", ${i})`, `    return value * ${i + 1} + retries`, '');
  return lines.join('\n');
}

const A = { uri: 'file:///work/a.py', text: pythonFile('alpha', 120) };
const B = { uri: 'file:///work/b.py', text: pythonFile('beta', 120) };
/** Line 241 is the blank line after beta_59; the cursor at its start. */
const LINE = 240;

/** The ghost text a cold completion shows, computed in-process with the server's defaults (exact prompt). */
async function coldCompletion(before: string, after: string): Promise<string> {
  const engine = await Engine.load(MODEL, { threads: 1 });
  try {
    const builder = new PromptBuilder(engine.tokenizer);
    // The Completer's budget: the prompt and the tokens it may add fit the context.
    const budget = Math.min(DEFAULT_PROMPT_BUDGET, engine.contextLength - DEFAULT_MAX_TOKENS - 1);
    const fitted = fitContext(before, after, budget, builder.overheadTokens, (t) => builder.encodePart(t, true).length);
    const prompt = builder.build(fitted.prefix, fitted.suffix);
    const result = await runCompletion(engine, prompt.ids, { maxTokens: DEFAULT_MAX_TOKENS, stopIds: prompt.stopIds });
    return applyRules(result.text, cursorContext(before, after));
  } finally {
    engine.dispose();
  }
}

describe('LSP cache warm-up on focus', { skip: skipUnlessShared(MODEL) }, () => {
  let lsp: LspSession;

  before(async () => {
    lsp = LspSession.start();
    await lsp.initialize({ modelPath: MODEL, threads: 1, completionTimeLimitMs: 0, exactPrompt: true });
    await lsp.waitFor(() => lsp.states.some((s) => s.state === 'ready'), 'state ready', 240_000);
    lsp.openDocument(A.uri, A.text, 'python');
    lsp.openDocument(B.uri, B.text, 'python');
  });
  after(async () => { await lsp.stop(); });

  test('the first completion after a warm-up evaluates one prompt token and shows the cold text', async () => {
    // a.py cold: every prompt token evaluated.
    await lsp.inlineCompletion(A.uri, LINE, 0);
    const cold = lsp.stats.at(-1)!;
    assert.equal(cold.reusedTokens, 0, JSON.stringify(cold));
    // b.py gets focus: warmed, then completed.
    await lsp.connection.sendNotification('fulcrum/warmCompletion', { textDocument: { uri: B.uri }, position: { line: LINE, character: 0 } });
    await lsp.waitFor(() => lsp.logs.some((l) => l.startsWith(`warm-up: ${B.uri}`)), 'the warm-up log line');
    const warmLine = lsp.logs.find((l) => l.startsWith(`warm-up: ${B.uri}`))!;
    const list = await lsp.inlineCompletion(B.uri, LINE, 0);
    const warmed = lsp.stats.at(-1)!;
    console.log(`  a.py cold: ${cold.promptTokens} prompt tokens evaluated; ${warmLine}; b.py's completion evaluated ${warmed.promptTokens - (warmed.reusedTokens ?? 0)} of ${warmed.promptTokens}`);
    assert.match(warmLine, /done/);
    assert.equal(warmed.promptTokens - (warmed.reusedTokens ?? 0), 1, JSON.stringify(warmed));
    const lines = B.text.split('\n');
    const cursor = lines.slice(0, LINE).join('\n').length + 1;
    const expected = await coldCompletion(B.text.slice(0, cursor), B.text.slice(cursor));
    assert.equal((list.items[0]?.insertText as string | undefined) ?? '', expected);
  });

  test('a warm-up for a document the engine does not have is ignored', async () => {
    const before = lsp.logs.length;
    await lsp.connection.sendNotification('fulcrum/warmCompletion', { textDocument: { uri: 'file:///work/missing.py' }, position: { line: 0, character: 0 } });
    await lsp.inlineCompletion(A.uri, LINE, 0);
    assert.ok(!lsp.logs.slice(before).some((l) => l.startsWith('warm-up:')), lsp.logs.slice(before).join('\n'));
  });
});
