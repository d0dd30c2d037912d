#version 450
#extension GL_GOOGLE_include_directive : require
// y = W x for F16 weights (see matvec_body.glsl).
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Weights { uint w[]; };
#include "blocks.glsl"
void dequant(uint base, uint s, out float v[32]);
#include "matvec_body.glsl"
void dequant(uint base, uint s, out float v[32]) {
  const uint c0 = s * 32u;
  for (uint i = 0u; i < 32u; i += 2u) {
    const vec2 h = unpackHalf2x16(word_at(base + 2u * (c0 + i)));
    v[i] = c0 + i < p.cols ? h.x : 0.0;
    v[i + 1u] = c0 + i + 1u < p.cols ? h.y : 0.0;
  }
}
