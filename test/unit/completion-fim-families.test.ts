// FIM order, spacing and stop tokens of the families without a vocabulary in ../shared
// (Qwen2.5-Coder, CodeLlama, Codestral): each is tested on a real vocabulary (GPT-2's byte-level
// BPE, Llama's SentencePiece) with the family's special tokens appended as control tokens, as
// the families' own GGUF files carry them. The text parts must be the base vocabulary's own
// tokenization, in the family's order.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { readGguf, writeGguf, type GgufValue, type GgufValueType, type GgufWriteKv } from '../../engine/model/gguf';
import { createTokenizer, type Tokenizer } from '../../engine/model/tokenizer';
import { PromptBuilder } from '../../engine/completion/prompt';
import { sharedPath, skipUnlessShared, tempDir } from '../helpers/shared';

const CONTROL = 3;
const GPT2 = sharedPath('vocab', 'ggml-vocab-gpt-2.gguf');
const SPM = sharedPath('vocab', 'ggml-vocab-llama-spm.gguf');

/** A vocab-only GGUF: `base`'s tokenizer with `extra` control tokens appended; returns it and the base tokenizer. */
function withSpecialTokens(base: string, extra: string[], dir: string, name: string): { file: string; baseTokenizer: Tokenizer; firstId: number } {
  const src = readGguf(base);
  const kvs: GgufWriteKv[] = [...src.kv.values()].filter((kv) => kv.key.startsWith('tokenizer.') || kv.key === 'general.architecture')
    .map(({ key, type, value }) => ({ key, type, value }));
  let firstId = 0;
  for (const kv of kvs) {
    const arr = kv.value as { itemType: GgufValueType; items: GgufValue[] };
    if (kv.key === 'tokenizer.ggml.tokens') { firstId = arr.items.length; kv.value = { itemType: arr.itemType, items: [...arr.items, ...extra] }; }
    if (kv.key === 'tokenizer.ggml.scores') kv.value = { itemType: arr.itemType, items: [...arr.items, ...extra.map(() => 0)] };
    if (kv.key === 'tokenizer.ggml.token_type') kv.value = { itemType: arr.itemType, items: [...arr.items, ...extra.map(() => CONTROL)] };
  }
  if (!kvs.some((kv) => kv.key === 'tokenizer.ggml.token_type')) throw new Error(`${base} has no token types`);
  const file = `${dir}/${name}.gguf`;
  writeGguf(file, { kv: kvs, tensors: [] });
  return { file, baseTokenizer: createTokenizer(src), firstId };
}

const PREFIX = 'def add(a, b):\n    ';
const SUFFIX = '\n\nprint(add(1, 2))\n';

