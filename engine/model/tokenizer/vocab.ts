// The vocabulary of a GGUF file, read from its `tokenizer.ggml.*` metadata: token texts,
// scores, attributes, special token ids and the encoding flags, with the defaults and the
// text-based detection of special tokens that llama.cpp applies (so a file llama.cpp reads
// the same way tokenizes the same way here).

import {
  GgufMetadataError,
  metaOptionalBool,
  metaOptionalNumberArray,
  metaOptionalString,
  metaOptionalStringArray,
  metaStringArray,
  type GgufFile,
} from '../gguf';
import { LLAMA3_STYLE_PRES } from './pretokenize';
import { attrFromTokenType, TokenAttr } from './token-attrs';

export type TokenizerModel = 'llama' | 'gpt2';

export interface Vocab {
  readonly file: string;
  readonly model: TokenizerModel;
  /** `tokenizer.ggml.pre`, 'default' when absent. */
  readonly pre: string;
  readonly tokens: readonly string[];
  readonly scores: Float32Array;
  /** TokenAttr flags per token. */
  readonly attrs: Uint16Array;
  readonly tokenToId: ReadonlyMap<string, number>;
  /** Byte-level BPE merges: "left right" → rank (lower merges first). Empty for SPM. */
  readonly mergeRanks: ReadonlyMap<string, number>;
  readonly bos: number | undefined;
  readonly eos: number | undefined;
  readonly eot: number | undefined;
  readonly eom: number | undefined;
  readonly unk: number | undefined;
  readonly pad: number | undefined;
  readonly fimPre: number | undefined;
  readonly fimSuf: number | undefined;
  readonly fimMid: number | undefined;
  readonly fimPad: number | undefined;
  readonly fimRep: number | undefined;
  readonly fimSep: number | undefined;
  /** End-of-generation tokens (eos, eot, eom, FIM pad/repo/file-separator, known end texts). */
  readonly eog: ReadonlySet<number>;
  readonly addBos: boolean;
  readonly addEos: boolean;
  readonly addSpacePrefix: boolean;
}

const KEY = {
  model: 'tokenizer.ggml.model',
  pre: 'tokenizer.ggml.pre',
  tokens: 'tokenizer.ggml.tokens',
  scores: 'tokenizer.ggml.scores',
  tokenType: 'tokenizer.ggml.token_type',
  merges: 'tokenizer.ggml.merges',
  addBos: 'tokenizer.ggml.add_bos_token',
  addEos: 'tokenizer.ggml.add_eos_token',
  addSpacePrefix: 'tokenizer.ggml.add_space_prefix',
} as const;

// Texts that mark special tokens when the metadata does not name them (llama.cpp's lists; the
// first text found in list order wins, which keeps the choice deterministic).
const EOT_TEXTS = ['<|eot_id|>', '<|im_end|>', '<|end|>', '<end_of_turn>', '<|endoftext|>', '<|end_of_text|>', '<EOT>', '_<EOT>', '<｜end▁of▁sentence｜>', '<end_of_utterance>'];
const EOM_TEXTS = ['<|eom_id|>'];
const FIM_PRE_TEXTS = ['<|fim_prefix|>', '<fim-prefix>', '<fim_prefix>', '<｜fim▁begin｜>', '<PRE>', '▁<PRE>', '<|code_prefix|>', '<|prefix|>'];
const FIM_SUF_TEXTS = ['<|fim_suffix|>', '<fim-suffix>', '<fim_suffix>', '<｜fim▁hole｜>', '<SUF>', '▁<SUF>', '<|code_suffix|>', '<|suffix|>'];
const FIM_MID_TEXTS = ['<|fim_middle|>', '<fim-middle>', '<fim_middle>', '<｜fim▁end｜>', '<MID>', '▁<MID>', '<|code_middle|>', '<|middle|>'];
const FIM_PAD_TEXTS = ['<|fim_pad|>', '<fim-pad>', '<fim_pad>', '<PAD>'];
const FIM_REP_TEXTS = ['<|fim_repo|>', '<|repo_name|>', '<fim-repo>', '<REPO>', '<reponame>'];
const FIM_SEP_TEXTS = ['<|file_sep|>'];
// Texts that end generation (and are made control tokens), as llama.cpp lists them.
const EOG_TEXTS = ['<|eot_id|>', '<|im_end|>', '<|end|>', '<end_of_turn>', '<|endoftext|>', '<|eom_id|>', '<EOT>', '_<EOT>', '<|end_of_text|>', '<end_of_utterance>'];
// DeepSeek-Coder-Instruct ends a turn with '<|EOT|>', which llama.cpp's list lacks. It also ends
// generation here, but keeps its user-defined type: llama.cpp cuts it out of plain text as a
// user-defined token, and encoding must stay identical.
const EOG_TEXTS_KEEP_TYPE = ['<|EOT|>'];

