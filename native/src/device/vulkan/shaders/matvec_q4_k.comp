#version 450
#extension GL_GOOGLE_include_directive : require
// y = W x for Q4_K (144-byte super-blocks of 256: f16 d and dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles) weights (see matvec_body.glsl).
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Weights { uint w[]; };
#include "blocks.glsl"
void dequant(uint base, uint s, out float v[32]);
#include "matvec_body.glsl"
// Sub-block j (0-7) of a super-block: scale and min (6 bits each, packed over 12 bytes).
void scale_min(uint sc, uint j, out float scale, out float mn) {
  if (j < 4u) {
    scale = float(byte_at(sc + j) & 63u);
    mn = float(byte_at(sc + j + 4u) & 63u);
  } else {
    scale = float((byte_at(sc + j + 4u) & 15u) | ((byte_at(sc + j - 4u) >> 6u) << 4u));
    mn = float((byte_at(sc + j + 4u) >> 4u) | ((byte_at(sc + j) >> 6u) << 4u));
  }
}
void dequant(uint base, uint s, out float v[32]) {
  const uint o = base + (s / 8u) * 144u, j = s % 8u;
  const float d = half_at(o), dmin = half_at(o + 2u);
  float sc, mn;
  scale_min(o + 4u, j, sc, mn);
  const float a = d * sc, b = dmin * mn;
  const uint q = o + 16u + 32u * (j / 2u);
  const uint shift = 4u * (j & 1u);
  for (uint k = 0u; k < 8u; ++k) {
    const uint u = word_at(q + 4u * k) >> shift;
    for (uint j = 0u; j < 4u; ++j) v[4u * k + j] = a * float((u >> (8u * j)) & 15u) - b;
  }
}
