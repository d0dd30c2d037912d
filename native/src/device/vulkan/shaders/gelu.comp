#version 450
// g[i] = gelu(g[i]) · u[i] (GeGLU), or gelu(g[i]) when ungated. GELU in its tanh form as
// llama.cpp's CPU backend (and the CPU's gelu_row) computes it: the input rounded to f16, the
// result rounded to f16; 0 below -10, the input itself above 10. One invocation per element.
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) buffer Gate { float g[]; };
layout(std430, binding = 1) readonly buffer Up { float u[]; };
layout(push_constant) uniform Params { uint n; uint g_off; uint u_off; uint gated; } p;  // offsets in floats

float to_f16(float v) { return unpackHalf2x16(packHalf2x16(vec2(v, 0.0))).x; }

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= p.n) return;
  const float x = g[p.g_off + i];
  float y;
  if (x <= -10.0) y = 0.0;
  else if (x >= 10.0) y = x;
  else {
    const float h = to_f16(x);
    y = to_f16(0.5 * h * (1.0 + tanh(0.7978845608 * h * (1.0 + 0.044715 * h * h))));
  }
  g[p.g_off + i] = p.gated != 0u ? y * u[p.u_off + i] : y;
}
