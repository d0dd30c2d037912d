// KV slots per document: completions in two documents that alternate keep each document's KV in
// its own native sequence (the scheduler gives a request the slot sharing the longest prompt
// prefix), so coming back to a document reuses its whole prompt prefix, and the completion
// equals the one a fresh engine gives. A new document takes the least recently used slot.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Engine } from '../../engine/runtime/engine';
import { runCompletion } from '../../engine/completion/runner';
import { sharedPath, skipUnlessShared } from '../helpers/shared';

const MODEL = sharedPath('models', 'stories260K.gguf');
const ids = (seed: number, n: number) => Array.from({ length: n }, (_, i) => 1 + ((i * 37 + seed * 101) % 500));

test('alternating documents reuse their own KV slot; completions equal those of a fresh engine', { skip: skipUnlessShared(MODEL) }, async () => {
  const docA = ids(1, 60), docB = ids(2, 70), docC = ids(3, 40), docD = ids(4, 30);
  const fresh = async (prompt: number[]) => {
    const e = await Engine.load(MODEL, { threads: 1, contextLength: 256, device: 'cpu' });
    try { return (await runCompletion(e, prompt, { maxTokens: 12, stopIds: new Set() })).tokens; } finally { e.dispose(); }
  };
  const e = await Engine.load(MODEL, { threads: 1, contextLength: 256, device: 'cpu', maxSequences: 3 });
  try {
    const run = (prompt: number[], _document: string) => runCompletion(e, prompt, { maxTokens: 12, stopIds: new Set() });
    const a1 = await run(docA, 'a');
    const b1 = await run(docB, 'b');
    // Back to a, one more token typed: everything before it comes from a's slot.
    const a2 = await run([...docA, 77], 'a');
    assert.equal(a2.reusedTokens, docA.length, `a reused ${a2.reusedTokens} of ${docA.length}`);
    const b2 = await run([...docB, 88], 'b');
    assert.equal(b2.reusedTokens, docB.length);
    assert.deepEqual(a1.tokens, await fresh(docA));
    assert.deepEqual(b1.tokens, await fresh(docB));
    assert.deepEqual(a2.tokens, await fresh([...docA, 77]));
    // Two more documents: c takes the free slot, d the least recently used one (a's), b survives.
    await run(docC, 'c');
    await run(docD, 'd');
    const b3 = await run([...docB, 88, 99], 'b');
    assert.equal(b3.reusedTokens, docB.length + 1, 'b kept its slot');
    const a3 = await run([...docA, 77], 'a');
    assert.ok(a3.reusedTokens < docA.length, 'a lost its slot to d (least recently used)');
    assert.deepEqual(a3.tokens, a2.tokens);
  } finally {
    e.dispose();
  }
});
