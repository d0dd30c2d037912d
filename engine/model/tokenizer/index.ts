// Tokenizers built from a GGUF file's metadata: SentencePiece (`llama`) and byte-level BPE
// (`gpt2`, with the pre-tokenizer named by `tokenizer.ggml.pre`), encoding as llama.cpp does
// (checked against llama.cpp's test vectors in test/unit/tokenizer-vocab.test.ts).

import type { GgufFile } from '../gguf';
import { BpeEncoder } from './bpe';
import { CHAR_CODE_TO_BYTE } from './byte-unicode';
import { SpecialSplitter } from './special-split';
import { SpmEncoder } from './spm';
import { TokenAttr } from './token-attrs';
import { Utf8StreamDecoder } from './utf8-stream';
import { loadVocab, type TokenizerModel, type Vocab } from './vocab';

export { loadVocab, type Vocab, type TokenizerModel } from './vocab';
export { TokenAttr } from './token-attrs';
export { supportedPreTokenizers } from './pretokenize';

export interface EncodeOptions {
  /** Prepend BOS; default: the file's `add_bos_token` (SentencePiece: true). */
  addBos?: boolean;
  /** Append EOS; default: the file's `add_eos_token` (false when absent). */
  addEos?: boolean;
  /** Turn the texts of control tokens (e.g. `<fim_prefix>`) into those tokens; default false. */
  parseSpecial?: boolean;
  /**
   * SentencePiece only: put the dummy space before the text per the file's add_space_prefix
   * (default true). False encodes the text as it is, as FIM suffixes need.
   */
  addSpacePrefix?: boolean;
}

export interface DecodeOptions {
  /** Render control and unknown tokens as their text instead of nothing; default false. */
  renderSpecial?: boolean;
}

export interface StreamDecoder {
  /** Text completed by this token: only whole UTF-8 characters, the rest is held back. */
  push(id: number): string;
  /** Whatever is held back (an incomplete character becomes U+FFFD). */
  flush(): string;
}

export interface Tokenizer {
  readonly model: TokenizerModel;
  readonly pre: string;
  readonly vocabSize: number;
  readonly bos: number | undefined;
  readonly eos: number | undefined;
  readonly eot?: number;
  readonly unk?: number;
  readonly pad?: number;
  readonly addBos: boolean;
  readonly addEos: boolean;
  readonly fim?: { prefix: number; suffix: number; middle: number };
  encode(text: string, opts?: EncodeOptions): number[];
  /** The whole text of a sequence; for SentencePiece the space added before the first word is removed. */
  decode(ids: number[], opts?: DecodeOptions): string;
  /** The token's text as stored in the vocabulary (▁ or byte-mapped characters included). */
  tokenText(id: number): string;
  isControl(id: number): boolean;
  isEog(id: number): boolean;
  /** The id of the token whose vocabulary text is exactly `text`, if there is one. */
  tokenId(text: string): number | undefined;
  /** For generated text that continues a prompt: pieces are emitted as they are (no space stripped). */
  createStreamDecoder(opts?: DecodeOptions): StreamDecoder;
}

const utf8 = new TextEncoder();
const EMPTY = new Uint8Array(0);
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

class GgufTokenizer implements Tokenizer {
  readonly model: TokenizerModel;
  readonly pre: string;
  readonly vocabSize: number;
  readonly bos: number | undefined;
  readonly eos: number | undefined;
  readonly eot?: number;
  readonly unk?: number;
  readonly pad?: number;
  readonly addBos: boolean;
  readonly addEos: boolean;
  readonly fim?: { prefix: number; suffix: number; middle: number };

  private readonly splitter: SpecialSplitter;
  private readonly spm?: SpmEncoder;
  private readonly bpe?: BpeEncoder;
  /** Decoded bytes per token (control tokens rendered as text), built on first use. */
  private readonly pieces: Array<Uint8Array | undefined>;

  constructor(private readonly vocab: Vocab) {
    this.model = vocab.model;
    this.pre = vocab.pre;
    this.vocabSize = vocab.tokens.length;
    this.bos = vocab.bos;
    this.eos = vocab.eos;
    if (vocab.eot !== undefined) this.eot = vocab.eot;
    if (vocab.unk !== undefined) this.unk = vocab.unk;
    if (vocab.pad !== undefined) this.pad = vocab.pad;
    this.addBos = vocab.addBos;
    this.addEos = vocab.addEos;
    if (vocab.fimPre !== undefined && vocab.fimSuf !== undefined && vocab.fimMid !== undefined) {
      this.fim = { prefix: vocab.fimPre, suffix: vocab.fimSuf, middle: vocab.fimMid };
    }
    this.splitter = new SpecialSplitter(vocab);
    if (vocab.model === 'llama') this.spm = new SpmEncoder(vocab);
    else this.bpe = new BpeEncoder(vocab);
    this.pieces = new Array<Uint8Array | undefined>(this.vocabSize);
  }