describe('FIM families on real vocabularies with their special tokens', () => {
  const scratch = tempDir('fulcrum-fim-');
  after(() => scratch.cleanup());

  test('Qwen2.5-Coder: <|fim_prefix|>P<|fim_suffix|>S<|fim_middle|>, stops at <|endoftext|>, <|file_sep|>, <|fim_pad|>', { skip: skipUnlessShared(GPT2) }, () => {
    const extra = ['<|fim_prefix|>', '<|fim_middle|>', '<|fim_suffix|>', '<|fim_pad|>', '<|repo_name|>', '<|file_sep|>', '<|im_end|>'];
    const { file, baseTokenizer, firstId } = withSpecialTokens(GPT2, extra, scratch.dir, 'qwen');
    const builder = new PromptBuilder(createTokenizer(readGguf(file)));
    const [pre, mid, suf, pad, repo, sep, imEnd] = extra.map((_, i) => firstId + i) as [number, number, number, number, number, number, number];
    assert.equal(builder.fim?.family, 'qwen2.5-coder');
    const enc = (t: string) => baseTokenizer.encode(t, { addBos: false });
    assert.deepEqual(builder.build(PREFIX, SUFFIX).ids, [pre, ...enc(PREFIX), suf, ...enc(SUFFIX), mid]);
    const eot = baseTokenizer.tokenId('<|endoftext|>')!;
    for (const id of [eot, pad, repo, sep, imEnd]) assert.ok(builder.fim!.stopIds.has(id), `stop ${id}`);
    // Extra context names its file after <|file_sep|>, as Qwen2.5-Coder's repository format does.
    assert.deepEqual(builder.encodeExtra([{ name: 'util.py', text: 'X = 1' }]), [sep, ...enc('util.py\nX = 1\n')]);
  });

  test('CodeGemma: <|fim_prefix|>P<|fim_suffix|>S<|fim_middle|> without the SentencePiece space, stops at <|file_separator|>; not taken for Qwen', { skip: skipUnlessShared(SPM) }, () => {
    const extra = ['<|fim_prefix|>', '<|fim_middle|>', '<|fim_suffix|>', '<|file_separator|>', '<end_of_turn>'];
    const { file, baseTokenizer, firstId } = withSpecialTokens(SPM, extra, scratch.dir, 'codegemma');
    // Gemma's tokenizer puts no dummy space before the text (add_space_prefix false).
    const g = readGguf(file);
    const kvs = [...g.kv.values()].filter((kv) => kv.key !== 'tokenizer.ggml.add_space_prefix').map(({ key, type, value }) => ({ key, type, value }));
    kvs.push({ key: 'tokenizer.ggml.add_space_prefix', type: 7 as GgufValueType, value: false });
    const gemmaFile = `${scratch.dir}/codegemma-nospace.gguf`;
    writeGguf(gemmaFile, { kv: kvs, tensors: [] });
    const builder = new PromptBuilder(createTokenizer(readGguf(gemmaFile)));
    const [pre, mid, suf, sep, eot] = extra.map((_, i) => firstId + i) as [number, number, number, number, number];
    assert.equal(builder.fim?.family, 'codegemma');
    const enc = (t: string) => baseTokenizer.encode(t, { addBos: false, addSpacePrefix: false });
    const bos = baseTokenizer.bos!;
    assert.deepEqual(builder.build(PREFIX, SUFFIX).ids, [bos, pre, ...enc(PREFIX), suf, ...enc(SUFFIX), mid]);
    for (const id of [sep, eot]) assert.ok(builder.fim!.stopIds.has(id), `stop ${id}`);
    // Other files of the repository follow <|file_separator|> with their path.
    assert.deepEqual(builder.encodeExtra([{ name: 'util.py', text: 'X = 1' }]), [sep, ...enc('util.py\nX = 1\n')]);
  });

  test('CodeLlama: ▁<PRE> " P" ▁<SUF> "S" ▁<MID> (the prefix keeps the SentencePiece space, the suffix not), stops at ▁<EOT>', { skip: skipUnlessShared(SPM) }, () => {
    const extra = ['▁<PRE>', '▁<SUF>', '▁<MID>', '▁<EOT>'];
    const { file, baseTokenizer, firstId } = withSpecialTokens(SPM, extra, scratch.dir, 'codellama');
    const builder = new PromptBuilder(createTokenizer(readGguf(file)));
    const [pre, suf, mid, eot] = extra.map((_, i) => firstId + i) as [number, number, number, number];
    assert.equal(builder.fim?.family, 'codellama');
    const withSpace = baseTokenizer.encode(PREFIX, { addBos: false });
    const noSpace = baseTokenizer.encode(SUFFIX, { addBos: false, addSpacePrefix: false });
    assert.notDeepEqual(withSpace.slice(0, 1), baseTokenizer.encode(PREFIX, { addBos: false, addSpacePrefix: false }).slice(0, 1),
      'the space makes a difference to the first token');
    assert.deepEqual(builder.build(PREFIX, SUFFIX).ids, [1, pre, ...withSpace, suf, ...noSpace, mid]);
    assert.ok(builder.fim!.stopIds.has(eot) && builder.fim!.stopIds.has(2));
  });

  test('Codestral: [SUFFIX]S[PREFIX]P (suffix first, no middle token), stops at [PREFIX] / [SUFFIX]', { skip: skipUnlessShared(SPM) }, () => {
    const extra = ['[PREFIX]', '[SUFFIX]', '[MIDDLE]'];
    const { file, baseTokenizer, firstId } = withSpecialTokens(SPM, extra, scratch.dir, 'codestral');
    const builder = new PromptBuilder(createTokenizer(readGguf(file)));
    const [pre, suf, mid] = extra.map((_, i) => firstId + i) as [number, number, number];
    assert.equal(builder.fim?.family, 'codestral');
    assert.equal(builder.fim?.order, 'spm');
    const enc = (t: string) => baseTokenizer.encode(t, { addBos: false });
    assert.deepEqual(builder.build(PREFIX, SUFFIX).ids, [1, suf, ...enc(SUFFIX), pre, ...enc(PREFIX)]);
    for (const id of [pre, suf, mid]) assert.ok(builder.fim!.stopIds.has(id));
    assert.equal(builder.overheadTokens, 3);
  });
});
