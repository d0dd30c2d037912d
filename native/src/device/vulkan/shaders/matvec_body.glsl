// The matrix-vector / matrix-matrix product shared by every weight format. One workgroup per
// (output row, tile of TILE tokens): the row is dequantized once, 32 values (a "sub-block") per
// invocation at a time, and multiplied with up to TILE input rows, so a prefill of n tokens
// reads each weight row ceil(n / TILE) times instead of n times (the tiling that matters when
// weight bandwidth binds). Sums: subgroup adds, then one partial per subgroup in shared memory.
// The including shader declares `w` (binding 0), includes blocks.glsl and defines
// dequant(row_base_byte, sub_block, out v[32]) filling v with the sub-block's values (0 past cols).
// Windows: the bound weight range may start `skew` bytes before row 0 (offset alignment).
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_basic : require
layout(std430, binding = 1) readonly buffer Input { float x[]; };
layout(std430, binding = 2) buffer Output { float y[]; };
layout(push_constant) uniform Params {
  uint rows; uint cols; uint row_bytes; uint skew; uint row0; uint y_stride; uint x_off; uint y_off; uint tokens;
} p;
const uint TILE = 8u;
const uint MAX_SUBGROUPS = 64u;
shared float partial[TILE * MAX_SUBGROUPS];

void main() {
  const uint row = gl_WorkGroupID.x;
  const uint t0 = gl_WorkGroupID.y * TILE;
  const uint nt = min(TILE, p.tokens - t0);
  const uint base = p.skew + row * p.row_bytes;
  const uint nsub = (p.cols + 31u) / 32u;
  float acc[TILE];
  for (uint t = 0u; t < TILE; ++t) acc[t] = 0.0;
  float v[32];
  for (uint s = gl_LocalInvocationID.x; s < nsub; s += WG) {
    dequant(base, s, v);
    const uint c0 = s * 32u;
    const uint n = min(32u, p.cols - c0);
    for (uint t = 0u; t < nt; ++t) {
      const uint xb = p.x_off + (t0 + t) * p.cols + c0;
      float d = 0.0;
      for (uint i = 0u; i < n; ++i) d += v[i] * x[xb + i];
      acc[t] += d;
    }
  }
  for (uint t = 0u; t < nt; ++t) {
    const float s = subgroupAdd(acc[t]);
    if (subgroupElect()) partial[t * MAX_SUBGROUPS + gl_SubgroupID] = s;
  }
  barrier();
  if (gl_LocalInvocationID.x < nt) {
    const uint t = gl_LocalInvocationID.x;
    float s = 0.0;
    for (uint k = 0u; k < gl_NumSubgroups; ++k) s += partial[t * MAX_SUBGROUPS + k];
    y[p.y_off + (t0 + t) * p.y_stride + p.row0 + row] = s;
  }
}
