#version 450
// y[r] = x[r] · (1 / sqrt(mean(x[r]²) + eps)) · w, one workgroup per row (the CPU's rmsnorm_row).
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Input { float x[]; };
layout(std430, binding = 1) readonly buffer Weight { float w[]; };
layout(std430, binding = 2) writeonly buffer Output { float y[]; };
layout(push_constant) uniform Params { uint width; float eps; uint x_off; uint w_off; uint y_off; } p;  // offsets in floats
shared float red[WG];

void main() {
  const uint row = gl_WorkGroupID.x, lid = gl_LocalInvocationID.x, xb = p.x_off + row * p.width, yb = p.y_off + row * p.width;
  float s = 0.0;
  for (uint i = lid; i < p.width; i += WG) s += x[xb + i] * x[xb + i];
  red[lid] = s;
  barrier();
  for (uint k = WG / 2u; k > 0u; k >>= 1u) {
    if (lid < k) red[lid] += red[lid + k];
    barrier();
  }
  const float scale = 1.0 / sqrt(red[0] / float(p.width) + p.eps);
  for (uint i = lid; i < p.width; i += WG) y[yb + i] = (x[xb + i] * scale) * w[p.w_off + i];
}
