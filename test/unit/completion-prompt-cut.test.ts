// A prompt cut to answer in time (issue 23, the first completion in a big file): with
// maxPromptMs, a completion whose uncached prompt tokens would take longer at the measured prompt
// speed is made from the text nearest the cursor (the budget fit at a smaller budget), keystrokes
// after it reuse that window's KV, and once the whole prompt is warmed the next completion uses it
// whole. Counted in tokens, on a real tokenizer and model (tiny-fim-coder) through the Completer.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Engine } from '../../engine/runtime/engine';
import { Completer, type CursorCompletionRequest } from '../../engine/completion/completer';
import { sharedPath, skipUnlessShared } from '../helpers/shared';
import { pythonFunctions as pythonFile } from '../helpers/python-source';

const MODEL = sharedPath('models', 'tiny-fim-coder.q8_0.gguf');
const skip = skipUnlessShared(MODEL);


const DOC = pythonFile(200);
const AT = DOC.indexOf('def handler_120(');
const CURSOR = { document: 'a.py', before: DOC.slice(0, AT), after: DOC.slice(AT), budget: 384, maxTokens: 12, timeLimitMs: Infinity, useCache: false } satisfies CursorCompletionRequest;
/** So small that any cold prompt is over it: the cut is then the smallest budget (64 tokens). */
const TIGHT = { maxPromptMs: 1 };

let engine: Engine;
let completer: Completer;

before(async () => {
  if (skip) return;
  engine = await Engine.load(MODEL, { threads: 2, contextLength: 512, maxSequences: 4, device: 'cpu' });
  completer = new Completer(engine);
});
after(() => engine?.dispose());

test('before any measured prompt speed nothing is cut', { skip }, async () => {
  const fresh = new Completer(engine);
  fresh.clearKvCache();
  const r = await fresh.complete({ ...CURSOR, ...TIGHT });
  assert.equal(r.cut, undefined, 'without a measured speed the whole prompt runs');
  assert.ok(r.stats.promptTokens > 300, `the whole prompt (${r.stats.promptTokens} tokens)`);
});

test('a cold prompt over maxPromptMs is cut to the window nearest the cursor; keystrokes reuse it; a warm-up brings the whole prompt back', { skip }, async () => {
  // Measure the prompt speed on another document.
  completer.clearKvCache();
  const other = pythonFile(80, 'worker');
  const w0 = await completer.warm({ ...CURSOR, document: 'b.py', before: other, after: '' });
  assert.ok(w0.evaluatedTokens >= 32, 'the speed sample is long enough');
  completer.clearKvCache();

  const cut = await completer.complete({ ...CURSOR, ...TIGHT });
  assert.ok(cut.cut, 'the cold prompt is cut');
  assert.equal(cut.cut.budget, 64);
  assert.ok(cut.cut.wholePromptTokens > 300, `the whole prompt would be ${cut.cut.wholePromptTokens} tokens`);
  assert.equal(cut.cut.wholeCachedTokens, 0);
  assert.ok(cut.stats.promptTokens <= 64, `the cut prompt has ${cut.stats.promptTokens} tokens`);
  // The cut is the budget fit at the smaller budget: the same text as asking for that budget.
  completer.clearKvCache();
  const at64 = await completer.complete({ ...CURSOR, budget: 64 });
  assert.equal(cut.text, at64.text);
  assert.equal(cut.stats.promptTokens, at64.stats.promptTokens);

  // A keystroke: the window stays put, so its KV is reused.
  completer.clearKvCache();
  await completer.complete({ ...CURSOR, ...TIGHT });
  const typed = await completer.complete({ ...CURSOR, ...TIGHT, before: `${CURSOR.before}d` });
  assert.ok(typed.cut, 'still cut: the whole prompt is not cached');
  assert.equal(typed.cut.budget, 64, 'the same budget, so the same window');
  console.log(`  cut ${cut.stats.promptTokens} of ${cut.cut.wholePromptTokens} tokens; after a keystroke ${typed.stats.reusedTokens} of ${typed.stats.promptTokens} reused`);
  // A window that moved would share only its first FIM token or two; the suffix's few tokens are
  // under the shortest run worth moving, so they are evaluated again.
  assert.ok(typed.stats.reusedTokens >= typed.stats.promptTokens / 2, `the keystroke reuses the window (${typed.stats.reusedTokens} of ${typed.stats.promptTokens})`);

  // The whole prompt warmed (as the server does after a cut): the next completion is whole.
  const { maxPromptMs: _limit, ...wholeRequest } = { ...CURSOR, ...TIGHT, before: `${CURSOR.before}d` };
  const w = await completer.warm(wholeRequest);
  assert.equal(w.stopReason, 'length');
  const whole = await completer.complete({ ...CURSOR, ...TIGHT, before: `${CURSOR.before}d` });
  assert.equal(whole.cut, undefined, 'the whole prompt is cached: no cut');
  assert.equal(whole.stats.evaluatedTokens, 1);
  assert.equal(whole.stats.promptTokens, w.promptTokens);
  completer.clearKvCache();
  const cold = await completer.complete({ ...CURSOR, before: `${CURSOR.before}d` });
  assert.equal(whole.text, cold.text, 'the same text as a cold completion with the whole prompt');
});
