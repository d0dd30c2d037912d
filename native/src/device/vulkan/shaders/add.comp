#version 450
// y[i] += b[i % bwidth]: a bias broadcast over rows (bwidth = row width) or a residual add
// (bwidth = n). One invocation per element.
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) buffer Data { float y[]; };
layout(std430, binding = 1) readonly buffer Addend { float b[]; };
layout(push_constant) uniform Params { uint n; uint bwidth; uint y_off; uint b_off; } p;  // offsets in floats

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i < p.n) y[p.y_off + i] += b[p.b_off + i % p.bwidth];
}
