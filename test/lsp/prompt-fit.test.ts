// How the server fits the text before the cursor into the context (engine/server/prompt.ts),
// with the real tokenizer of stories260K.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { readGguf } from '../../engine/model/gguf/index';
import { createTokenizer } from '../../engine/model/tokenizer/index';
import { fitPrefix, keepEndWithinBytes } from '../../engine/server/prompt';
import { sharedPath } from '../helpers/shared';

const MODEL = sharedPath('models', 'stories260K.gguf');
const skip = existsSync(MODEL) ? false : `shared file ${MODEL} is absent`;

function story(paragraphs: number): string {
  const lines: string[] = [];
  for (let i = 0; i < paragraphs; i++) lines.push(`Once upon a time, a little girl named Lily number ${i} went to the park with her dog.`);
  return lines.join('\n');
}

test('a short prefix is kept whole', { skip }, () => {
  const tok = createTokenizer(readGguf(MODEL));
  const count = (s: string) => tok.encode(s, { addBos: true }).length;
  assert.equal(fitPrefix('Once upon a time', 100, count), 'Once upon a time');
});

test('a long prefix is cut to fit the budget, keeping the end, at a line start', { skip }, () => {
  const tok = createTokenizer(readGguf(MODEL));
  const count = (s: string) => tok.encode(s, { addBos: true }).length;
  const text = story(200);
  const budget = 300;
  assert.ok(count(text) > budget * 3);
  const fitted = fitPrefix(text, budget, count);
  assert.ok(count(fitted) <= budget, `${count(fitted)} tokens ≤ ${budget}`);
  assert.ok(count(fitted) > budget * 0.5, `uses most of the budget (${count(fitted)} tokens)`);
  assert.ok(text.endsWith(fitted));
  assert.equal(text[text.length - fitted.length - 1], '\n', 'cut right after a newline');
});

test('the cut stays put while the user types at the end (KV cache reuse)', { skip }, () => {
  const tok = createTokenizer(readGguf(MODEL));
  const count = (s: string) => tok.encode(s, { addBos: true }).length;
  const base = story(100);
  const starts = new Set<number>();
  let typed = '\nThe end';
  for (let i = 0; i < 20; i++) {
    typed += 'x';
    const text = base + typed;
    const fitted = fitPrefix(text, 400, count);
    assert.ok(count(fitted) <= 400);
    starts.add(text.length - fitted.length);
  }
  assert.equal(starts.size, 1, `one cut for 20 keystrokes, got ${[...starts].join(', ')}`);
});

test('keepEndWithinBytes never splits a character', () => {
  assert.equal(keepEndWithinBytes('abc', 2), 'bc');
  assert.equal(keepEndWithinBytes('a😀', 4), '😀');
  assert.equal(keepEndWithinBytes('a😀', 3), '');
  assert.equal(keepEndWithinBytes('é', 1), '');
  assert.equal(keepEndWithinBytes('xé', 2), 'é');
});