function tokenIdKey(name: string): string {
  return `tokenizer.ggml.${name}_token_id`;
}

/** Reads the vocabulary; throws GgufMetadataError naming the file and key on bad metadata. */
export function loadVocab(file: GgufFile): Vocab {
  const modelName = metaOptionalString(file, KEY.model);
  if (modelName === undefined) throw new GgufMetadataError(file.path, KEY.model, 'required key is missing (the file has no tokenizer)');
  if (modelName !== 'llama' && modelName !== 'gpt2') {
    throw new GgufMetadataError(file.path, KEY.model, `unsupported tokenizer model '${modelName}' (supported: llama = SentencePiece, gpt2 = byte-level BPE)`);
  }
  const model: TokenizerModel = modelName;
  const pre = metaOptionalString(file, KEY.pre) || 'default';

  const rawTokens = metaStringArray(file, KEY.tokens);
  const n = rawTokens.length;
  if (n === 0) throw new GgufMetadataError(file.path, KEY.tokens, 'the token list is empty');

  const tokens: string[] = new Array<string>(n);
  const tokenToId = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    // An empty token text can never be matched; llama.cpp renames it the same way.
    const text = rawTokens[i] === '' ? `[EMPTY_${i}]` : rawTokens[i]!;
    const prev = tokenToId.get(text);
    if (prev !== undefined) {
      throw new GgufMetadataError(file.path, KEY.tokens, `duplicate token ${JSON.stringify(text)} at ids ${prev} and ${i}`);
    }
    tokenToId.set(text, i);
    tokens[i] = text;
  }

  const scores = new Float32Array(n);
  const rawScores = metaOptionalNumberArray(file, KEY.scores);
  if (rawScores) {
    if (rawScores.length < n) throw new GgufMetadataError(file.path, KEY.scores, `has ${rawScores.length} entries for ${n} tokens`);
    for (let i = 0; i < n; i++) scores[i] = rawScores[i]!;
  }

  const attrs = new Uint16Array(n).fill(TokenAttr.NORMAL);
  const rawTypes = metaOptionalNumberArray(file, KEY.tokenType);
  if (rawTypes) {
    if (rawTypes.length < n) throw new GgufMetadataError(file.path, KEY.tokenType, `has ${rawTypes.length} entries for ${n} tokens`);
    for (let i = 0; i < n; i++) attrs[i] = attrFromTokenType(rawTypes[i]!);
  }

  const mergeRanks = new Map<string, number>();
  if (model === 'gpt2') {
    const merges = metaOptionalStringArray(file, KEY.merges);
    if (!merges) throw new GgufMetadataError(file.path, KEY.merges, 'required for a byte-level BPE (gpt2) tokenizer, but missing');
    merges.forEach((merge, rank) => {
      // "left right", split at the first space after the first character; the first listing
      // of a pair keeps its rank.
      const at = merge.indexOf(' ', 1);
      const key = at < 0 ? '' : merge;
      if (at >= 0 && !mergeRanks.has(key)) mergeRanks.set(key, rank);
    });
  }

  // Ids named in metadata; out-of-range ids are ignored (the default stays), as llama.cpp does.
  const idFromMeta = (name: string, fallback: number | undefined): number | undefined => {
    const arr = file.kv.get(tokenIdKey(name));
    if (!arr) return fallback;
    const v = arr.value;
    const id = typeof v === 'bigint' ? Number(v) : v;
    if (typeof id !== 'number' || !Number.isInteger(id)) {
      throw new GgufMetadataError(file.path, tokenIdKey(name), `expected an integer token id (entry at byte ${arr.offset})`);
    }
    return id >= 0 && id < n ? id : fallback;
  };
  const inRange = (id: number): number | undefined => (id < n ? id : undefined);
  // Defaults: SentencePiece files conventionally use <unk>=0, <s>=1, </s>=2.
  const spm = model === 'llama';
  const bos = idFromMeta('bos', spm ? inRange(1) : undefined);
  const eos = idFromMeta('eos', spm ? inRange(2) : undefined);
  const unk = idFromMeta('unknown', spm ? inRange(0) : undefined);
  const pad = idFromMeta('padding', undefined);
  let eot = idFromMeta('eot', undefined);
  let eom = idFromMeta('eom', undefined);
  let fimPre = idFromMeta('fim_pre', idFromMeta('prefix', undefined));
  let fimSuf = idFromMeta('fim_suf', idFromMeta('suffix', undefined));
  let fimMid = idFromMeta('fim_mid', idFromMeta('middle', undefined));
  let fimPad = idFromMeta('fim_pad', undefined);
  let fimRep = idFromMeta('fim_rep', undefined);
  let fimSep = idFromMeta('fim_sep', undefined);

  // A token found by its text is made a control token, so it is never produced from plain text
  // and never rendered as text.
  const findByText = (texts: readonly string[]): number | undefined => {
    for (const t of texts) {
      const id = tokenToId.get(t);
      if (id !== undefined) {
        attrs[id] = attrs[id]! | TokenAttr.CONTROL;
        return id;
      }
    }
    return undefined;
  };
  eot ??= findByText(EOT_TEXTS);
  eom ??= findByText(EOM_TEXTS);
  fimPre ??= findByText(FIM_PRE_TEXTS);
  fimSuf ??= findByText(FIM_SUF_TEXTS);
  fimMid ??= findByText(FIM_MID_TEXTS);
  fimPad ??= findByText(FIM_PAD_TEXTS);
  fimRep ??= findByText(FIM_REP_TEXTS);
  fimSep ??= findByText(FIM_SEP_TEXTS);

  const eog = new Set<number>();
  for (const id of [eos, eot, eom, fimPad, fimRep, fimSep]) if (id !== undefined) eog.add(id);
  for (const t of EOG_TEXTS) {
    const id = tokenToId.get(t);
    if (id !== undefined) {
      eog.add(id);
      attrs[id] = attrs[id]! | TokenAttr.CONTROL;
    }
  }
  for (const t of EOG_TEXTS_KEEP_TYPE) {
    const id = tokenToId.get(t);
    if (id !== undefined) eog.add(id);
  }

  // Flags: SentencePiece adds BOS and a leading space by default; byte-level BPE adds neither,
  // except the Llama-3 family, whose pre-tokenizer implies BOS. Metadata overrides.
  const llama3 = !spm && LLAMA3_STYLE_PRES.has(pre);
  const addBos = metaOptionalBool(file, KEY.addBos) ?? (spm || llama3);
  const addEos = metaOptionalBool(file, KEY.addEos) ?? false;
  const addSpacePrefix = metaOptionalBool(file, KEY.addSpacePrefix) ?? spm;
  if (addBos && bos === undefined) throw new GgufMetadataError(file.path, KEY.addBos, 'is true, but the file names no BOS token (tokenizer.ggml.bos_token_id)');
  if (addEos && eos === undefined) throw new GgufMetadataError(file.path, KEY.addEos, 'is true, but the file names no EOS token (tokenizer.ggml.eos_token_id)');

  // Phi-3's converted files mark special tokens as swallowing the whitespace to their right;
  // llama.cpp recognises them by model name, and so do we.
  const name = (metaOptionalString(file, 'general.name') ?? '').toLowerCase();
  if (name.includes('phi-3') || name.includes('phi3')) {
    for (let i = 0; i < n; i++) {
      if (attrs[i]! & (TokenAttr.CONTROL | TokenAttr.USER_DEFINED | TokenAttr.UNKNOWN)) attrs[i] = attrs[i]! | TokenAttr.RSTRIP;
    }
    const set = (text: string, on: boolean): void => {
      const id = tokenToId.get(text);
      if (id !== undefined) attrs[id] = on ? attrs[id]! | TokenAttr.RSTRIP : attrs[id]! & ~TokenAttr.RSTRIP;
    };
    set('</s>', true);
    for (const t of ['<unk>', '<s>', '<|endoftext|>']) set(t, false);
  }

  return {
    file: file.path, model, pre, tokens, scores, attrs, tokenToId, mergeRanks,
    bos, eos, eot, eom, unk, pad, fimPre, fimSuf, fimMid, fimPad, fimRep, fimSep, eog,
    addBos, addEos, addSpacePrefix,
  };
}
