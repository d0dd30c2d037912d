// Reads of a weight row held as a uint array named `w` (declared by the including shader): GGUF
// blocks are not 4-byte aligned (Q8_0 is 34 bytes, Q4_0 18, Q6_K 210), so they are read as 32-bit
// words and the bytes shifted out, which needs no 8/16-bit storage feature. word_at gathers the
// four bytes at any byte offset (two loads where it straddles words): one load per four values
// where byte_at would take four.
uint byte_at(uint b) { return (w[b >> 2] >> ((b & 3u) * 8u)) & 0xffu; }
uint word_at(uint b) {
  const uint s = (b & 3u) * 8u, lo = w[b >> 2];
  return s == 0u ? lo : (lo >> s) | (w[(b >> 2) + 1u] << (32u - s));
}
uint u16_at(uint b) { return (w[b >> 2] >> ((b & 3u) * 8u)) & 0xffffu | (((b & 3u) == 3u) ? ((w[(b >> 2) + 1u] & 0xffu) << 8u) : 0u); }
float half_at(uint b) { return unpackHalf2x16(u16_at(b)).x; }
int i8_at(uint b) { return int(byte_at(b) << 24) >> 24; }
// Byte j (0-3) of word u as a signed value.
int i8_of(uint u, uint j) { return int(u << (24u - 8u * j)) >> 24; }
