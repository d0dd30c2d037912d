// Turns a stream of byte chunks (token pieces) into text that only ever contains complete
// UTF-8 characters: a character split across tokens (byte-fallback tokens, byte-level BPE
// pieces of an emoji) is held back until its last byte arrives. Bytes that cannot start or
// continue a valid character are emitted as U+FFFD.

export class Utf8StreamDecoder {
  private pending: Uint8Array = new Uint8Array(0);
  private readonly decoder = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });

  /** Adds bytes; returns the text completed by them (possibly empty). */
  push(bytes: Uint8Array): string {
    const all = concat(this.pending, bytes);
    const keep = incompleteTailLength(all);
    this.pending = all.slice(all.length - keep);
    return keep === all.length ? '' : this.decoder.decode(all.subarray(0, all.length - keep));
  }

  /** Returns what is held back (an incomplete character becomes U+FFFD) and resets. */
  flush(): string {
    const rest = this.pending;
    this.pending = new Uint8Array(0);
    return rest.length === 0 ? '' : this.decoder.decode(rest);
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

/** Bytes needed by a sequence starting with this lead byte, 0 for a byte that starts none. */
function sequenceLength(lead: number): number {
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 0;
}

/** How many trailing bytes form the start of a character whose remaining bytes are still to come. */
export function incompleteTailLength(bytes: Uint8Array): number {
  const n = bytes.length;
  // A lead byte is at most 3 bytes before the end of an incomplete character.
  for (let back = 1; back <= Math.min(3, n); back++) {
    const b = bytes[n - back]!;
    if ((b & 0xc0) === 0x80) continue; // continuation byte: keep looking for the lead
    const need = sequenceLength(b);
    if (need > back && secondByteFits(b, back > 1 ? bytes[n - back + 1]! : undefined)) return back;
    return 0;
  }
  return 0;
}

/** The second byte's narrower ranges after E0, ED, F0, F4 (overlongs, surrogates, > U+10FFFF). */
function secondByteFits(lead: number, second: number | undefined): boolean {
  if (second === undefined) return true;
  if (lead === 0xe0) return second >= 0xa0;
  if (lead === 0xed) return second <= 0x9f;
  if (lead === 0xf0) return second >= 0x90;
  if (lead === 0xf4) return second <= 0x8f;
  return true;
}
