// Byte-level BPE pre-tokenizers: the regex sequence for each `tokenizer.ggml.pre`, as llama.cpp
// defines them (llama-vocab.cpp). Each regex splits every piece left by the previous one into
// its matches and the unmatched gaps between them (both kept), so later regexes refine earlier
// splits and a match never crosses an earlier boundary.
//
// Matching runs on a copy of the text in which every non-ASCII whitespace character is replaced
// by U+000B, as llama.cpp does before running std::regex; so `\s` below is the ASCII set only
// and, e.g., U+3000 never matches a class that lists it. Every replaced character is one UTF-16
// unit, so offsets in the copy are offsets in the text.

/** ASCII whitespace as std::regex's `\s` sees it (after the replacement above). */
const WS = '\\t\\n\\v\\f\\r ';
const S = `[${WS}]`;
const NOT_S = `[^${WS}]`;

const GPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^${WS}\\p{L}\\p{N}]+|${S}+(?!${NOT_S})`;
const CONTRACTIONS_ANY_CASE = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])`;
const LLAMA3 = `${CONTRACTIONS_ANY_CASE}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^${WS}\\p{L}\\p{N}]+[\\r\\n]*|${S}*[\\r\\n]+|${S}+(?!${NOT_S})|${S}+`;
const QWEN2 = `${CONTRACTIONS_ANY_CASE}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^${WS}\\p{L}\\p{N}]+[\\r\\n]*|${S}*[\\r\\n]+|${S}+(?!${NOT_S})|${S}+`;
// CJK ideographs U+4E00-U+9FA5, U+0800-U+4E00 (sic, as llama.cpp has it), Hangul syllables and more.
const CJK = '[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+';
const BLOOM = ` ?[^(${WS}|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+`;
// DeepSeek's letter ranges, escaped: several end points are compatibility characters
// (e.g. U+1F7D, U+212A KELVIN SIGN) that an editor's normalization would silently change.
const DEEPSEEK_LLM_LETTERS =
  'A-Za-z\u{B5}\u{C0}-\u{D6}\u{D8}-\u{F6}\u{F8}-\u{1BA}\u{1BC}-\u{1BF}\u{1C4}-\u{293}\u{295}-\u{2AF}\u{370}-\u{373}\u{376}\u{377}\u{37B}-\u{37D}\u{37F}\u{386}\u{388}-\u{38A}\u{38C}\u{38E}-\u{3A1}\u{3A3}-\u{3F5}\u{3F7}-\u{481}\u{48A}-\u{52F}\u{531}-\u{556}\u{10A0}-\u{10C5}\u{13A0}-\u{13F5}\u{13F8}-\u{13FD}\u{1C90}-\u{1CBA}\u{1CBD}-\u{1CBF}\u{1D00}-\u{1D2B}\u{1D6B}-\u{1D77}\u{1D79}-\u{1D9A}\u{1E00}-\u{1F15}\u{1F18}-\u{1F1D}\u{1F20}-\u{1F45}\u{1F48}-\u{1F4D}\u{1F50}-\u{1F57}\u{1F59}\u{1F5B}\u{1F5D}\u{1F5F}-\u{1F7D}\u{1F80}-\u{1FB4}\u{1FB6}-\u{1FBC}\u{1FBE}\u{1FC2}-\u{1FC4}\u{1FC6}-\u{1FCC}\u{1FD0}-\u{1FD3}\u{1FD6}-\u{1FDB}\u{1FE0}-\u{1FEC}\u{1FF2}-\u{1FF4}\u{1FF6}-\u{1FFC}\u{2102}\u{2107}\u{210A}-\u{2113}\u{2115}\u{2119}-\u{211D}\u{2124}\u{2126}\u{2128}\u{212A}-\u{212D}\u{212F}-\u{2134}\u{2139}\u{213C}-\u{213F}\u{2145}-\u{2149}\u{214E}\u{2183}\u{2184}\u{2C00}-\u{2C7B}\u{2C7E}-\u{2CE4}\u{2CEB}-\u{2CEE}\u{2CF2}\u{2CF3}\u{A640}-\u{A66D}\u{A680}-\u{A69B}\u{A722}-\u{A76F}\u{A771}-\u{A787}\u{A78B}-\u{A78E}\u{AB70}-\u{ABBF}\u{FB00}-\u{FB06}\u{FB13}-\u{FB17}\u{FF21}-\u{FF3A}\u{FF41}-\u{FF5A}\u{10400}-\u{1044F}\u{104B0}-\u{104D3}\u{104D8}-\u{104FB}\u{10C80}-\u{10CB2}\u{10CC0}-\u{10CF2}\u{118A0}-\u{118DF}\u{1E900}-\u{1E943}';

