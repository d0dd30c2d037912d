// The status-bar text and log line of the last completion (extension/completion-stats.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { CompletionStats } from '../../engine/server/protocol';
import { statsLine, statsSummary } from '../../extension/completion-stats';

const run: CompletionStats = {
  promptTokens: 412, reusedTokens: 380, generatedTokens: 18, promptMs: 90, generateMs: 550,
  tokensPerSecond: 32.7, stopReason: 'rule', totalMs: 642.4, format: 'qwen2.5-coder',
};

test('status bar: prompt tokens with the reused split, generated tokens, total time', () => {
  assert.equal(statsSummary(run), '412 tok (380 reused) + 18 · 642 ms · 32.7 tok/s');
  assert.equal(statsSummary({ ...run, stopReason: 'cached' }), 'from cache');
  const { totalMs: _t, reusedTokens: _r, ...old } = run;
  assert.equal(statsSummary(old), '412 tok + 18 · 640 ms · 32.7 tok/s', 'servers without the new fields: prompt + generate time');
});

test('log line: the split, both speeds, the format and why it stopped in words', () => {
  const line = statsLine(run);
  assert.match(line, /prompt 412 tokens \(380 reused from the KV cache, 32 evaluated in 90 ms, 356 tok\/s\)/);
  assert.match(line, /generated 18 tokens in 550 ms \(32\.7 tok\/s\)/);
  assert.match(line, /total 642 ms, format qwen2\.5-coder, stop: a completion rule/);
  assert.match(statsLine({ ...run, stopReason: 'time' }), /fulcrum\.completions\.timeLimitMs/);
});

test('a prompt cut by maxPromptMs: the status bar shows of how many, the log line says why', () => {
  const cut = { ...run, promptTokens: 109, reusedTokens: 0, wholePromptTokens: 941 };
  assert.equal(statsSummary(cut), '109 of 941 tok (0 reused) + 18 · 642 ms · 32.7 tok/s');
  assert.match(statsLine(cut), /the prompt was cut to the text nearest the cursor \(109 of 941 tokens\) to answer within fulcrum\.completions\.maxPromptMs/);
  assert.doesNotMatch(statsLine(run), /cut/);
});
