#version 450
// g[i] = silu(g[i]) · u[i] = g / (1 + e^-g) · u. One invocation per element.
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) buffer Gate { float g[]; };
layout(std430, binding = 1) readonly buffer Up { float u[]; };
layout(push_constant) uniform Params { uint n; uint g_off; uint u_off; } p;  // offsets in floats

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i < p.n) {
    const float a = g[p.g_off + i];
    g[p.g_off + i] = a / (1.0 + exp(-a)) * u[p.u_off + i];
  }
}
