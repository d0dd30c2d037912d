// The token ids a completion feeds the model: the FIM prompt in the model's own format around
// the cursor, or the text before the cursor alone for a model without FIM tokens. Prefix and
// suffix are tokenized separately (as llama.cpp's infill does), so no token spans the cursor
// and text that looks like a special token stays text.
import type { Tokenizer } from '../model/tokenizer';
import type { ContextChunk } from './extra-context';
import { detectFimFormat, type FimFamily, type FimFormat } from './fim';

export interface CompletionPrompt {
  ids: number[];
  /** The prompt as text, special tokens rendered (for people reading logs; not re-tokenized). */
  text: string;
  /** The FIM family, or 'prefix-only' when the model has no FIM tokens. */
  format: FimFamily | 'prefix-only';
  /** Tokens that end the completion (the family's stop tokens, or end-of-generation). */
  stopIds: ReadonlySet<number>;
}

/** Builds completion prompts for one tokenizer (the FIM format is detected once). */
export class PromptBuilder {
  readonly fim: FimFormat | undefined;
  private prefixOnlyStops: Set<number> | undefined;

  constructor(readonly tokenizer: Tokenizer) {
    this.fim = detectFimFormat(tokenizer);
  }

  /** Tokens of one part of the prompt (empty text has none, not even a dummy space). */
  encodePart(text: string, space: boolean): number[] {
    if (text.length === 0) return [];
    return this.tokenizer.encode(text, { addBos: false, addEos: false, parseSpecial: false, addSpacePrefix: space });
  }

  /**
   * Tokens of extra-context chunks as they go before the FIM prefix: `<|file_sep|>name\ntext` per
   * chunk where the vocabulary has a file separator (Qwen2.5-Coder, StarCoder2), else each
   * chunk's text followed by a blank line.
   */
  encodeExtra(chunks: readonly ContextChunk[]): number[] {
    // Repository formats: Qwen's <|file_sep|>, StarCoder's <file_sep>, CodeGemma's <|file_separator|>.
    const sep = this.tokenizer.tokenId('<|file_sep|>') ?? this.tokenizer.tokenId('<file_sep>') ?? this.tokenizer.tokenId('<|file_separator|>');
    const ids: number[] = [];
    for (const chunk of chunks) {
      const body = chunk.text.endsWith('\n') ? chunk.text : `${chunk.text}\n`;
      if (sep !== undefined && this.tokenizer.isControl(sep)) ids.push(sep, ...this.encodePart(`${chunk.name}\n${body}`, false));
      else ids.push(...this.encodePart(`${body}\n`, ids.length === 0));
    }
    return ids;
  }

  /** `extra`: tokens from encodeExtra, placed after BOS and before the FIM parts. */
  build(prefix: string, suffix: string, extra: readonly number[] = []): CompletionPrompt {
    const fim = this.fim;
    if (fim === undefined) return this.prefixOnly(prefix);
    return this.buildTokens(this.encodePart(prefix, fim.prefixSpace), this.encodePart(suffix, fim.suffixSpace), extra);
  }

  /** Prefix and suffix tokens (as encodePart gives them, maybe cut) around the FIM tokens; `middle`: the start of the middle, after it (llama-server's `prompt`). FIM models only. */
  buildTokens(prefix: readonly number[], suffix: readonly number[], extra: readonly number[] = [], middle: readonly number[] = []): CompletionPrompt {
    const fim = this.fim;
    if (fim === undefined) throw new Error('buildTokens needs a model with FIM tokens');
    const ids: number[] = [];
    if (fim.addBos && this.tokenizer.bos !== undefined) ids.push(this.tokenizer.bos);
    ids.push(...extra);
    const pre = [fim.prefixId, ...prefix];
    const suf = [fim.suffixId, ...suffix];
    if (fim.order === 'psm') ids.push(...pre, ...suf);
    else ids.push(...suf, ...pre);
    if (fim.middleId !== undefined) ids.push(fim.middleId);
    ids.push(...middle);
    return { ids, text: this.render(ids), format: fim.family, stopIds: fim.stopIds };
  }

  /** Fixed tokens a FIM prompt adds around prefix and suffix (BOS and the FIM tokens). */
  get overheadTokens(): number {
    const fim = this.fim;
    const bos = this.tokenizer.addBos && this.tokenizer.bos !== undefined ? 1 : 0;
    if (fim === undefined) return bos;
    return bos + 2 + (fim.middleId !== undefined ? 1 : 0);
  }

  private prefixOnly(prefix: string): CompletionPrompt {
    const ids: number[] = [];
    if (this.tokenizer.addBos && this.tokenizer.bos !== undefined) ids.push(this.tokenizer.bos);
    ids.push(...this.encodePart(prefix, true));
    if (this.prefixOnlyStops === undefined) {
      this.prefixOnlyStops = new Set();
      for (let id = 0; id < this.tokenizer.vocabSize; id++) if (this.tokenizer.isEog(id)) this.prefixOnlyStops.add(id);
    }
    return { ids, text: this.render(ids), format: 'prefix-only', stopIds: this.prefixOnlyStops };
  }

  private render(ids: number[]): string {
    return this.tokenizer.decode(ids, { renderSpecial: true });
  }
}
