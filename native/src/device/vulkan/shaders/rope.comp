#version 450
// Rotary position embedding in place, both styles: normal pairs (2i, 2i+1), NeoX pairs
// (i, i + n_rot/2). Row r is at position pos0 + r; θ_i = pos · freq_scale · base^(-2i/n_rot).
// sin/cos are the device's: within a few ulps of the C library's, more at large angles.
// One invocation per (row, head, pair).
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) buffer Data { float v[]; };
layout(push_constant) uniform Params { uint rows; uint heads; uint head_dim; uint n_rot; uint pos0; float freq_base; float freq_scale; uint neox; uint off; } p;  // off in floats

void main() {
  const uint half_rot = p.n_rot / 2u;
  const uint id = gl_GlobalInvocationID.x;
  if (id >= p.rows * p.heads * half_rot) return;
  const uint i = id % half_rot, h = (id / half_rot) % p.heads, r = id / (half_rot * p.heads);
  // θ as the CPU forms it: a running product in float (rope_row), so angles round alike.
  const float theta_scale = pow(p.freq_base, -2.0 / float(p.n_rot));
  float t = float(p.pos0 + r);
  for (uint k = 0u; k < i; ++k) t *= theta_scale;
  const float theta = t * p.freq_scale;
  const float c = cos(theta), s = sin(theta);
  const uint base = p.off + (r * p.heads + h) * p.head_dim;
  const uint a_i = base + (p.neox != 0u ? i : 2u * i);
  const uint b_i = base + (p.neox != 0u ? i + half_rot : 2u * i + 1u);
  const float a = v[a_i], b = v[b_i];
  v[a_i] = a * c - b * s;
  v[b_i] = a * s + b * c;
}
