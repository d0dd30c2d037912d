// Golden files for the completion quality rules (test/unit/golden/completion-rules/*.json): a
// document with the cursor marked █, the model's raw output, the completion to show. The rule
// that stops generation early must give the same completion as the rules on the whole output.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { applyRules, cursorContext, stopRule } from '../../engine/completion/rules';

const DIR = path.join(__dirname, 'golden', 'completion-rules');
const CURSOR = '█';

interface Golden { rule: string; document: string; raw: string; expected: string }

const files = readdirSync(DIR).filter((f) => f.endsWith('.json')).sort();

test('golden files exist', () => assert.ok(files.length >= 10));

for (const file of files) {
  const golden = JSON.parse(readFileSync(path.join(DIR, file), 'utf8')) as Golden;
  test(`${file}: ${golden.rule}`, () => {
    const at = golden.document.indexOf(CURSOR);
    assert.ok(at >= 0, 'the document marks the cursor with █');
    const ctx = cursorContext(golden.document.slice(0, at), golden.document.slice(at + 1));
    assert.equal(applyRules(golden.raw, ctx), golden.expected);
    // Streaming: stop where the rule first fires; the shown completion is the same.
    const stop = stopRule(ctx);
    let streamed = golden.raw;
    for (let n = 1; n <= golden.raw.length; n++) {
      if (stop(golden.raw.slice(0, n))) { streamed = golden.raw.slice(0, n); break; }
    }
    assert.equal(applyRules(streamed, ctx), golden.expected, `stopped early after ${JSON.stringify(streamed)}`);
  });
}
