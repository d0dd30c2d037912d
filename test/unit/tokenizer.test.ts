// Tokenizer behaviour beyond the test vectors: decoding and round trips, streaming partial
// UTF-8, special tokens, BOS/EOS, the stories260K SentencePiece vocabulary, and bad metadata.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { GgufMetadataError, GgufValueType, readGguf, type GgufFile, type GgufKv, type GgufValue } from '../../engine/model/gguf';
import { createTokenizer, type Tokenizer } from '../../engine/model/tokenizer';
import { incompleteTailLength, Utf8StreamDecoder } from '../../engine/model/tokenizer/utf8-stream';

const SHARED = resolve(__dirname, '../../../shared');
const VOCAB = (name: string): string => join(SHARED, 'vocab', `ggml-vocab-${name}.gguf`);
const STORIES = join(SHARED, 'models', 'stories260K.gguf');
const skip = existsSync(join(SHARED, 'vocab')) && existsSync(STORIES) ? false : `${SHARED} (vocab/, models/stories260K.gguf) is absent`;

const cache = new Map<string, GgufFile>();
function gguf(path: string): GgufFile {
  let f = cache.get(path);
  if (!f) { f = readGguf(path); cache.set(path, f); }
  return f;
}
const tok = (path: string): Tokenizer => createTokenizer(gguf(path));

/** A copy of a file's metadata with keys replaced (value given) or removed (undefined). */
function withKv(file: GgufFile, changes: Record<string, { type: GgufValueType; value: GgufValue } | undefined>): GgufFile {
  const kv = new Map<string, GgufKv>(file.kv);
  for (const [key, change] of Object.entries(changes)) {
    if (change === undefined) kv.delete(key);
    else kv.set(key, { key, type: change.type, value: change.value, offset: 0 });
  }
  return { ...file, path: `${file.path} (modified)`, kv };
}

/** A small SentencePiece vocabulary built in memory: specials, 256 byte tokens, then `extra`. */
function syntheticSpm(extra: Array<[string, number]>): GgufFile {
  const tokens: Array<[string, number]> = [['<unk>', 2], ['<s>', 3], ['</s>', 3]];
  for (let b = 0; b < 256; b++) tokens.push([`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`, 6]);
  tokens.push(['▁', 1], ...extra);
  const kv = new Map<string, GgufKv>();
  const put = (key: string, type: GgufValueType, value: GgufValue): void => { kv.set(key, { key, type, value, offset: 0 }); };
  put('tokenizer.ggml.model', GgufValueType.STRING, 'llama');
  put('tokenizer.ggml.tokens', GgufValueType.ARRAY, { itemType: GgufValueType.STRING, items: tokens.map(([t]) => t) });
  put('tokenizer.ggml.scores', GgufValueType.ARRAY, { itemType: GgufValueType.FLOAT32, items: tokens.map(() => 0) });
  put('tokenizer.ggml.token_type', GgufValueType.ARRAY, { itemType: GgufValueType.INT32, items: tokens.map(([, t]) => t) });
  return { path: 'synthetic.gguf', version: 3, fileSize: 0, alignment: 32, kv, tensors: [], dataOffset: 0 };
}

const ROUND_TRIP_TEXTS = [
  '', ' ', '\n', '  \n\t ', 'Hello world', ' Hello', '   leading spaces', 'trailing spaces   ',
  'def f(x):\n    return x * 2  # twice\n\n\nclass A:\n\tpass\n',
  'const s = `${a}` + "b";\r\n', 'Äpfel, über, naïve café', '生活的真谛是', 'emoji 🦙😀👍🏽 end', '½ + ³ = ①',
];

