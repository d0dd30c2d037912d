// SentencePiece BPE as llama.cpp runs it (`tokenizer.ggml.model = llama`): spaces become ▁, the
// text is split into code points, and adjacent symbols whose concatenation is a vocabulary
// token merge highest score first (ties: leftmost). A final symbol that is not a token is
// emitted as byte tokens <0xXX> (or the unknown token when the vocabulary has no byte tokens).

import { MinHeap } from './heap';
import type { Vocab } from './vocab';

interface Bigram {
  left: number;
  right: number;
  score: number;
  /** Combined length when queued; a different length now means the pair is stale. */
  size: number;
}

const utf8 = new TextEncoder();

export class SpmEncoder {
  /** Token id per byte value, -1 where the vocabulary lacks it. */
  private readonly byteTokens: Int32Array;

  constructor(private readonly vocab: Vocab) {
    this.byteTokens = new Int32Array(256).fill(-1);
    for (let b = 0; b < 256; b++) {
      const hex = b.toString(16).toUpperCase().padStart(2, '0');
      const id = vocab.tokenToId.get(`<0x${hex}>`) ?? vocab.tokenToId.get(String.fromCharCode(b));
      if (id !== undefined) this.byteTokens[b] = id;
    }
  }

  /** Appends the ids of an already ▁-escaped text fragment to out. */
  encode(escaped: string, out: number[]): void {
    const { tokenToId, scores } = this.vocab;
    const text: string[] = Array.from(escaped);
    const n = text.length;
    if (n === 0) return;
    const prev = new Int32Array(n);
    const next = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      prev[i] = i - 1;
      next[i] = i + 1 < n ? i + 1 : -1;
    }
    const queue = new MinHeap<Bigram>((a, b) => a.score > b.score || (a.score === b.score && a.left < b.left));
    const addBigram = (left: number, right: number): void => {
      if (left < 0 || right < 0) return;
      const joined = text[left]! + text[right]!;
      const id = tokenToId.get(joined);
      if (id === undefined) return;
      queue.push({ left, right, score: scores[id]!, size: joined.length });
    };
    for (let i = 1; i < n; i++) addBigram(i - 1, i);

    for (let b = queue.pop(); b !== undefined; b = queue.pop()) {
      const l = text[b.left]!;
      const r = text[b.right]!;
      if (l.length === 0 || r.length === 0 || l.length + r.length !== b.size) continue;
      text[b.left] = l + r;
      text[b.right] = '';
      next[b.left] = next[b.right]!;
      if (next[b.right]! >= 0) prev[next[b.right]!] = b.left;
      addBigram(prev[b.left]!, b.left);
      addBigram(b.left, next[b.left]!);
    }

    for (let i = 0; i >= 0; i = next[i]!) {
      const sym = text[i]!;
      const id = tokenToId.get(sym);
      if (id !== undefined) {
        out.push(id);
        continue;
      }
      // Merged symbols are always tokens, so this is a single code point the vocabulary lacks:
      // its UTF-8 bytes as byte tokens, or one unknown token when byte tokens are missing.
      const bytes = utf8.encode(sym);
      if (bytes.every((byte) => this.byteTokens[byte]! >= 0)) {
        for (const byte of bytes) out.push(this.byteTokens[byte]!);
      } else if (this.vocab.unk !== undefined) {
        out.push(this.vocab.unk);
      } else {
        throw new Error(`${this.vocab.file}: cannot encode ${JSON.stringify(sym)}: the vocabulary has no byte tokens <0xXX> for it and no unknown token`);
      }
    }
  }
}
