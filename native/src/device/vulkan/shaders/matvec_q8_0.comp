#version 450
// y[row0 + r] = dot(dequantized Q8_0 row r of the bound window, x): one workgroup per row, the
// row's 34-byte blocks spread over the invocations, then a shared-memory tree reduction.
// Blocks are read as bytes of a uint array (blocks are not 4-byte aligned), so no 8/16-bit
// storage feature is needed. Workgroup size is a specialization constant chosen from the
// device's limits.
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Weights { uint w[]; };
layout(std430, binding = 1) readonly buffer Input { float x[]; };
layout(std430, binding = 2) writeonly buffer Output { float y[]; };
layout(push_constant) uniform Params { uint rows; uint cols; uint row_bytes; uint skew; uint row0; uint y_stride; } p;
shared float red[WG];

uint byte_at(uint b) { return (w[b >> 2] >> ((b & 3u) * 8u)) & 0xffu; }

void main() {
  const uint row = gl_WorkGroupID.x;
  // Token t of a multi-token product (prefill) is workgroup row y: its input and output rows.
  const uint tok = gl_WorkGroupID.y;
  const uint xb = tok * p.cols;
  const uint lid = gl_LocalInvocationID.x;
  const uint base = p.skew + row * p.row_bytes;
  const uint nb = p.cols / 32u;
  float acc = 0.0;
  for (uint b = lid; b < nb; b += WG) {
    const uint o = base + b * 34u;
    const float d = unpackHalf2x16(byte_at(o) | (byte_at(o + 1u) << 8u)).x;
    float s = 0.0;
    for (uint i = 0u; i < 32u; ++i) {
      const int q = int(byte_at(o + 2u + i) << 24) >> 24;
      s += float(q) * x[xb + b * 32u + i];
    }
    acc += d * s;
  }
  red[lid] = acc;
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) red[lid] += red[lid + s];
    barrier();
  }
  if (lid == 0u) y[tok * p.y_stride + p.row0 + row] = red[0];
}
