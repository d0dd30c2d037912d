// A turned extra-context ring costs only its new chunk (issue 23 item 6), also when the chunks
// and the document are code that repeats itself: a run of the new chunk then also matches the
// middle of the cached prefix, and the moved-KV reuse must not take that run at the cost of the
// cursor's whole prompt (bench:completion's "shifted + extra" keystroke p90 evaluated all 934
// tokens of the 0.5B's prompt). The shape of the bench (budget 1024, chunks of about 117 tokens,
// a 50 KB file), on tiny-fim-coder with a 4096-position context (the counts are what the test is
// about, not the model's output).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Engine } from '../../engine/runtime/engine';
import { Completer } from '../../engine/completion/completer';
import { sharedPath, skipUnlessShared } from '../helpers/shared';

const MODEL = sharedPath('models', 'tiny-fim-coder.q8_0.gguf');
const skip = skipUnlessShared(MODEL);

function pythonFile(bytes: number): string {
  const out: string[] = [];
  for (let i = 0; out.join('\n').length < bytes; i++) {
    out.push(`def handler_${i}(request, retries=${i % 5}):`, `    """Handle request number ${i} and return its value."""`,
      `    value = request.get("key_${i}", None)`, '    if value is None:', `        return retries * ${i}`, '    return value', '');
  }
  return out.join('\n').slice(0, bytes);
}

let engine: Engine;
before(async () => {
  if (skip) return;
  engine = await Engine.load(MODEL, { threads: 2, contextLength: 4096, maxSequences: 4, device: 'cpu' });
});
after(() => engine?.dispose());

test('a keystroke that turns the ring evaluates the new chunk and the keystroke, not the prompt', { skip }, async () => {
  const completer = new Completer(engine);
  const doc = pythonFile(50_000);
  const at = doc.indexOf('\n\n', Math.floor(doc.length / 2)) + 1;
  const chunks = Array.from({ length: 4 }, (_, i) => ({ name: `lib_${i}.py`, text: pythonFile(360).replace(/handler/g, `lib${i}_fn`) }));
  const base = { document: 'a.py', after: doc.slice(at), maxTokens: 16, useCache: false, timeLimitMs: 0 } as const;
  const first = await completer.complete({ ...base, before: doc.slice(0, at) + '   ', extraContext: chunks.slice(0, 2) });
  // A quarter of the 1024-token budget holds two chunks: the third pushes the first out.
  const turned = await completer.complete({ ...base, before: doc.slice(0, at) + '    ', extraContext: chunks.slice(0, 3) });
  const chunkTokens = completer.prompts.encodeExtra([chunks[2]!]).length;
  console.log(`  prompt ${first.stats.promptTokens} tokens; ring turned (a ${chunkTokens}-token chunk in) plus a keystroke: evaluated ${turned.stats.evaluatedTokens} of ${turned.stats.promptTokens}`);
  assert.ok(first.stats.promptTokens > 900);
  assert.ok(turned.stats.evaluatedTokens <= chunkTokens + 4, `evaluated ${turned.stats.evaluatedTokens} of ${turned.stats.promptTokens}`);
});