  encode(text: string, opts: EncodeOptions = {}): number[] {
    const addBos = opts.addBos ?? this.addBos;
    const addEos = opts.addEos ?? this.addEos;
    const out: number[] = [];
    if (addBos) out.push(this.required(this.bos, 'BOS'));
    const fragments = this.splitter.split(text.replace(LONE_SURROGATE, '\ufffd'), opts.parseSpecial ?? false);
    if (this.spm) {
      // The leading space goes before the text at the start and after every special token.
      let afterSpecial = opts.addSpacePrefix ?? true;
      for (const f of fragments) {
        if ('id' in f) {
          out.push(f.id);
          afterSpecial = true;
          continue;
        }
        const spaced = this.vocab.addSpacePrefix && afterSpecial ? ` ${f.text}` : f.text;
        this.spm.encode(spaced.replaceAll(' ', '\u2581'), out);
        afterSpecial = false;
      }
    } else {
      for (const f of fragments) {
        if ('id' in f) out.push(f.id);
        else this.bpe!.encode(f.text, out);
      }
    }
    if (addEos) out.push(this.required(this.eos, 'EOS'));
    return out;
  }

  decode(ids: number[], opts: DecodeOptions = {}): string {
    const render = opts.renderSpecial ?? false;
    const parts: Uint8Array[] = [];
    let total = 0;
    // SentencePiece: drop the space that encoding put before the first word (after a leading BOS).
    const stripAt = this.model === 'llama' && this.vocab.addSpacePrefix ? (ids.length > 0 && ids[0] === this.bos ? 1 : 0) : -1;
    ids.forEach((id, i) => {
      let bytes = this.piece(id, render);
      if (i === stripAt && bytes[0] === 0x20) bytes = bytes.subarray(1);
      parts.push(bytes);
      total += bytes.length;
    });
    const all = new Uint8Array(total);
    let at = 0;
    for (const p of parts) {
      all.set(p, at);
      at += p.length;
    }
    return new TextDecoder('utf-8', { ignoreBOM: true }).decode(all);
  }

  tokenText(id: number): string {
    this.checkId(id);
    return this.vocab.tokens[id]!;
  }

  isControl(id: number): boolean {
    this.checkId(id);
    return (this.vocab.attrs[id]! & TokenAttr.CONTROL) !== 0;
  }

  isEog(id: number): boolean {
    return this.vocab.eog.has(id);
  }

  tokenId(text: string): number | undefined {
    return this.vocab.tokenToId.get(text);
  }

  createStreamDecoder(opts: DecodeOptions = {}): StreamDecoder {
    const render = opts.renderSpecial ?? false;
    const stream = new Utf8StreamDecoder();
    return {
      push: (id) => stream.push(this.piece(id, render)),
      flush: () => stream.flush(),
    };
  }

  /** The bytes a token stands for (llama.cpp's token_to_piece). */
  private piece(id: number, renderSpecial: boolean): Uint8Array {
    this.checkId(id);
    const attr = this.vocab.attrs[id]!;
    if (attr & (TokenAttr.CONTROL | TokenAttr.UNKNOWN)) {
      return renderSpecial ? utf8.encode(this.vocab.tokens[id]!) : EMPTY;
    }
    let bytes = this.pieces[id];
    if (bytes === undefined) {
      bytes = this.buildPiece(id, attr);
      this.pieces[id] = bytes;
    }
    return bytes;
  }

  private buildPiece(id: number, attr: number): Uint8Array {
    const text = this.vocab.tokens[id]!;
    if (attr & TokenAttr.USER_DEFINED) return utf8.encode(text);
    if (attr & TokenAttr.BYTE) {
      const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(text);
      return m ? Uint8Array.of(parseInt(m[1]!, 16)) : utf8.encode(text);
    }
    if (!(attr & TokenAttr.NORMAL)) return EMPTY; // unused / undefined tokens render as nothing
    if (this.model === 'llama') return utf8.encode(text.replaceAll('\u2581', ' '));
    // Byte-level: each character stands for one byte; a character outside the mapping (only in
    // a malformed vocabulary) is kept as its own UTF-8.
    const bytes: number[] = [];
    for (const ch of text) {
      const code = ch.charCodeAt(0);
      const b = ch.length === 1 && code < CHAR_CODE_TO_BYTE.length ? CHAR_CODE_TO_BYTE[code]! : -1;
      if (b >= 0) bytes.push(b);
      else bytes.push(...utf8.encode(ch));
    }
    return Uint8Array.from(bytes);
  }

  private checkId(id: number): void {
    if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize) {
      throw new RangeError(`${this.vocab.file}: token id ${id} is outside the vocabulary (0..${this.vocabSize - 1})`);
    }
  }

  private required(id: number | undefined, what: string): number {
    if (id === undefined) throw new Error(`${this.vocab.file}: cannot add ${what}: the vocabulary names no ${what} token`);
    return id;
  }
}

/** Builds the tokenizer a GGUF file's metadata describes; throws naming the file and key on bad metadata. */
export function createTokenizer(file: GgufFile): Tokenizer {
  return new GgufTokenizer(loadVocab(file));
}