describe('tokenizer', { skip }, () => {
  test('stories260K: a 512-token SentencePiece vocabulary', () => {
    const t = tok(STORIES);
    assert.equal(t.model, 'llama');
    assert.equal(t.vocabSize, 512);
    assert.equal(t.bos, 1);
    assert.equal(t.eos, 2);
    assert.equal(t.addBos, true);
    assert.equal(t.addEos, false);
    assert.equal(t.fim, undefined);
    // Ids llama.cpp gives (checked against it in tokenizer-llamacpp.test.ts).
    const ids = t.encode('Once upon a time');
    assert.deepEqual(ids.map((id) => t.tokenText(id)), ['<s>', '▁Once', '▁upon', '▁a', '▁time']);
    assert.deepEqual(ids, [1, 403, 407, 261, 378]);
    // A character the vocabulary lacks falls back to its UTF-8 bytes.
    assert.deepEqual(t.encode('🦙', { addBos: false }).map((id) => t.tokenText(id)), ['▁', '<0xF0>', '<0x9F>', '<0xA6>', '<0x99>']);
    assert.equal(t.isEog(2), true);
    assert.equal(t.isControl(1), true);
    assert.equal(t.isControl(403), false);
  });

  for (const name of ['llama-spm', 'gpt-2', 'deepseek-coder', 'starcoder', 'stories260K']) {
    test(`decode(encode(text)) gives the text back: ${name}`, () => {
      const t = tok(name === 'stories260K' ? STORIES : VOCAB(name));
      for (const text of ROUND_TRIP_TEXTS) {
        for (const addBos of [false, true]) {
          if (addBos && t.bos === undefined) continue;
          assert.equal(t.decode(t.encode(text, { addBos })), text, `${name}, addBos ${addBos}: ${JSON.stringify(text)}`);
        }
      }
    });
  }

  test('SentencePiece decoding drops only the space that encoding added', () => {
    const t = tok(VOCAB('llama-spm'));
    assert.deepEqual(t.encode('Hello world'), [1, 15043, 3186]);
    assert.equal(t.decode([1, 15043, 3186]), 'Hello world');
    assert.equal(t.decode([15043, 3186]), 'Hello world');
    // A piece later in the sequence keeps its space; so does a text that began with one.
    assert.equal(t.decode([3186, 3186]), 'world world');
    assert.equal(t.decode(t.encode(' x')), ' x');
    // '▁' in the input is SentencePiece's space: it comes back as a space (as in SentencePiece itself).
    assert.equal(t.decode(t.encode('a▁b')), 'a b');
  });

  test('control tokens decode to nothing unless rendered', () => {
    const t = tok(VOCAB('starcoder'));
    assert.equal(t.decode([1, 125]), 'x');
    assert.equal(t.decode([1, 125], { renderSpecial: true }), '<fim_prefix>x');
    assert.equal(t.tokenText(1), '<fim_prefix>');
    assert.throws(() => t.decode([49152]), /token id 49152 is outside the vocabulary \(0\.\.49151\)/);
    assert.throws(() => t.tokenText(-1), RangeError);
  });

  test('stream decoder holds back split UTF-8 characters (SentencePiece byte tokens)', () => {
    const t = tok(VOCAB('llama-spm'));
    const ids = t.encode('a🦙b', { addBos: false });
    assert.deepEqual(ids.map((id) => t.tokenText(id)), ['▁a', '<0xF0>', '<0x9F>', '<0xA6>', '<0x99>', 'b']);
    const stream = t.createStreamDecoder();
    assert.deepEqual(ids.map((id) => stream.push(id)), [' a', '', '', '', '🦙', 'b']);
    assert.equal(stream.flush(), '');
    // Cut short: the incomplete character comes out as U+FFFD on flush.
    const cut = t.createStreamDecoder();
    assert.equal(cut.push(ids[1]!), '');
    assert.equal(cut.push(ids[2]!), '');
    assert.equal(cut.flush(), '\ufffd');
  });

  test('stream decoder holds back split UTF-8 characters (byte-level BPE pieces)', () => {
    for (const name of ['gpt-2', 'deepseek-coder', 'starcoder']) {
      const t = tok(VOCAB(name));
      const text = 'x = "🦙😀👍🏽 生活"; // ½\n';
      const ids = t.encode(text, { addBos: false });
      const stream = t.createStreamDecoder();
      const chunks = ids.map((id) => stream.push(id));
      assert.equal(chunks.join('') + stream.flush(), text, name);
      for (const c of chunks) assert.ok(!c.includes('\ufffd'), `${name}: a chunk holds a broken character: ${JSON.stringify(chunks)}`);
      assert.ok(chunks.some((c) => c === ''), `${name}: expected at least one token that completes no character`);
    }
  });

  test('UTF-8 stream: incomplete tails, invalid bytes', () => {
    assert.equal(incompleteTailLength(Uint8Array.of(0x61, 0xe2, 0x82)), 2);
    assert.equal(incompleteTailLength(Uint8Array.of(0xe2, 0x82, 0xac)), 0);
    assert.equal(incompleteTailLength(Uint8Array.of(0xf0)), 1);
    assert.equal(incompleteTailLength(Uint8Array.of(0xe0, 0x80)), 0, 'E0 80 can never complete');
    assert.equal(incompleteTailLength(Uint8Array.of(0xff)), 0);
    const d = new Utf8StreamDecoder();
    assert.equal(d.push(Uint8Array.of(0xe2)), '');
    assert.equal(d.push(Uint8Array.of(0x82)), '');
    assert.equal(d.push(Uint8Array.of(0xac, 0x21)), '€!');
    assert.equal(d.push(Uint8Array.of(0xff, 0x41)), '\ufffdA');
    assert.equal(d.push(Uint8Array.of(0xf0, 0x9f)), '');
    assert.equal(d.flush(), '\ufffd');
    assert.equal(d.flush(), '');
  });

  test('special tokens: split out with parseSpecial, plain text without', () => {
    const t = tok(VOCAB('starcoder'));
    assert.deepEqual(t.fim, { prefix: 1, suffix: 3, middle: 2 });
    const text = '<fim_prefix>def f():\n    <fim_suffix>\n<fim_middle>';
    const special = t.encode(text, { parseSpecial: true });
    assert.equal(special[0], 1);
    assert.equal(special[special.length - 1], 2);
    assert.ok(special.includes(3));
    const plain = t.encode(text);
    assert.ok(!plain.some((id) => t.isControl(id)), 'no control token comes from plain text');
    assert.equal(t.decode(plain), text);
    // Specials are matched by text anywhere, and the text between them is tokenized normally.
    assert.deepEqual(t.encode('a<fim_prefix>b', { parseSpecial: true }), [...t.encode('a'), 1, ...t.encode('b')]);
  });

  test('DeepSeek-Coder: FIM found by text, user-defined tokens always split out', () => {
    const t = tok(VOCAB('deepseek-coder'));
    assert.deepEqual(t.fim, { prefix: 32016, suffix: 32015, middle: 32017 });
    assert.equal(t.tokenText(32016), '<｜fim▁begin｜>');
    // FIM tokens are user-defined in the file; found by their text they become control tokens.
    assert.equal(t.isControl(32016), true);
    assert.ok(!t.encode('<｜fim▁begin｜>', { addBos: false }).includes(32016));
    assert.deepEqual(t.encode('<｜fim▁begin｜>x', { addBos: false, parseSpecial: true })[0], 32016);
    // Other user-defined tokens (e.g. 'õ' = 32000) are cut out even without special parsing.
    assert.ok(t.encode('aõb', { addBos: false }).includes(32000));
    assert.equal(t.isEog(32014), true);
    assert.equal(t.isEog(32021), true, "'<|EOT|>' ends a DeepSeek-Coder-Instruct turn");
    assert.equal(t.isEog(32016), false);
  });

  test('SentencePiece: a space is added after each special token', () => {
    const t = tok(VOCAB('llama-spm'));
    assert.deepEqual(t.encode('<s>Hello', { addBos: false, parseSpecial: true }), [1, 15043]);
    assert.deepEqual(t.encode('Hi</s>Hello', { addBos: false, parseSpecial: true }).slice(-2), [2, 15043]);
    assert.ok(!t.encode('<s>Hello', { addBos: false }).includes(1));
  });

  test('special texts are cut longest first, each everywhere before the next', () => {
    // llama.cpp's order: 'bcd' (longer) is cut before 'ab' gets a chance, so 'abcd' → 'a' + bcd.
    const file = syntheticSpm([['ab', 4], ['bcd', 4], ['<x>', 3], ['<x><y>', 3]]);
    const t = createTokenizer(file);
    const id = (text: string): number => [...Array(t.vocabSize).keys()].find((i) => t.tokenText(i) === text)!;
    assert.deepEqual(t.encode('abcd', { addBos: false }), [id('▁'), id('<0x61>'), id('bcd')]);
    assert.deepEqual(t.encode('<x><y><x>', { addBos: false, parseSpecial: true }), [id('<x><y>'), id('<x>')]);
    // Without special parsing, control texts stay text (here: byte tokens).
    assert.ok(!t.encode('<x>', { addBos: false }).includes(id('<x>')));
    // A user-defined token decodes to its text.
    assert.equal(t.decode([id('bcd')]), 'bcd');
  });

  test('BOS and EOS follow the metadata and the options', () => {
    const spm = tok(VOCAB('llama-spm'));
    assert.deepEqual(spm.encode(''), [1]);
    assert.deepEqual(spm.encode('', { addBos: false }), []);
    assert.equal(spm.encode('Hi')[0], 1);
    assert.notEqual(spm.encode('Hi', { addBos: false })[0], 1);
    assert.equal(spm.encode('Hi', { addEos: true }).at(-1), 2);
    const gpt2 = tok(VOCAB('gpt-2'));
    assert.equal(gpt2.addBos, false);
    assert.deepEqual(gpt2.encode(''), []);
    assert.deepEqual(gpt2.encode('Hi', { addBos: true }), [50256, 17250]);
    assert.equal(gpt2.eot, 50256);
    assert.equal(gpt2.isEog(50256), true);
    const eosFile = withKv(gguf(VOCAB('llama-spm')), { 'tokenizer.ggml.add_eos_token': { type: GgufValueType.BOOL, value: true } });
    assert.deepEqual(createTokenizer(eosFile).encode('Hello'), [1, 15043, 2]);
    const noBos = withKv(gguf(VOCAB('llama-spm')), { 'tokenizer.ggml.add_bos_token': { type: GgufValueType.BOOL, value: false } });
    assert.deepEqual(createTokenizer(noBos).encode('Hello'), [15043]);
  });

  test('bad metadata: errors name the file and key', () => {
    const spm = gguf(VOCAB('llama-spm'));
    const gpt2 = gguf(VOCAB('gpt-2'));
    const fails = (file: GgufFile, key: string, pattern: RegExp): void => {
      assert.throws(() => createTokenizer(file), (err: unknown) => {
        assert.ok(err instanceof GgufMetadataError, `expected GgufMetadataError, got ${String(err)}`);
        assert.equal(err.key, key);
        assert.match(err.message, pattern);
        assert.ok(err.message.includes('(modified)'), 'names the file');
        return true;
      });
    };
    fails(withKv(spm, { 'tokenizer.ggml.model': undefined }), 'tokenizer.ggml.model', /missing/);
    fails(withKv(spm, { 'tokenizer.ggml.model': { type: GgufValueType.STRING, value: 'bert' } }), 'tokenizer.ggml.model', /unsupported tokenizer model 'bert'/);
    fails(withKv(spm, { 'tokenizer.ggml.tokens': undefined }), 'tokenizer.ggml.tokens', /missing/);
    fails(withKv(spm, { 'tokenizer.ggml.tokens': { type: GgufValueType.STRING, value: 'x' } }), 'tokenizer.ggml.tokens', /expected an array/);
    fails(withKv(spm, { 'tokenizer.ggml.scores': { type: GgufValueType.ARRAY, value: { itemType: GgufValueType.FLOAT32, items: [0, 1] } } }), 'tokenizer.ggml.scores', /2 entries for 32000 tokens/);
    fails(withKv(spm, { 'tokenizer.ggml.tokens': { type: GgufValueType.ARRAY, value: { itemType: GgufValueType.STRING, items: ['a', 'b', 'a'] } } }), 'tokenizer.ggml.tokens', /duplicate token "a" at ids 0 and 2/);
    fails(withKv(gpt2, { 'tokenizer.ggml.merges': undefined }), 'tokenizer.ggml.merges', /missing/);
    fails(withKv(gpt2, { 'tokenizer.ggml.pre': { type: GgufValueType.STRING, value: 'no-such-pre' } }), 'tokenizer.ggml.pre', /unknown pre-tokenizer 'no-such-pre'/);
    fails(withKv(gpt2, { 'tokenizer.ggml.add_bos_token': { type: GgufValueType.BOOL, value: true }, 'tokenizer.ggml.bos_token_id': undefined }), 'tokenizer.ggml.add_bos_token', /names no BOS/);
  });

  test('lone UTF-16 surrogates are encoded as U+FFFD', () => {
    for (const name of ['llama-spm', 'gpt-2']) {
      const t = tok(VOCAB(name));
      assert.deepEqual(t.encode('a\ud800b'), t.encode('a\ufffdb'), name);
      assert.deepEqual(t.encode('\udc00'), t.encode('\ufffd'), name);
      assert.deepEqual(t.encode('🦙'), t.encode('\ud83e\udd99'), name);
    }
  });

  test('a missing `pre` means the default pre-tokenizer; out-of-range special ids are ignored', () => {
    const gpt2 = gguf(VOCAB('gpt-2'));
    const t = createTokenizer(withKv(gpt2, {
      'tokenizer.ggml.pre': undefined,
      'tokenizer.ggml.eos_token_id': { type: GgufValueType.UINT32, value: 4294967295 },
    }));
    assert.equal(t.pre, 'default');
    assert.equal(t.eos, undefined);
    assert.ok(t.encode('Hello, world!').length > 0);
  });
});
