// The matrix-vector / matrix-matrix product shared by every weight format. A workgroup of WG
// invocations computes WG / tpr output rows, tpr invocations per row (tpr: a power of two the
// host picks from the row's width, so a narrow row does not leave most of the workgroup idle),
// for a tile of up to TILE tokens: each row is dequantized once, 32 values (a "sub-block") per
// invocation at a time, and multiplied with up to TILE input rows, so a prefill of n tokens
// reads each weight row ceil(n / TILE) times instead of n times. Sums: a shared-memory tree per
// row (portable whatever subgroup size the driver runs).
// The including shader declares `w` (binding 0), includes blocks.glsl and defines
// dequant(row_base_byte, sub_block, out v[32]) filling v with the sub-block's values (0 past cols).
// Windows: the bound weight range may start `skew` bytes before row 0 (offset alignment).
layout(std430, binding = 1) readonly buffer Input { float x[]; };
layout(std430, binding = 2) buffer Output { float y[]; };
layout(push_constant) uniform Params {
  uint rows; uint cols; uint row_bytes; uint skew; uint row0; uint y_stride; uint x_off; uint y_off; uint tokens; uint tpr;
} p;
const uint TILE = 8u;
shared float partial[TILE * WG];

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint lane = lid % p.tpr;
  const uint row = gl_WorkGroupID.x * (WG / p.tpr) + lid / p.tpr;
  const bool live = row < p.rows;
  const uint t0 = gl_WorkGroupID.y * TILE;
  const uint nt = min(TILE, p.tokens - t0);
  const uint base = p.skew + row * p.row_bytes;
  const uint nsub = (p.cols + 31u) / 32u;
  float acc[TILE];
  for (uint t = 0u; t < TILE; ++t) acc[t] = 0.0;
  float v[32];
  if (live) {
    for (uint s = lane; s < nsub; s += p.tpr) {
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
  }
  for (uint t = 0u; t < nt; ++t) partial[t * WG + lid] = acc[t];
  barrier();
  for (uint k = p.tpr / 2u; k > 0u; k >>= 1u) {
    if (lane < k)
      for (uint t = 0u; t < nt; ++t) partial[t * WG + lid] += partial[t * WG + lid + k];
    barrier();
  }
  if (live && lane == 0u)
    for (uint t = 0u; t < nt; ++t) y[p.y_off + (t0 + t) * p.y_stride + p.row0 + row] = partial[t * WG + lid];
}