/** Regex sources per pre-tokenizer family. */
const FAMILIES: Record<string, readonly string[]> = {
  default: ['[\\p{P}$+<=>^~|]+', GPT2, '\\p{N}+', '[0-9][0-9][0-9]'],
  gpt2: [GPT2],
  llama3: [LLAMA3],
  qwen2: [QWEN2],
  'deepseek-llm': ['[\\r\\n]', `${S}?[${DEEPSEEK_LLM_LETTERS}]+`, `${S}?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+`, `${S}+$`, CJK, '\\p{N}+'],
  'deepseek-coder': ['[\\r\\n]', `${S}?\\p{L}+`, `${S}?\\p{P}+`, CJK, '\\p{N}'],
  falcon: ['[\\p{P}$+<=>^~|`]+', GPT2, '[0-9][0-9][0-9]'],
  starcoder: ['\\p{N}', GPT2],
  bloom: [BLOOM],
  viking: [BLOOM, '\\p{N}'],
};

/** `tokenizer.ggml.pre` names → family (llama.cpp's table, for the families above). */
const PRE_TO_FAMILY: Record<string, string> = {
  default: 'default',
  'gpt-2': 'gpt2', 'phi-2': 'gpt2', 'jina-es': 'gpt2', 'jina-de': 'gpt2', gigachat: 'gpt2',
  'jina-v2-es': 'gpt2', 'jina-v2-de': 'gpt2', 'jina-v1-en': 'gpt2', 'jina-v2-code': 'gpt2',
  'roberta-bpe': 'gpt2', mpt: 'gpt2', olmo: 'gpt2', jais: 'gpt2', trillion: 'gpt2', exaone4: 'gpt2',
  llama3: 'llama3', 'llama-v3': 'llama3', 'llama-bpe': 'llama3', falcon3: 'llama3', 'falcon-h1': 'llama3',
  pixtral: 'llama3', dbrx: 'llama3', 'smaug-bpe': 'llama3', glm4: 'llama3', 'chatglm-bpe': 'llama3',
  qwen2: 'qwen2', 'deepseek-r1-qwen': 'qwen2', megrez: 'qwen2', stablelm2: 'qwen2', hunyuan: 'qwen2',
  'deepseek-llm': 'deepseek-llm',
  'deepseek-coder': 'deepseek-coder',
  falcon: 'falcon',
  starcoder: 'starcoder', refact: 'starcoder', 'command-r': 'starcoder', smollm: 'starcoder',
  codeshell: 'starcoder', exaone: 'starcoder', 'minerva-7b': 'starcoder',
  bloom: 'bloom', 'gpt3-finnish': 'bloom', 'poro-chat': 'bloom',
  viking: 'viking',
};

/**
 * Llama-3-style names: besides their regex, a word that is itself a token is taken whole
 * (before any merging), and BOS is added by default (llama.cpp's ignore_merges and add_bos).
 */
export const LLAMA3_STYLE_PRES: ReadonlySet<string> = new Set(['llama3', 'llama-v3', 'llama-bpe', 'falcon3', 'falcon-h1', 'pixtral']);

export function supportedPreTokenizers(): string[] {
  return Object.keys(PRE_TO_FAMILY).sort();
}

export class PreTokenizer {
  private readonly regexes: RegExp[];

  /** Throws for a `pre` name this module does not know (encoding with a guessed one would silently differ). */
  constructor(readonly pre: string) {
    const family = PRE_TO_FAMILY[pre];
    if (family === undefined) {
      throw new Error(`unknown pre-tokenizer '${pre}' (known: ${supportedPreTokenizers().join(', ')})`);
    }
    this.regexes = FAMILIES[family]!.map((src) => new RegExp(src, 'gu'));
  }

  /** Splits text into the words that BPE merges within. */
  split(text: string): string[] {
    if (text.length === 0) return [];
    const probe = replaceNonAsciiWhitespace(text);
    // Piece boundaries as [start, end) pairs over the text, refined regex by regex.
    let bounds: number[] = [0, text.length];
    for (const re of this.regexes) {
      const next: number[] = [];
      for (let p = 0; p < bounds.length; p += 2) {
        splitPiece(re, probe, bounds[p]!, bounds[p + 1]!, next);
      }
      bounds = next;
    }
    const words: string[] = new Array<string>(bounds.length / 2);
    for (let p = 0, w = 0; p < bounds.length; p += 2, w++) words[w] = text.slice(bounds[p], bounds[p + 1]);
    return words;
  }
}

/** Appends the matches of `re` inside probe[start, end), and the gaps between them, to out. */
function splitPiece(re: RegExp, probe: string, start: number, end: number, out: number[]): void {
  // The piece's end is the end of input for the regex (lookaheads and `$` see it as such).
  const piece = start === 0 && end === probe.length ? probe : probe.slice(start, end);
  re.lastIndex = 0;
  let done = 0;
  for (let m = re.exec(piece); m !== null; m = re.exec(piece)) {
    const len = m[0].length;
    if (len === 0) {
      re.lastIndex = m.index + (piece.codePointAt(m.index)! > 0xffff ? 2 : 1);
      continue;
    }
    if (m.index > done) out.push(start + done, start + m.index);
    out.push(start + m.index, start + m.index + len);
    done = m.index + len;
  }
  if (done < piece.length) out.push(start + done, end);
}

const NON_ASCII_WS = /[\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/g;

function replaceNonAsciiWhitespace(text: string): string {
  return text.replace(NON_ASCII_WS, '\v');
}
