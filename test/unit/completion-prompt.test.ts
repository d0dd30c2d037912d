// FIM prompts token by token on real vocabularies (../shared/vocab): the text parts must be
// exactly llama.cpp's tokenization of the same strings (the .inp/.out test vectors), placed
// between the family's FIM token ids in the family's order; and `fulcrum prompt` prints them.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { readGguf } from '../../engine/model/gguf';
import { createTokenizer } from '../../engine/model/tokenizer';
import { PromptBuilder } from '../../engine/completion/prompt';
import { fitContext } from '../../engine/completion/budget';
import { repoRoot, sharedPath, skipUnlessShared, tempDir } from '../helpers/shared';

const SEP = '\n__ggml_vocab_test__\n';

/** llama.cpp's test vectors: input strings and the ids its tokenizer gives each. */
function vectors(vocab: string): Array<{ text: string; ids: number[] }> {
  const inp = readFileSync(`${vocab}.inp`, 'utf8');
  const texts = inp.split(SEP);
  texts.pop(); // the file ends with a separator
  const lines = readFileSync(`${vocab}.out`, 'utf8').split('\n');
  return texts.map((text, i) => ({ text, ids: lines[i]!.trim() === '' ? [] : lines[i]!.trim().split(/\s+/).map(Number) }));
}

// The FIM ids each family's vocabulary holds (from the vocabulary files themselves).
const FAMILIES = [
  { file: 'ggml-vocab-deepseek-coder.gguf', family: 'deepseek-coder', bos: [32013], pre: 32016, suf: 32015, mid: 32017, stops: [32014] },
  { file: 'ggml-vocab-starcoder.gguf', family: 'starcoder', bos: [], pre: 1, suf: 3, mid: 2, stops: [0] },
] as const;

for (const f of FAMILIES) {
  const vocab = sharedPath('vocab', f.file);
  describe(`FIM prompt: ${f.family}`, { skip: skipUnlessShared(vocab) }, () => {
    test('PRE prefix SUF suffix MID, text parts as llama.cpp tokenizes them', () => {
      const builder = new PromptBuilder(createTokenizer(readGguf(vocab)));
      assert.equal(builder.fim?.family, f.family);
      for (const id of f.stops) assert.ok(builder.fim.stopIds.has(id), `stop token ${id}`);
      const cases = vectors(vocab).filter((v) => v.ids.length > 0);
      assert.ok(cases.length > 20);
      let checked = 0;
      for (let i = 0; i < cases.length; i++) {
        const prefix = cases[i]!;
        const suffix = cases[(i * 7 + 3) % cases.length]!;
        const prompt = builder.build(prefix.text, suffix.text);
        assert.deepEqual(prompt.ids, [...f.bos, f.pre, ...prefix.ids, f.suf, ...suffix.ids, f.mid],
          `prefix ${JSON.stringify(prefix.text)} suffix ${JSON.stringify(suffix.text)}`);
        assert.equal(prompt.format, f.family);
        checked++;
      }
      // Empty parts add no tokens; text that looks like a FIM token stays text.
      assert.deepEqual(builder.build('', '').ids, [...f.bos, f.pre, f.suf, f.mid]);
      const tricky = builder.build('x = "<fim_prefix><｜fim▁begin｜>"', '');
      assert.equal(tricky.ids.filter((id) => id === f.pre).length, 1);
      assert.ok(checked > 20);
    });

    test('fulcrum prompt --json prints the same ids, the rendered text and the format', () => {
      const r = spawnSync(process.execPath, ['--import', 'tsx', 'engine/cli.ts', 'prompt', '--model', vocab,
        '--prefix', 'def add(a, b):\n    ', '--suffix', '\n\nprint(add(1, 2))\n', '--json'], { cwd: repoRoot, encoding: 'utf8', timeout: 60_000 });
      assert.equal(r.status, 0, r.stderr);
      const out = JSON.parse(r.stdout) as { ids: number[]; text: string; format: string };
      const builder = new PromptBuilder(createTokenizer(readGguf(vocab)));
      const tok = builder.tokenizer;
      assert.deepEqual(out.ids, [...f.bos, f.pre, ...tok.encode('def add(a, b):\n    ', { addBos: false }), f.suf,
        ...tok.encode('\n\nprint(add(1, 2))\n', { addBos: false }), f.mid]);
      assert.equal(out.format, f.family);
      assert.equal(out.text, tok.decode(out.ids, { renderSpecial: true }));
      assert.ok(out.text.includes('def add(a, b):\n    ') && out.text.includes('print(add(1, 2))'));
    });
  });
}

const SPM = sharedPath('vocab', 'ggml-vocab-llama-spm.gguf');
test('a vocabulary without FIM tokens gets a prefix-only prompt', { skip: skipUnlessShared(SPM) }, () => {
  const builder = new PromptBuilder(createTokenizer(readGguf(SPM)));
  assert.equal(builder.fim, undefined);
  const prompt = builder.build('Hello world', 'ignored suffix');
  assert.equal(prompt.format, 'prefix-only');
  assert.deepEqual(prompt.ids, [1, 15043, 3186]);
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'engine/cli.ts', 'prompt', '--model', SPM, '--prefix', 'Hello world', '--json'],
    { cwd: repoRoot, encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(JSON.parse(r.stdout).format, 'prefix-only');
  assert.match(r.stderr, /no FIM tokens/);
});

test('fulcrum prompt cuts a 90 KB document to the budget the editor uses (issue 23 item 5)', { skip: skipUnlessShared(sharedPath('vocab', 'ggml-vocab-deepseek-coder.gguf')) }, () => {
  const vocab = sharedPath('vocab', 'ggml-vocab-deepseek-coder.gguf');
  const { dir, cleanup } = tempDir();
  try {
    const lines: string[] = [];
    for (let i = 0; lines.join('\n').length < 90_000; i++) lines.push(`def f_${i}(x):`, `    return x * ${i}`, '');
    const doc = lines.join('\n');
    const cut = doc.indexOf('\n', 60_000) + 1;
    writeFileSync(path.join(dir, 'before.py'), doc.slice(0, cut));
    writeFileSync(path.join(dir, 'after.py'), doc.slice(cut));
    const run = (...extra: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'engine/cli.ts', 'prompt', '--model', vocab,
      '--prefix-file', path.join(dir, 'before.py'), '--suffix-file', path.join(dir, 'after.py'), '--json', ...extra], { cwd: repoRoot, encoding: 'utf8', timeout: 60_000 });
    for (const budget of [undefined, 256]) {
      const r = run(...(budget ? ['--budget', String(budget)] : []));
      assert.equal(r.status, 0, r.stderr);
      const out = JSON.parse(r.stdout) as { ids: number[]; budget: number; kept: { prefixChars: number; suffixChars: number } };
      assert.equal(out.budget, budget ?? 1024);
      assert.ok(out.ids.length <= out.budget && out.ids.length > out.budget * 0.8, `${out.ids.length} tokens for a budget of ${out.budget}`);
      // The same cut the editor's Completer makes: the text right before and after the cursor.
      const builder = new PromptBuilder(createTokenizer(readGguf(vocab)));
      const fitted = fitContext(doc.slice(0, cut), doc.slice(cut), out.budget, builder.overheadTokens, (t) => builder.encodePart(t, true).length);
      assert.deepEqual(out.ids, builder.build(fitted.prefix, fitted.suffix).ids);
      assert.ok(out.kept.prefixChars < cut && out.kept.suffixChars < doc.length - cut);
    }
  } finally { cleanup(); }
});
