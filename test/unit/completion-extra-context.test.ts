// Extra context from other files: the ring of chunks (where the user last worked in each
// document, similar chunks replaced, oldest dropped), how chunks are tokenized before the FIM
// prefix, and that they stay within a quarter of the prompt budget.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readGguf } from '../../engine/model/gguf';
import { createTokenizer } from '../../engine/model/tokenizer';
import { ChunkRing } from '../../engine/completion/extra-context';
import { PromptBuilder } from '../../engine/completion/prompt';
import { sharedPath, skipUnlessShared } from '../helpers/shared';

const lines = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `${tag}_${i} = ${i}`).join('\n');

test('the ring keeps the lines around the cursor, one chunk per place, the newest 16', () => {
  const ring = new ChunkRing(3, 8);
  const a = lines(100, 'a');
  ring.note('a.py', a, 50);
  assert.deepEqual(ring.chunksFor('b.py').map((c) => c.text), [a.split('\n').slice(46, 54).join('\n')]);
  assert.deepEqual(ring.chunksFor('a.py'), [], 'a document never gets its own chunks');
  ring.note('a.py', a, 51); // the same place again: replaces the chunk
  assert.equal(ring.chunksFor('b.py').length, 1);
  ring.note('a.py', a, 5); // another place in the same file: a second chunk
  ring.note('c.py', lines(10, 'c'), 0);
  ring.note('d.py', lines(10, 'd'), 0);
  assert.deepEqual(ring.chunksFor('b.py').map((c) => c.name), ['a.py', 'c.py', 'd.py'], 'oldest dropped, oldest first');
  ring.forget('c.py');
  assert.deepEqual(ring.chunksFor('b.py').map((c) => c.name), ['a.py', 'd.py']);
  ring.note('e.py', '\n\n  \n', 0);
  assert.equal(ring.chunksFor('b.py').length, 2, 'blank chunks are not kept');
});

const CODER = sharedPath('vocab', 'ggml-vocab-deepseek-coder.gguf');

test('chunks go after BOS and before the FIM prefix, as text followed by a blank line', { skip: skipUnlessShared(CODER) }, () => {
  const builder = new PromptBuilder(createTokenizer(readGguf(CODER)));
  const tok = builder.tokenizer;
  const extra = builder.encodeExtra([{ name: 'util.py', text: 'def helper():\n    return 1' }]);
  assert.deepEqual(extra, tok.encode('def helper():\n    return 1\n\n', { addBos: false }));
  const prompt = builder.build('x = ', '\n', extra);
  assert.deepEqual(prompt.ids.slice(0, 1 + extra.length + 1), [32013, ...extra, 32016]);
});
