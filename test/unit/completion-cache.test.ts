// The completion cache: exact hits, type-through (typing the start of a suggestion keeps the
// rest), misses when the typed text departs from the suggestion or the text after the cursor
// changed, and LRU eviction.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CompletionCache } from '../../engine/completion/cache';

test('exact hit and type-through', () => {
  const cache = new CompletionCache();
  cache.store('a.py', 'def f(x):\n    ', '\n', 'return x + 1');
  assert.equal(cache.lookup('a.py', 'def f(x):\n    ', '\n'), 'return x + 1');
  assert.equal(cache.lookup('a.py', 'def f(x):\n    ret', '\n'), 'urn x + 1');
  assert.equal(cache.lookup('a.py', 'def f(x):\n    return x + 1', '\n'), undefined, 'fully typed: nothing left to show');
  assert.equal(cache.lookup('a.py', 'def f(x):\n    rex', '\n'), undefined, 'typed text departs from the suggestion');
  assert.equal(cache.lookup('a.py', 'def f(x):\n    ret', '\nprint(1)\n'), undefined, 'the text after the cursor changed');
  assert.equal(cache.lookup('b.py', 'def f(x):\n    ', '\n'), undefined, 'another document');
});

test('least recently used entries go first', () => {
  const cache = new CompletionCache(2);
  cache.store('a', 'one', '', '1');
  cache.store('a', 'two', '', '2');
  assert.equal(cache.lookup('a', 'one', ''), '1'); // "one" is now the most recent
  cache.store('a', 'three', '', '3');
  assert.equal(cache.size, 2);
  assert.equal(cache.lookup('a', 'two', ''), undefined);
  assert.equal(cache.lookup('a', 'one', ''), '1');
  assert.equal(cache.lookup('a', 'three', ''), '3');
  cache.store('a', 'four', '', '');
  assert.equal(cache.size, 2, 'empty completions are not stored');
});
