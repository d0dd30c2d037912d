// The 12-byte packing of Q4_K/Q5_K's eight 6-bit scales and eight 6-bit mins:
//   bytes 0..3:  low 6 bits = scale j (j<4),   top 2 bits = bits 4..5 of scale j+4
//   bytes 4..7:  low 6 bits = min j (j<4),     top 2 bits = bits 4..5 of min j+4
//   bytes 8..11: low nibble = bits 0..3 of scale j+4, high nibble = bits 0..3 of min j+4
// `static inline` so each including file (baseline or ISA-specific) keeps its own copy.
#pragma once
#include <cstdint>
#include <cstring>

namespace fulcrum {
namespace quant {

static inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// All eight at once with 32-bit word operations (same result as get_scale_min_k4 for j=0..7):
// bytes j<4 are the low 6 bits of words 0 (scales) / 1 (mins); bytes j>=4 combine a nibble of
// word 2 with bits 6..7 of words 0 / 1, shifted into bits 4..5. Byte j of sc_lo|sc_hi (as a
// little-endian u64) is scale j; likewise mins.
struct ScalesMinsK4 {
  uint32_t sc_lo, sc_hi, m_lo, m_hi;
};

static inline ScalesMinsK4 unpack_k4_words(const uint8_t* q) {
  uint32_t w0, w1, w2;
  std::memcpy(&w0, q, 4);
  std::memcpy(&w1, q + 4, 4);
  std::memcpy(&w2, q + 8, 4);
  ScalesMinsK4 r;
  r.sc_lo = w0 & 0x3f3f3f3fu;
  r.m_lo = w1 & 0x3f3f3f3fu;
  r.sc_hi = (w2 & 0x0f0f0f0fu) | (((w0 >> 6) & 0x03030303u) << 4);
  r.m_hi = ((w2 >> 4) & 0x0f0f0f0fu) | (((w1 >> 6) & 0x03030303u) << 4);
  return r;
}

static inline void unpack_scales_mins_k4(const uint8_t* q, uint8_t sc[8], uint8_t m[8]) {
  const ScalesMinsK4 w = unpack_k4_words(q);
  std::memcpy(sc, &w.sc_lo, 4);
  std::memcpy(sc + 4, &w.sc_hi, 4);
  std::memcpy(m, &w.m_lo, 4);
  std::memcpy(m + 4, &w.m_hi, 4);
}

static inline void pack_scales_mins_k4(const uint8_t sc[8], const uint8_t m[8], uint8_t* q) {
  for (int j = 0; j < 12; ++j) q[j] = 0;
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      q[j] = static_cast<uint8_t>(q[j] | (sc[j] & 63));
      q[j + 4] = static_cast<uint8_t>(q[j + 4] | (m[j] & 63));
    } else {
      q[j + 4] = static_cast<uint8_t>((sc[j] & 0x0F) | ((m[j] & 0x0F) << 4));
      q[j - 4] = static_cast<uint8_t>(q[j - 4] | ((sc[j] >> 4) << 6));
      q[j] = static_cast<uint8_t>(q[j] | ((m[j] >> 4) << 6));
    }
  }
}

}  // namespace quant
}  // namespace fulcrum
