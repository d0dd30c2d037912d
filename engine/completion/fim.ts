// Fill-in-the-middle formats: which family's FIM tokens a vocabulary holds, in which order the
// family was trained to see prefix and suffix, and which tokens end its middles. Everything
// comes from the GGUF vocabulary (the tokenizer already finds the FIM ids llama.cpp finds); the
// family only decides the order, the spacing and the extra stop tokens.
import type { Tokenizer } from '../model/tokenizer';

export type FimFamily = 'qwen2.5-coder' | 'codegemma' | 'starcoder' | 'codellama' | 'deepseek-coder' | 'codestral' | 'generic';

export interface FimFormat {
  family: FimFamily;
  /** 'psm': PRE prefix SUF suffix MID (most families); 'spm': SUF suffix PRE prefix (Codestral). */
  order: 'psm' | 'spm';
  prefixId: number;
  suffixId: number;
  /** Absent where the family has no middle token (Codestral generates right after the prefix). */
  middleId?: number;
  /** Tokens that end a middle: the vocabulary's end-of-generation set plus the family's own. */
  stopIds: ReadonlySet<number>;
  addBos: boolean;
  /**
   * SentencePiece dummy space before each part. CodeLlama was trained on `<PRE> P <SUF>S <MID>`:
   * the prefix keeps the space, the suffix does not.
   */
  prefixSpace: boolean;
  suffixSpace: boolean;
}

interface FamilySignature {
  family: Exclude<FimFamily, 'generic'>;
  /** Token text of the prefix token that identifies the family (any of these). */
  prefixTexts: string[];
  order: 'psm' | 'spm';
  /** Stop tokens by text, beyond the vocabulary's end-of-generation set. */
  stopTexts: string[];
  /** A token the vocabulary must also hold (families that share their FIM tokens). */
  requiresText?: string;
}

// In the order tried; the first whose prefix token the vocabulary holds wins.
const FAMILIES: FamilySignature[] = [
  // CodeGemma shares Qwen's FIM tokens; its file separator tells them apart (Qwen3-Coder uses
  // Qwen2.5-Coder's format and tokens).
  { family: 'codegemma', prefixTexts: ['<|fim_prefix|>'], requiresText: '<|file_separator|>', order: 'psm', stopTexts: ['<|file_separator|>', '<|fim_prefix|>', '<|fim_suffix|>', '<|fim_middle|>', '<eos>', '<end_of_turn>'] },
  { family: 'qwen2.5-coder', prefixTexts: ['<|fim_prefix|>'], order: 'psm', stopTexts: ['<|endoftext|>', '<|fim_pad|>', '<|file_sep|>', '<|im_end|>', '<|repo_name|>', '<|fim_prefix|>', '<|fim_suffix|>', '<|fim_middle|>'] },
  { family: 'starcoder', prefixTexts: ['<fim_prefix>', '<fim-prefix>'], order: 'psm', stopTexts: ['<|endoftext|>', '<file_sep>', '<fim_prefix>', '<fim_suffix>', '<fim_middle>', '<fim-prefix>', '<fim-suffix>', '<fim-middle>'] },
  { family: 'deepseek-coder', prefixTexts: ['<｜fim▁begin｜>'], order: 'psm', stopTexts: ['<｜end▁of▁sentence｜>', '<|EOT|>', '<｜fim▁begin｜>', '<｜fim▁hole｜>', '<｜fim▁end｜>'] },
  { family: 'codellama', prefixTexts: ['<PRE>', '▁<PRE>'], order: 'psm', stopTexts: ['<EOT>', '▁<EOT>', '<PRE>', '<SUF>', '<MID>', '▁<PRE>', '▁<SUF>', '▁<MID>'] },
  { family: 'codestral', prefixTexts: ['[PREFIX]'], order: 'spm', stopTexts: ['[PREFIX]', '[SUFFIX]', '[MIDDLE]'] },
];

/** The vocabulary's FIM format, or undefined when it has no FIM tokens (prefix-only completions). */
export function detectFimFormat(tokenizer: Tokenizer): FimFormat | undefined {
  const spm = tokenizer.model === 'llama';
  for (const sig of FAMILIES) {
    const textId = sig.prefixTexts.map((t) => tokenizer.tokenId(t)).find((id) => id !== undefined);
    if (textId === undefined) continue;
    if (sig.requiresText !== undefined && tokenizer.tokenId(sig.requiresText) === undefined) continue;
    if (sig.family === 'codestral') {
      // Mistral's vocabularies: [SUFFIX] suffix [PREFIX] prefix, then the middle follows.
      const suffixId = tokenizer.tokenId('[SUFFIX]');
      if (suffixId === undefined) continue;
      return format(tokenizer, sig, textId, suffixId, undefined, spm, spm);
    }
    const fim = tokenizer.fim;
    if (fim === undefined) continue;
    return format(tokenizer, sig, fim.prefix, fim.suffix, fim.middle, spm, sig.family === 'codellama' ? false : spm);
  }
  const fim = tokenizer.fim;
  if (fim === undefined) return undefined;
  return {
    family: 'generic', order: 'psm', prefixId: fim.prefix, suffixId: fim.suffix, middleId: fim.middle,
    stopIds: stopSet(tokenizer, []), addBos: tokenizer.addBos, prefixSpace: spm, suffixSpace: spm,
  };
}

function format(tokenizer: Tokenizer, sig: FamilySignature, prefixId: number, suffixId: number, middleId: number | undefined,
  prefixSpace: boolean, suffixSpace: boolean): FimFormat {
  return {
    family: sig.family, order: sig.order, prefixId, suffixId,
    ...(middleId !== undefined ? { middleId } : {}),
    stopIds: stopSet(tokenizer, sig.stopTexts), addBos: tokenizer.addBos, prefixSpace, suffixSpace,
  };
}

function stopSet(tokenizer: Tokenizer, texts: string[]): Set<number> {
  const ids = new Set<number>();
  for (let id = 0; id < tokenizer.vocabSize; id++) if (tokenizer.isEog(id)) ids.add(id);
  for (const t of texts) {
    const id = tokenizer.tokenId(t);
    if (id !== undefined) ids.add(id);
  }
  return ids;
}
