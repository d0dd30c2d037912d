// Byte-level reads of a weight row held as a uint array named `w` (declared by the including
// shader): GGUF blocks are not 4-byte aligned (Q8_0 is 34 bytes, Q4_0 18, Q6_K 210), so they are
// read as bytes of 32-bit words and no 8/16-bit storage feature is needed.
uint byte_at(uint b) { return (w[b >> 2] >> ((b & 3u) * 8u)) & 0xffu; }
uint u16_at(uint b) { return byte_at(b) | (byte_at(b + 1u) << 8u); }
float half_at(uint b) { return unpackHalf2x16(u16_at(b)).x; }
int i8_at(uint b) { return int(byte_at(b) << 24) >> 24; }
