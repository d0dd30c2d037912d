// Splits special-token texts out of a text before normal tokenization, as llama.cpp's
// tokenizer_st_partition does: special tokens are taken longest text first, and every
// occurrence of each is cut out of the text fragments that remain, so a longer token wins over
// a shorter one it contains. Control and unknown tokens are cut only when special parsing is
// on; user-defined tokens always are (the Hugging Face tokenizers treat added tokens that way).

import { TokenAttr } from './token-attrs';
import type { Vocab } from './vocab';

export type Fragment = { text: string } | { id: number };

interface SpecialToken {
  id: number;
  text: string;
  attr: number;
}

const utf8 = new TextEncoder();
const ASCII_SPACE = /[\t\n\v\f\r ]/;

export class SpecialSplitter {
  /** Control, user-defined and unknown tokens, longest UTF-8 text first (ties: lower id). */
  private readonly specials: SpecialToken[];

  constructor(vocab: Vocab) {
    const specials: Array<SpecialToken & { bytes: number }> = [];
    const wanted = TokenAttr.CONTROL | TokenAttr.USER_DEFINED | TokenAttr.UNKNOWN;
    vocab.attrs.forEach((attr, id) => {
      if (attr & wanted) {
        const text = vocab.tokens[id]!;
        specials.push({ id, text, attr, bytes: utf8.encode(text).length });
      }
    });
    specials.sort((a, b) => b.bytes - a.bytes || a.id - b.id);
    this.specials = specials;
  }

  split(text: string, parseSpecial: boolean): Fragment[] {
    if (text.length === 0) return [];
    let fragments: Fragment[] = [{ text }];
    for (const special of this.specials) {
      if (!parseSpecial && special.attr & (TokenAttr.CONTROL | TokenAttr.UNKNOWN)) continue;
      // Cheap test first: most special texts occur nowhere.
      if (!fragments.some((f) => 'text' in f && f.text.includes(special.text))) continue;
      const next: Fragment[] = [];
      for (const f of fragments) {
        if ('text' in f) cutOut(f.text, special, next);
        else next.push(f);
      }
      fragments = next;
    }
    return fragments;
  }
}

function cutOut(text: string, special: SpecialToken, out: Fragment[]): void {
  let from = 0;
  for (;;) {
    const at = text.indexOf(special.text, from);
    if (at < 0) break;
    let leftEnd = at;
    if (special.attr & TokenAttr.LSTRIP) {
      while (leftEnd > from && ASCII_SPACE.test(text[leftEnd - 1]!)) leftEnd--;
    }
    if (leftEnd > from) out.push({ text: text.slice(from, leftEnd) });
    out.push({ id: special.id });
    from = at + special.text.length;
    if (special.attr & TokenAttr.RSTRIP) {
      while (from < text.length && ASCII_SPACE.test(text[from]!)) from++;
    }
  }
  if (from < text.length) out.push({ text: text.slice(from) });
}
