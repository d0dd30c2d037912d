#version 450
// y[r] = (x[r] - mean) / sqrt(var + eps) · w + b, one workgroup per row (the CPU's layernorm_row).
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Input { float x[]; };
layout(std430, binding = 1) readonly buffer Weight { float w[]; };
layout(std430, binding = 2) readonly buffer Bias { float b[]; };
layout(std430, binding = 3) writeonly buffer Output { float y[]; };
layout(push_constant) uniform Params { uint width; float eps; uint x_off; uint w_off; uint b_off; uint y_off; } p;  // offsets in floats
shared float red[WG];

float row_sum(float v) {
  const uint lid = gl_LocalInvocationID.x;
  red[lid] = v;
  barrier();
  for (uint k = WG / 2u; k > 0u; k >>= 1u) {
    if (lid < k) red[lid] += red[lid + k];
    barrier();
  }
  const float total = red[0];
  barrier();  // every invocation has read red[0] before the next sum reuses it
  return total;
}

void main() {
  const uint row = gl_WorkGroupID.x, lid = gl_LocalInvocationID.x, xb = p.x_off + row * p.width, yb = p.y_off + row * p.width;
  float s = 0.0;
  for (uint i = lid; i < p.width; i += WG) s += x[xb + i];
  const float mean = row_sum(s) / float(p.width);
  float v = 0.0;
  for (uint i = lid; i < p.width; i += WG) { const float d = x[xb + i] - mean; v += d * d; }
  const float scale = 1.0 / sqrt(row_sum(v) / float(p.width) + p.eps);
  for (uint i = lid; i < p.width; i += WG) y[yb + i] = (x[xb + i] - mean) * scale * w[p.w_off + i] + b[p.b_off + i];
}
