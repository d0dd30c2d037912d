// Cache warm-up (issue 23 item 2): Completer.warm evaluates the prompt a completion at the cursor
// would have, generating nothing, so the first completion after a document opens or gets focus
// evaluates only its last prompt token; the text is the same as a cold completion's. A completion
// that arrives while a warm-up runs cancels it and takes over the KV it has evaluated. Counted in
// tokens, on a real tokenizer and model (tiny-fim-coder, DeepSeek-Coder FIM) through the Completer.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Engine } from '../../engine/runtime/engine';
import { Completer, type CursorCompletionRequest } from '../../engine/completion/completer';
import { sharedPath, skipUnlessShared } from '../helpers/shared';
import { pythonFunctions as pythonFile } from '../helpers/python-source';

const MODEL = sharedPath('models', 'tiny-fim-coder.q8_0.gguf');
const skip = skipUnlessShared(MODEL);


const DOC = pythonFile(200);
const CUT = DOC.indexOf('def handler_120(');
const CURSOR = { document: 'a.py', before: DOC.slice(0, CUT), after: DOC.slice(CUT), budget: 384, maxTokens: 12, timeLimitMs: Infinity, useCache: false } satisfies CursorCompletionRequest;

let engine: Engine;
let completer: Completer;

before(async () => {
  if (skip) return;
  engine = await Engine.load(MODEL, { threads: 2, contextLength: 512, maxSequences: 4, device: 'cpu' });
  completer = new Completer(engine);
});
after(() => engine?.dispose());

test('after a warm-up the first completion evaluates one token, and its text is the cold one', { skip }, async () => {
  for (const exact of [true, false]) {
    completer.clearKvCache();
    const cold = await completer.complete({ ...CURSOR, exact });
    assert.equal(cold.stats.evaluatedTokens, cold.stats.promptTokens, 'the cold completion evaluates its whole prompt');
    completer.clearKvCache();
    const w = await completer.warm({ ...CURSOR, exact });
    assert.equal(w.stopReason, 'length');
    assert.equal(w.evaluatedTokens, cold.stats.promptTokens, 'the warm-up evaluates the prompt the completion will have');
    const warmed = await completer.complete({ ...CURSOR, exact });
    console.log(`  exact=${exact}: cold evaluated ${cold.stats.evaluatedTokens} tokens; warm-up ${w.evaluatedTokens}; then the completion ${warmed.stats.evaluatedTokens} of ${warmed.stats.promptTokens}`);
    assert.equal(warmed.stats.promptTokens, cold.stats.promptTokens);
    assert.equal(warmed.stats.evaluatedTokens, 1, 'only the last prompt token (its logits) is evaluated again');
    assert.equal(warmed.stats.generatedTokens, cold.stats.generatedTokens);
    assert.ok(cold.stats.generatedTokens > 1, 'a completion of several tokens is compared');
    assert.equal(warmed.text, cold.text);
  }
});

test('a completion during a warm-up cancels it and reuses what it evaluated', { skip }, async () => {
  completer.clearKvCache();
  const steps0 = engine.scheduler().stats.steps;
  const warming = completer.warm({ ...CURSOR, exact: true });
  // Let the warm-up run two prompt steps (64 tokens each) before the completion arrives.
  while (engine.scheduler().stats.steps < steps0 + 2) await new Promise((r) => setTimeout(r, 1));
  const stepsBefore = engine.scheduler().stats.steps - steps0;
  const r = await completer.complete({ ...CURSOR, exact: true });
  const w = await warming;
  console.log(`  warm-up ${w.stopReason} after ≥ ${stepsBefore} steps; the completion reused ${r.stats.reusedTokens} of ${r.stats.promptTokens}`);
  if (w.stopReason === 'cancelled') {
    assert.ok(r.stats.reusedTokens >= 64, `the completion took over the warm-up's KV (reused ${r.stats.reusedTokens})`);
  } else {
    // The warm-up finished before the completion was admitted: all but the last token reused.
    assert.equal(r.stats.evaluatedTokens, 1);
  }
  completer.clearKvCache();
  const cold = await completer.complete({ ...CURSOR, exact: true });
  assert.equal(r.text, cold.text, 'the text is the cold completion\'s');
});

test('a warm-up that is aborted by its caller ends without generating', { skip }, async () => {
  completer.clearKvCache();
  const abort = new AbortController();
  abort.abort();
  const w = await completer.warm({ ...CURSOR, signal: abort.signal });
  assert.equal(w.stopReason, 'cancelled');
  assert.equal(engine.scheduler().stats.running, 0);
});

test('a completion\'s phases add up to its time, and a keystroke evaluates only its new tokens', { skip }, async () => {
  completer.clearKvCache();
  const first = await completer.complete({ ...CURSOR, exact: false });
  const keystroke = await completer.complete({ ...CURSOR, before: `${CURSOR.before}de`, exact: false });
  for (const s of [first.stats, keystroke.stats]) {
    const phases = s.buildMs + s.queuedMs + s.promptMs + s.generateMs;
    assert.ok(s.buildMs > 0 && s.queuedMs >= 0 && phases <= s.totalMs + 0.5, JSON.stringify(s));
    assert.equal(s.evaluatedTokens, s.promptTokens - s.reusedTokens);
    assert.ok(s.decodeSteps <= s.generatedTokens && s.acceptedDraftTokens <= s.draftedTokens, JSON.stringify(s));
  }
  console.log(`  keystroke: ${keystroke.stats.evaluatedTokens} of ${keystroke.stats.promptTokens} prompt tokens evaluated (the suffix's KV moved), build ${keystroke.stats.buildMs.toFixed(2)} ms`);
  // The new characters (one or two tokens) and the prompt's last token; the suffix is not evaluated again.
  assert.ok(keystroke.stats.evaluatedTokens <= 4, JSON.stringify(keystroke.stats));
});
