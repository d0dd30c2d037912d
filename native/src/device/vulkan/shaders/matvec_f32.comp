#version 450
// y[row0 + r] = dot(row r of the bound F32 window, x): one workgroup per row, a shared-memory
// tree reduction. The window may start before the first row (skew, in bytes), so windows can
// begin at the device's storage-buffer offset alignment.
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Weights { float w[]; };
layout(std430, binding = 1) readonly buffer Input { float x[]; };
layout(std430, binding = 2) writeonly buffer Output { float y[]; };
layout(push_constant) uniform Params { uint rows; uint cols; uint row_bytes; uint skew; uint row0; uint y_stride; } p;
shared float red[WG];

void main() {
  const uint row = gl_WorkGroupID.x;
  // Token t of a multi-token product (prefill) is workgroup row y: its input and output rows.
  const uint tok = gl_WorkGroupID.y;
  const uint xb = tok * p.cols;
  const uint lid = gl_LocalInvocationID.x;
  const uint base = (p.skew + row * p.row_bytes) / 4u;
  float acc = 0.0;
  for (uint c = lid; c < p.cols; c += WG) acc += w[base + c] * x[xb + c];
  red[lid] = acc;
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) red[lid] += red[lid + s];
    barrier();
  }
  if (lid == 0u) y[tok * p.y_stride + p.row0 + row] = red[0];
}
