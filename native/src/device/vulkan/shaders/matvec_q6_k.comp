#version 450
#extension GL_GOOGLE_include_directive : require
// y = W x for Q6_K (210-byte super-blocks of 256: 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 int8 scales, f16 d) weights (see matvec_body.glsl).
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Weights { uint w[]; };
#include "blocks.glsl"
void dequant(uint base, uint s, out float v[32]);
#include "matvec_body.glsl"
// Sub-block s % 8 of super-block s / 8: half h (128 values), quarter k (32 values) of it.
void dequant(uint base, uint s, out float v[32]) {
  const uint o = base + (s / 8u) * 210u, r = s % 8u, h = r / 4u, k = r % 4u;
  const float d = half_at(o + 208u);
  const uint ql = o + 64u * h + 32u * (k & 1u), qh = o + 128u + 32u * h, sc = o + 192u + 8u * h + 2u * k;
  const uint nshift = 4u * (k >> 1u), hshift = 2u * k;
  const float s0 = d * float(i8_at(sc)), s1 = d * float(i8_at(sc + 1u));
  for (uint k = 0u; k < 8u; ++k) {
    const uint lo = word_at(ql + 4u * k) >> nshift, hi = word_at(qh + 4u * k) >> hshift;
    for (uint j = 0u; j < 4u; ++j) {
      const uint q = ((lo >> (8u * j)) & 15u) | (((hi >> (8u * j)) & 3u) << 4u);
      v[4u * k + j] = (k < 4u ? s0 : s1) * (float(q) - 32.0);
    }
  }
}
