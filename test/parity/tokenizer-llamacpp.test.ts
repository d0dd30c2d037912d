// Parity with llama.cpp itself (the build node-llama-cpp ships): the same GGUF vocabularies
// tokenized by both, on seeded random texts that mix code, scripts, whitespace kinds, digits,
// emoji and special-token texts, with and without special-token parsing. Vocabularies are also
// rewritten with other metadata (below), so every pre-tokenizer family is checked too.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { GgufValueType, readGguf, writeGguf, type GgufArray, type GgufValue } from '../../engine/model/gguf';
import { createTokenizer } from '../../engine/model/tokenizer';

const SHARED = resolve(__dirname, '../../../shared');
const VOCAB_DIR = join(SHARED, 'vocab');

interface PeerModel {
  tokenize(text: string, specialTokens?: boolean): readonly number[];
  dispose(): Promise<void>;
}
interface Peer {
  loadModel(opts: { modelPath: string; vocabOnly: boolean }): Promise<PeerModel>;
}

let peer: Peer | undefined;
let peerProblem = '';
let workDir = '';

before(async () => {
  if (!existsSync(VOCAB_DIR)) { peerProblem = `${VOCAB_DIR} is absent`; return; }
  try {
    // node-llama-cpp is ESM-only; a dynamic import loads it from this CommonJS test.
    const { getLlama } = await import('node-llama-cpp');
    // The peer logs a harmless 'missing tensor' error per vocab-only load; it is not ours to show.
    peer = (await getLlama({ gpu: false, build: 'never', logger: () => undefined })) as unknown as Peer;
  } catch (err) {
    peerProblem = `node-llama-cpp cannot load here: ${err instanceof Error ? err.message : String(err)}`;
  }
  workDir = mkdtempSync(join(tmpdir(), 'fulcrum-tok-'));
});

after(() => {
  if (workDir) rmSync(workDir, { recursive: true, force: true });
});

/** Deterministic pseudo-random texts built from fragments that stress the pre-tokenizers. */
function randomTexts(seed: number, count: number): string[] {
  let state = seed;
  const rnd = (): number => {
    state = (Math.imul(state, 1103515245) + 12345) & 0x7fffffff;
    return state / 0x7fffffff;
  };
  const pools = [
    'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ', '0123456789', '!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~',
    ' ', '  ', '\t', '\n', '\r\n', '\r', '\v\f', '\u00a0', '\u3000', '\u0085', '\u2009', '\ufeff', '\u200b',
    'éàüßçñøÆŒµ', '½²³①٣', '生活的真谛是', 'こんにちはカタカナ', '한국어', 'Привет', 'مرحبا', 'नमस्ते',
    '🦙😀👍🏽🇩🇪', '\u0301\u0308', "'s", "'LL", "'ve", "'D", '！，。、…', '‘’“”', '▁', 'Ġ', 'õ÷ÿ',
    '<s>', '</s>', '<unk>', '<|endoftext|>', '<fim_prefix>', '<fim_middle>', '<｜fim▁begin｜>', '<|EOT|>', '<pad>', '<0x41>', '<|user|>', '<|end|>\n', '<|assistant|> ',
    'function', ' return', '    ', '(){', '});', '=>', '// comment', '#include <x.h>', 'self.x', '1234567', '3.14159',
  ];
  const texts: string[] = [];
  for (let t = 0; t < count; t++) {
    let s = '';
    const parts = 1 + Math.floor(rnd() * 14);
    for (let i = 0; i < parts; i++) {
      const pool = pools[Math.floor(rnd() * pools.length)]!;
      if (pool.length > 3 && rnd() < 0.5) {
        const chars = [...pool];
        const at = Math.floor(rnd() * chars.length);
        s += chars.slice(at, at + 1 + Math.floor(rnd() * 3)).join('');
      } else {
        s += pool;
      }
    }
    texts.push(s);
  }
  return texts;
}

const CODE_SAMPLE = `import numpy as np\n\ndef f(x: int) -> int:\n    """Doc."""\n    return x ** 2  # square\n\nclass A:\n\tpass\n\nconst y = (a, b) => { return a+b; };\n#include <stdio.h>\nint main(void) {\n  printf("%d\\n", 42);\n}\n`;

async function compare(path: string, texts: string[], parseSpecialToo: boolean): Promise<string[]> {
  const model = await peer!.loadModel({ modelPath: path, vocabOnly: true });
  try {
    const tokenizer = createTokenizer(readGguf(path));
    const diffs: string[] = [];
    for (const text of texts) {
      for (const parseSpecial of parseSpecialToo ? [false, true] : [false]) {
        const expected = [...model.tokenize(text, parseSpecial)].map(Number).join(' ');
        const got = tokenizer.encode(text, { addBos: false, addEos: false, parseSpecial }).join(' ');
        if (got !== expected) diffs.push(`${JSON.stringify(text)} (parseSpecial ${parseSpecial})\n  got      ${got}\n  llama.cpp ${expected}`);
      }
    }
    return diffs;
  } finally {
    await model.dispose();
  }
}

