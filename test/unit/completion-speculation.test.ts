// Prompt-lookup speculation: drafts come from the latest earlier occurrence of the current
// n-gram, and verifying them in one multi-token step gives exactly the plain greedy output (on
// the real tiny-fim-coder model, which repeats itself) in fewer model evaluations.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PromptBuilder } from '../../engine/completion/prompt';
import { runCompletion } from '../../engine/completion/runner';
import { findDraft } from '../../engine/runtime/scheduler/speculate';
import { Engine } from '../../engine/runtime/engine';
import { sharedPath, skipUnlessShared } from '../helpers/shared';

test('findDraft: the tokens after the latest earlier occurrence of the last n-gram', () => {
  assert.deepEqual(findDraft([1, 2, 3, 4, 5, 9, 2, 3], 3), [4, 5, 9]);
  assert.deepEqual(findDraft([1, 2, 3, 7, 1, 2, 3, 8, 0, 2, 3], 2), [8, 0], 'the latest occurrence wins');
  assert.deepEqual(findDraft([5, 6, 7, 8, 6, 7, 8], 8), [6, 7, 8], 'a 3-gram first; the draft stops at the end of the history');
  assert.deepEqual(findDraft([1, 2, 3, 4], 4), [], 'no repeated n-gram: no draft');
  assert.deepEqual(findDraft([1, 2, 1, 2], 0), []);
});

const MODEL = sharedPath('models', 'tiny-fim-coder.q8_0.gguf');

test('speculative decoding gives the plain greedy output in fewer steps', { skip: skipUnlessShared(MODEL), timeout: 300_000 }, async (t) => {
  const engine = await Engine.load(MODEL, { threads: 1, contextLength: 512 });
  try {
    const builder = new PromptBuilder(engine.tokenizer);
    const cases = [
      ['class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n\n    def __repr__(self):\n        return ', '\n'],
      ['import os\nimport sys\nimport re\nimport ', '\n\ndef main():\n    pass\n'],
      ['def __init__(self', ''],
      ['for name in names:\n    if name.startswith("_"):\n        continue\n    ', '\n'],
    ] as const;
    let plainSteps = 0;
    let fastSteps = 0;
    for (const [prefix, suffix] of cases) {
      const prompt = builder.build(prefix, suffix);
      const plain = await runCompletion(engine, prompt.ids, { maxTokens: 48, stopIds: prompt.stopIds });
      for (const k of [1, 4, 8]) {
        const fast = await runCompletion(engine, prompt.ids, { maxTokens: 48, stopIds: prompt.stopIds, speculate: k });
        assert.deepEqual(fast.tokens, plain.tokens, `speculate ${k}: ${JSON.stringify(prefix)}`);
        assert.equal(fast.text, plain.text);
        assert.equal(fast.stopReason, plain.stopReason);
        if (k === 8) { plainSteps += plain.decodeSteps; fastSteps += fast.decodeSteps; }
      }
    }
    t.diagnostic(`decode steps: ${plainSteps} plain, ${fastSteps} with drafts of up to 8 tokens`);
    assert.ok(fastSteps < plainSteps, `${fastSteps} < ${plainSteps}`);
  } finally {
    engine.dispose();
  }
});

test('the n_predict cap, the time cap (at least one token) and stop tokens end generation', { skip: skipUnlessShared(MODEL), timeout: 120_000 }, async () => {
  const engine = await Engine.load(MODEL, { threads: 1, contextLength: 512 });
  try {
    const prompt = new PromptBuilder(engine.tokenizer).build('def __init__(self', '');
    const capped = await runCompletion(engine, prompt.ids, { maxTokens: 3, stopIds: prompt.stopIds });
    assert.equal(capped.generatedTokens, 3);
    assert.equal(capped.stopReason, 'length');
    const timed = await runCompletion(engine, prompt.ids, { maxTokens: 50, stopIds: prompt.stopIds, timeLimitMs: 0 });
    assert.equal(timed.generatedTokens, 1);
    assert.equal(timed.stopReason, 'time');
    assert.equal(timed.tokens[0], capped.tokens[0]);
    const stopped = await runCompletion(engine, prompt.ids, { maxTokens: 50, stopIds: new Set([capped.tokens[1]!]) });
    assert.deepEqual(stopped.tokens, capped.tokens.slice(0, 1));
    assert.equal(stopped.stopReason, 'eos');
    // The second run reuses the whole prompt but its last token from the KV cache.
    assert.equal(stopped.reusedTokens, prompt.ids.length - 1);
    const ruled = await runCompletion(engine, prompt.ids, { maxTokens: 50, stopIds: prompt.stopIds, shouldStop: (text) => text.length > 0 });
    assert.equal(ruled.generatedTokens, 1);
    assert.equal(ruled.stopReason, 'rule');
  } finally {
    engine.dispose();
  }
});
