// llama.cpp's tokenizer test vectors (test-tokenizer-0): for every ggml-vocab-*.gguf in
// ../shared/vocab with .inp/.out files, each input string encoded without BOS/EOS and without
// special-token parsing must give exactly the ids on the matching .out line.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { readGguf } from '../../engine/model/gguf';
import { createTokenizer } from '../../engine/model/tokenizer';

const VOCAB_DIR = resolve(__dirname, '../../../shared/vocab');

/** Splits an .inp file as test-tokenizer-0 does: every string ends with "\n__ggml_vocab_test__\n". */
function splitInputs(inp: string): string[] {
  const sep = '\n__ggml_vocab_test__\n';
  const texts: string[] = [];
  let from = 0;
  for (let at = inp.indexOf(sep, from); at >= 0; at = inp.indexOf(sep, from)) {
    texts.push(inp.slice(from, at));
    from = at + sep.length;
  }
  assert.equal(inp.slice(from), '', 'the .inp file must end with a separator line');
  return texts;
}

/** The .out file: one line of space-separated ids per input (each id written with a leading space). */
function readExpected(out: string): string[] {
  const lines = out.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines.map((l) => l.trim());
}

const vocabs = existsSync(VOCAB_DIR)
  ? readdirSync(VOCAB_DIR).filter((f) => /^ggml-vocab-.+\.gguf$/.test(f) && existsSync(join(VOCAB_DIR, `${f}.inp`)) && existsSync(join(VOCAB_DIR, `${f}.out`))).sort()
  : [];

test('vocab test vectors are present', { skip: existsSync(VOCAB_DIR) ? false : `${VOCAB_DIR} is absent` }, () => {
  assert.ok(vocabs.length >= 4, `expected the four vocabularies, found ${vocabs.join(', ')}`);
});

for (const name of vocabs) {
  test(`llama.cpp test vectors: ${name}`, (t) => {
    const tokenizer = createTokenizer(readGguf(join(VOCAB_DIR, name)));
    const inputs = splitInputs(readFileSync(join(VOCAB_DIR, `${name}.inp`), 'utf8'));
    const expected = readExpected(readFileSync(join(VOCAB_DIR, `${name}.out`), 'utf8'));
    assert.equal(inputs.length, expected.length, `${name}: ${inputs.length} inputs but ${expected.length} expected lines`);
    const failures: string[] = [];
    inputs.forEach((text, i) => {
      const got = tokenizer.encode(text, { addBos: false, addEos: false, parseSpecial: false }).join(' ');
      if (got !== expected[i]) failures.push(`#${i} ${JSON.stringify(text)}\n  got      ${got}\n  expected ${expected[i]}`);
    });
    t.diagnostic(`${name}: ${inputs.length - failures.length}/${inputs.length} match`);
    assert.deepEqual(failures, [], `${name}: ${failures.length} of ${inputs.length} differ:\n${failures.join('\n')}`);
  });
}
