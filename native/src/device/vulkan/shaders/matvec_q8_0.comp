#version 450
#extension GL_GOOGLE_include_directive : require
// y = W x for Q8_0 (34-byte blocks of 32: f16 scale, 32 int8) weights (see matvec_body.glsl).
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Weights { uint w[]; };
#include "blocks.glsl"
void dequant(uint base, uint s, out float v[32]);
#include "matvec_body.glsl"
void dequant(uint base, uint s, out float v[32]) {
  const uint o = base + s * 34u;
  const float d = half_at(o);
  for (uint q = 0u; q < 8u; ++q) {
    const uint u = word_at(o + 2u + 4u * q);
    for (uint j = 0u; j < 4u; ++j) v[4u * q + j] = d * float(i8_of(u, j));
  }
}