const files = ['ggml-vocab-llama-spm.gguf', 'ggml-vocab-gpt-2.gguf', 'ggml-vocab-deepseek-coder.gguf', 'ggml-vocab-starcoder.gguf']
  .map((f) => join(VOCAB_DIR, f))
  .concat(join(SHARED, 'models', 'stories260K.gguf'));

for (const path of files) {
  test(`same ids as llama.cpp: ${path.split('/').pop()}`, async (t) => {
    if (!peer) return t.skip(peerProblem);
    const texts = [CODE_SAMPLE, ...randomTexts(7, 400)];
    const diffs = await compare(path, texts, true);
    t.diagnostic(`${texts.length * 2 - diffs.length}/${texts.length * 2} texts match`);
    assert.deepEqual(diffs.slice(0, 5), [], `${diffs.length} texts differ`);
  });
}

// One `tokenizer.ggml.pre` name per pre-tokenizer family (the brief's list), written over the
// GPT-2 vocabulary; plus SentencePiece variants: no space prefix, and a Phi-3 model name (whose
// special tokens swallow the whitespace after them in llama.cpp).
const VARIANTS: Array<{ label: string; source: string; set: Record<string, string | boolean>; append?: Array<[string, number]> }> = [
  ...['default', 'gpt-2', 'mpt', 'llama-bpe', 'llama3', 'dbrx', 'qwen2', 'deepseek-coder', 'deepseek-llm', 'starcoder', 'refact', 'falcon', 'bloom', 'viking']
    .map((pre) => ({ label: `pre=${pre}`, source: 'ggml-vocab-gpt-2.gguf', set: { 'tokenizer.ggml.pre': pre } })),
  { label: 'SPM without space prefix', source: 'ggml-vocab-llama-spm.gguf', set: { 'tokenizer.ggml.add_space_prefix': false } },
  // llama.cpp requires '<|endoftext|>' in a Phi-3 vocabulary; Phi-3 appends it and its chat tokens.
  {
    label: 'SPM named Phi-3',
    source: 'ggml-vocab-llama-spm.gguf',
    set: { 'general.name': 'Phi-3-mini-4k-instruct' },
    append: [['<|endoftext|>', 3], ['<|assistant|>', 3], ['<|end|>', 3], ['<|user|>', 4]],
  },
];

/** Appends tokens (text, GGUF token type) to the tokens, scores and token_type arrays. */
function appendTokens(kv: Array<{ key: string; type: GgufValueType; value: GgufValue }>, extra: Array<[string, number]>): void {
  const arrays: Record<string, (t: [string, number]) => GgufValue> = {
    'tokenizer.ggml.tokens': ([text]) => text,
    'tokenizer.ggml.scores': () => 0,
    'tokenizer.ggml.token_type': ([, type]) => type,
  };
  for (const e of kv) {
    const make = arrays[e.key];
    if (make) {
      const arr = e.value as GgufArray;
      e.value = { itemType: arr.itemType, items: [...arr.items, ...extra.map(make)] };
    }
  }
}

test('pre-tokenizers and SentencePiece variants match llama.cpp (metadata rewritten)', async (t) => {
  if (!peer) return t.skip(peerProblem);
  const texts = [CODE_SAMPLE, ...randomTexts(11, 150)];
  const failures: string[] = [];
  for (const variant of VARIANTS) {
    const source = readGguf(join(VOCAB_DIR, variant.source));
    const kv: Array<{ key: string; type: GgufValueType; value: GgufValue }> = [...source.kv.values()]
      .filter((e) => !(e.key in variant.set))
      .map((e) => ({ key: e.key, type: e.type, value: e.value }));
    for (const [key, value] of Object.entries(variant.set)) {
      kv.push({ key, type: typeof value === 'boolean' ? GgufValueType.BOOL : GgufValueType.STRING, value });
    }
    if (variant.append) appendTokens(kv, variant.append);
    const path = join(workDir, `${variant.label.replace(/[^a-z0-9-]+/gi, '_')}.gguf`);
    writeGguf(path, { kv, tensors: [] });
    const diffs = await compare(path, texts, true);
    t.diagnostic(`${variant.label}: ${texts.length * 2 - diffs.length}/${texts.length * 2}`);
    if (diffs.length > 0) failures.push(`${variant.label}: ${diffs.length} differ, first: ${diffs[0]}`);
  }
  assert.deepEqual(failures, []);
});
