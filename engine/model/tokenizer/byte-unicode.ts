// GPT-2's reversible byte ↔ character mapping: byte-level BPE vocabularies store every token as
// characters, one per byte, where printable Latin-1 bytes stand for themselves and the others
// (controls, space, 0x7F-0xA0, 0xAD) are shifted to U+0100 and up, so no token holds whitespace.

function buildByteToChar(): string[] {
  const map: string[] = new Array<string>(256);
  let shifted = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    map[b] = String.fromCharCode(printable ? b : 256 + shifted++);
  }
  return map;
}

/** Character (one UTF-16 unit) for each byte value. */
export const BYTE_TO_CHAR: readonly string[] = buildByteToChar();

/** Byte value of each mapped character code, or -1. */
export const CHAR_CODE_TO_BYTE: Int16Array = (() => {
  const table = new Int16Array(512).fill(-1);
  BYTE_TO_CHAR.forEach((ch, b) => { table[ch.charCodeAt(0)] = b; });
  return table;
})();

/** The byte-level form of a text: its UTF-8 bytes, each as its mapped character. */
export function bytesToMappedText(bytes: Uint8Array): string {
  let out = '';
  for (const b of bytes) out += BYTE_TO_CHAR[b]!;
  return out;
}
