#version 450
// Rows of `width` floats moved by an index list (the MoE FFN's experts): gather
// dst[i] = src[rows[i]], or scatter dst[rows[i]] = weights[i] · src[i]. One invocation per element.
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Src { float src[]; };
layout(std430, binding = 1) buffer Dst { float dst[]; };
layout(std430, binding = 2) readonly buffer Rows { uint rows[]; };
layout(std430, binding = 3) readonly buffer Weights { float wt[]; };
layout(push_constant) uniform Params { uint n; uint width; uint scatter; uint src_off; uint dst_off; uint rows_off; uint w_off; } p;  // offsets in words

void main() {
  const uint k = gl_GlobalInvocationID.x;
  if (k >= p.n * p.width) return;
  const uint i = k / p.width, c = k % p.width, r = rows[p.rows_off + i];
  if (p.scatter != 0u) dst[p.dst_off + r * p.width + c] = wt[p.w_off + i] * src[p.src_off + i * p.width + c];
  else dst[p.dst_off + i * p.width + c] = src[p.src_off + r * p.width + c];
}
