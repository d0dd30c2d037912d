// Slots that keep each file's work (issue 23 item 1), counted in tokens: a prompt that shares
// only a header with a slot takes an empty slot instead; switching back to a file, or jumping away
// and back within one file, reuses at least 95 % of the prompt; a superseded completion does not
// cost the next one its cache. Real tokenizer and model (tiny-fim-coder, DeepSeek-Coder FIM),
// through the Completer the editor and the LSP use, on the scheduler with 4 KV sequences.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Engine } from '../../engine/runtime/engine';
import { Completer } from '../../engine/completion/completer';
import { sharedPath, skipUnlessShared } from '../helpers/shared';

const MODEL = sharedPath('models', 'tiny-fim-coder.q8_0.gguf');
const skip = skipUnlessShared(MODEL);

/** A Python module of `n` functions: the same import header as every other file, its own names. */
function pythonFile(tag: string, n: number): string {
  const lines = ['import os', 'import sys', ''];
  for (let i = 0; i < n; i++) {
    lines.push(`def ${tag}_handler_${i}(request, retries=${i % 7}):`, `    """Handle ${tag} request number ${i}."""`, `    value = request.get("${tag}_${i}", ${i})`, `    return value * ${i + 1} + retries`, '');
  }
  return lines.join('\n');
}

let engine: Engine;
let completer: Completer;
const A = pythonFile('alpha', 400), B = pythonFile('beta', 400);
/** The cursor after `marker` in `text`. */
const at = (text: string, marker: string) => { const i = text.indexOf(marker) + marker.length; return { before: text.slice(0, i), after: text.slice(i) }; };

before(async () => {
  if (skip) return;
  engine = await Engine.load(MODEL, { threads: 2, contextLength: 512, maxSequences: 4, device: 'cpu' });
  completer = new Completer(engine);
});
after(() => engine?.dispose());

async function complete(doc: string, cursor: { before: string; after: string }, signal?: AbortSignal) {
  return completer.complete({ document: doc, ...cursor, budget: 384, maxTokens: 4, useCache: false, timeLimitMs: 0, ...(signal ? { signal } : {}) });
}

test('another file takes an empty slot, and switching back reuses ≥ 95 % of the prompt', { skip }, async () => {
  const a1 = await complete('a.py', at(A, 'def alpha_handler_200(request, retries=4):\n    '));
  const b1 = await complete('b.py', at(B, 'def beta_handler_150(request, retries=3):\n    '));
  assert.ok(b1.stats.reusedTokens < 10, `b.py shares only the header with a.py (reused ${b1.stats.reusedTokens})`);
  const a2 = await complete('a.py', at(A, 'def alpha_handler_200(request, retries=4):\n    '));
  console.log(`  a.py ${a1.stats.promptTokens} tokens; b.py reused ${b1.stats.reusedTokens}; back to a.py reused ${a2.stats.reusedTokens} of ${a2.stats.promptTokens}`);
  assert.ok(a2.stats.reusedTokens >= 0.95 * a2.stats.promptTokens, `switch back reused ${a2.stats.reusedTokens} of ${a2.stats.promptTokens}`);
  const b2 = await complete('b.py', at(B, 'def beta_handler_150(request, retries=3):\n    '));
  assert.ok(b2.stats.reusedTokens >= 0.95 * b2.stats.promptTokens, `and back to b.py reused ${b2.stats.reusedTokens} of ${b2.stats.promptTokens}`);
});

test('a jump away and back within one file reuses the slot of the old position', { skip }, async () => {
  const near = at(A, 'def alpha_handler_60(request, retries=4):\n    ');
  const far = at(A, 'def alpha_handler_330(request, retries=1):\n    ');
  await complete('a.py', near);
  const jumped = await complete('a.py', far);
  assert.ok(jumped.stats.reusedTokens < 0.25 * jumped.stats.promptTokens, 'the far place shares little with the near one');
  const back = await complete('a.py', near);
  console.log(`  jump: far reused ${jumped.stats.reusedTokens}; back reused ${back.stats.reusedTokens} of ${back.stats.promptTokens}`);
  assert.ok(back.stats.reusedTokens >= 0.95 * back.stats.promptTokens, `back reused ${back.stats.reusedTokens} of ${back.stats.promptTokens}`);
});

test('a superseded completion does not wipe the cursor\'s cache', { skip }, async () => {
  const text = pythonFile('gamma', 300);
  const marker = 'def gamma_handler_120(request, retries=1):\n    ';
  const first = await complete('c.py', at(text, marker));
  assert.ok(first.stats.promptTokens > 200);
  // Two keystrokes in quick succession: the first request is superseded (aborted) right after it starts.
  const typed1 = at(text, marker);
  const ac = new AbortController();
  const superseded = complete('c.py', { before: `${typed1.before}v`, after: typed1.after }, ac.signal);
  ac.abort();
  const typed2 = await complete('c.py', { before: `${typed1.before}va`, after: typed1.after });
  await superseded;
  // The prompt up to the cursor is unchanged (the prefix is 3/4 of the budget), so its KV must be
  // reused; in PSM order the suffix follows the cursor and is evaluated again.
  console.log(`  after a superseded request: reused ${typed2.stats.reusedTokens} of ${typed2.stats.promptTokens}`);
  assert.ok(typed2.stats.reusedTokens >= 0.6 * typed2.stats.promptTokens, `reused ${typed2.stats.reusedTokens} of ${typed2.stats.promptTokens}`);
});

test('extra-context chunks shared by two files do not make one file take the other\'s slot', { skip }, async () => {
  // fulcrum.completions.extraContext puts the same chunks of other files before every file's
  // prompt: a small file's prompt then shares a large part (the chunks) with the big file's slot,
  // and taking that slot would keep the chunks but throw away the big file's own work.
  const chunks = Array.from({ length: 4 }, (_, i) => ({ name: `lib_${i}.py`, text: `def lib_${i}(x):\n    return x * ${i + 2}\n` }));
  const big = pythonFile('delta', 300), small = 'import os\n\n\ndef main():\n    ';
  const cursor = at(big, 'def delta_handler_140(request, retries=0):\n    ');
  const withChunks = (doc: string, c: { before: string; after: string }) => completer.complete({ document: doc, ...c, budget: 384, maxTokens: 4, useCache: false, timeLimitMs: 0, extraContext: chunks });
  const first = await withChunks('d.py', cursor);
  const other = await withChunks('small.py', { before: small, after: '\n' });
  const back = await withChunks('d.py', cursor);
  console.log(`  extra context: d.py ${first.stats.promptTokens} tokens; small.py reused ${other.stats.reusedTokens} of ${other.stats.promptTokens}; back to d.py reused ${back.stats.reusedTokens} of ${back.stats.promptTokens}`);
  assert.ok(other.stats.reusedTokens < 10, `small.py started in an empty slot (reused ${other.stats.reusedTokens})`);
  assert.ok(back.stats.reusedTokens >= 0.95 * back.stats.promptTokens, `back to d.py reused ${back.stats.reusedTokens} of ${back.stats.promptTokens}`);
});
