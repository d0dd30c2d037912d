// How the server fits the text before the cursor into the context (engine/completion/budget.ts),
// with the real tokenizer of stories260K.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { readGguf } from '../../engine/model/gguf/index';
import { createTokenizer } from '../../engine/model/tokenizer/index';
import { fitContext, fitPrefix, fitSuffix, keepEndWithinBytes, keepStartWithinBytes } from '../../engine/completion/budget';
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

const CODER = sharedPath('vocab', 'ggml-vocab-deepseek-coder.gguf');
const skipCoder = existsSync(CODER) ? false : `shared file ${CODER} is absent`;

function pythonFile(functions: number): string {
  const out: string[] = [];
  for (let i = 0; i < functions; i++) {
    out.push(`def handler_${i}(request, retries=${i % 5}):`, `    """Handle request number ${i}."""`,
      `    value = request.get("key_${i}", None)`, `    if value is None:`, `        return retries * ${i}`, `    return value`, '');
  }
  return out.join('\n');
}

test('fitContext: prefix and suffix within the budget, 3:1, cut on line boundaries', { skip: skipCoder }, () => {
  const tok = createTokenizer(readGguf(CODER));
  const count = (s: string) => (s.length === 0 ? 0 : tok.encode(s, { addBos: false }).length);
  const doc = pythonFile(400); // ~50 KB
  const cursor = doc.indexOf('def handler_200') + 'def handler_200(req'.length;
  const before = doc.slice(0, cursor);
  const after = doc.slice(cursor);
  const budget = 1024;
  const overhead = 4;
  const { prefix, suffix } = fitContext(before, after, budget, overhead, count);
  const p = count(prefix);
  const s = count(suffix);
  assert.ok(p + s + overhead <= budget, `${p} + ${s} + ${overhead} tokens ≤ ${budget}`);
  assert.ok(s <= (budget - overhead) / 4 && s > (budget - overhead) / 8, `suffix ${s} tokens is about a quarter`);
  assert.ok(p > (budget - overhead) * 0.6, `prefix ${p} tokens uses the rest`);
  assert.ok(before.endsWith(prefix) && after.startsWith(suffix));
  assert.equal(before[before.length - prefix.length - 1], '\n', 'prefix starts at a line start');
  assert.ok(suffix.endsWith('\n'), 'suffix ends at a line end');

  // Typing at the cursor: both cuts stay where they were in the document.
  const prefixStarts = new Set<number>();
  const suffixTexts = new Set<string>();
  let typed = '';
  for (const ch of 'uest, retries=3):') {
    typed += ch;
    const fitted = fitContext(before + typed, after, budget, overhead, count);
    prefixStarts.add(before.length + typed.length - fitted.prefix.length);
    suffixTexts.add(fitted.suffix);
  }
  assert.equal(prefixStarts.size, 1, `prefix cut moved: ${[...prefixStarts].join(', ')}`);
  assert.equal(suffixTexts.size, 1, 'suffix cut moved');

  // A small file is taken whole; an unused suffix share goes to the prefix.
  const small = fitContext('def f(x):\n    ', '\n', budget, overhead, count);
  assert.deepEqual(small, { prefix: 'def f(x):\n    ', suffix: '\n' });
  const endOfFile = fitContext(before, '', budget, overhead, count);
  assert.ok(count(endOfFile.prefix) > (budget - overhead) * 0.75, `prefix ${count(endOfFile.prefix)} tokens takes the unused suffix share`);
  assert.equal(fitSuffix(after, 0, count), '');
});

test('keepStartWithinBytes never splits a character', () => {
  assert.equal(keepStartWithinBytes('abc', 2), 'ab');
  assert.equal(keepStartWithinBytes('😀a', 4), '😀');
  assert.equal(keepStartWithinBytes('😀a', 3), '');
  assert.equal(keepStartWithinBytes('éx', 1), '');
});
