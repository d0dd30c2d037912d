// Per-token attributes, as bit flags (llama.cpp's llama_token_attr), and the mapping from the
// GGUF `tokenizer.ggml.token_type` values that the converters write.

export const TokenAttr = {
  UNDEFINED: 0,
  UNKNOWN: 1 << 0,
  UNUSED: 1 << 1,
  NORMAL: 1 << 2,
  CONTROL: 1 << 3,
  USER_DEFINED: 1 << 4,
  BYTE: 1 << 5,
  /** Strip whitespace left of this token when splitting special tokens out of text. */
  LSTRIP: 1 << 7,
  /** Strip whitespace right of this token when splitting special tokens out of text. */
  RSTRIP: 1 << 8,
} as const;

/** GGUF token types (gguf-py TokenType). */
export const GgufTokenType = {
  NORMAL: 1,
  UNKNOWN: 2,
  CONTROL: 3,
  USER_DEFINED: 4,
  UNUSED: 5,
  BYTE: 6,
} as const;

export function attrFromTokenType(type: number): number {
  switch (type) {
    case GgufTokenType.NORMAL: return TokenAttr.NORMAL;
    case GgufTokenType.UNKNOWN: return TokenAttr.UNKNOWN;
    case GgufTokenType.CONTROL: return TokenAttr.CONTROL;
    case GgufTokenType.USER_DEFINED: return TokenAttr.USER_DEFINED;
    case GgufTokenType.UNUSED: return TokenAttr.UNUSED;
    case GgufTokenType.BYTE: return TokenAttr.BYTE;
    default: return TokenAttr.UNDEFINED;
  }
}
