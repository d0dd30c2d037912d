// Byte-level BPE (`tokenizer.ggml.model = gpt2`): pre-tokenize, map each word's UTF-8 bytes to
// GPT-2 characters, then merge adjacent symbols lowest merge rank first (ties: leftmost), as
// llama.cpp's llm_tokenizer_bpe_session does. Results are cached per word: source code repeats
// the same words constantly.

import { GgufMetadataError } from '../gguf';
import { bytesToMappedText } from './byte-unicode';
import { MinHeap } from './heap';
import { LLAMA3_STYLE_PRES, PreTokenizer } from './pretokenize';
import type { Vocab } from './vocab';

interface Bigram {
  left: number;
  right: number;
  rank: number;
  text: string;
}

const CACHE_LIMIT = 50_000;
const utf8 = new TextEncoder();

export class BpeEncoder {
  private readonly preTokenizer: PreTokenizer;
  /** Llama-3-style vocabularies take a whole word as one token when it is one, before merging. */
  private readonly ignoreMerges: boolean;
  private readonly cache = new Map<string, readonly number[]>();

  constructor(private readonly vocab: Vocab) {
    try {
      this.preTokenizer = new PreTokenizer(vocab.pre);
    } catch (err) {
      throw new GgufMetadataError(vocab.file, 'tokenizer.ggml.pre', err instanceof Error ? err.message : String(err));
    }
    this.ignoreMerges = LLAMA3_STYLE_PRES.has(vocab.pre);
  }

  /** Appends the ids of a text fragment (no special tokens in it) to out. */
  encode(text: string, out: number[]): void {
    for (const word of this.preTokenizer.split(text)) {
      let ids = this.cache.get(word);
      if (ids === undefined) {
        ids = this.encodeWord(bytesToMappedText(utf8.encode(word)));
        if (this.cache.size >= CACHE_LIMIT) this.cache.clear();
        this.cache.set(word, ids);
      }
      for (const id of ids) out.push(id);
    }
  }

  /** Ids for one pre-tokenized word, given in its byte-mapped form. */
  private encodeWord(word: string): number[] {
    const { tokenToId, mergeRanks } = this.vocab;
    if (this.ignoreMerges) {
      const whole = tokenToId.get(word);
      if (whole !== undefined) return [whole];
    }
    // Symbols: one per mapped character (each a single UTF-16 unit), as a linked list.
    const n = word.length;
    const text: string[] = new Array<string>(n);
    const prev = new Int32Array(n);
    const next = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      text[i] = word[i]!;
      prev[i] = i - 1;
      next[i] = i + 1 < n ? i + 1 : -1;
    }
    const queue = new MinHeap<Bigram>((a, b) => a.rank < b.rank || (a.rank === b.rank && a.left < b.left));
    const addBigram = (left: number, right: number): void => {
      if (left < 0 || right < 0) return;
      const rank = mergeRanks.get(`${text[left]} ${text[right]}`);
      if (rank === undefined) return;
      queue.push({ left, right, rank, text: text[left]! + text[right]! });
    };
    for (let i = 1; i < n; i++) addBigram(i - 1, i);

    for (let b = queue.pop(); b !== undefined; b = queue.pop()) {
      const l = text[b.left]!;
      const r = text[b.right]!;
      // Stale: one side was merged into something else since this pair was queued.
      if (l.length === 0 || r.length === 0 || l + r !== b.text) continue;
      text[b.left] = b.text;
      text[b.right] = '';
      next[b.left] = next[b.right]!;
      if (next[b.right]! >= 0) prev[next[b.right]!] = b.left;
      addBigram(prev[b.left]!, b.left);
      addBigram(b.left, next[b.left]!);
    }

    const ids: number[] = [];
    for (let i = 0; i >= 0; i = next[i]!) {
      const sym = text[i]!;
      const id = tokenToId.get(sym);
      if (id !== undefined) {
        ids.push(id);
        continue;
      }
      // No token for the merged symbol: fall back to single characters that are tokens
      // (llama.cpp drops the rest, which only happens with a broken vocabulary).
      for (const ch of sym) {
        const single = tokenToId.get(ch);
        if (single !== undefined) ids.push(single);
      }
    }
    return ids;
  }
}
