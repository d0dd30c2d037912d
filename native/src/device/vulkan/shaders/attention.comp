#version 450
// Causal attention over a paged f16 KV cache, one workgroup per (query row, head); grouped-query
// heads read KV head h / (n_heads / n_kv_heads). Pages hold page_tokens positions head-major
// ([kv head][position][head_dim] f16, as the CPU's KV cache), anywhere in the pool: the page
// table gives each page's word offset. Row r is at position pos0 + r and attends to [0, pos0 + r].
// Positions go in chunks of WG (one score per invocation), with an online softmax (running max
// and sum, the accumulator rescaled per chunk), so any context length fits in shared memory.
// Numerics follow the CPU's where they can: q rounded to f16 before the q·k products, f32 sums.
// Gemma 2/3: scores soft-capped (softcap > 0: tanh(s / softcap) · softcap) and sliding-window
// layers (window > 0: a row sees its last `window` positions, so its walk starts there).
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Query { float q[]; };
layout(std430, binding = 1) readonly buffer KPool { uint kp[]; };
layout(std430, binding = 2) readonly buffer VPool { uint vp[]; };
layout(std430, binding = 3) readonly buffer Pages { uint page_at[]; };
layout(std430, binding = 4) writeonly buffer Output { float o[]; };
layout(push_constant) uniform Params { uint n_heads; uint n_kv_heads; uint head_dim; uint page_tokens; uint pos0; float scale; uint q_off; uint o_off; float softcap; uint window; } p;  // offsets in floats

const uint MAX_DIM = 256;
shared float qs[MAX_DIM];
shared float sc[WG];
shared float red[WG];

float half_at(uint word_base, uint i, bool is_v) {
  const uint w = is_v ? vp[word_base + (i >> 1)] : kp[word_base + (i >> 1)];
  return unpackHalf2x16(w)[i & 1u];
}

// Word offset of position t's row of KV head g.
uint row_base(uint t, uint g) {
  return page_at[t / p.page_tokens] + ((g * p.page_tokens + t % p.page_tokens) * p.head_dim) / 2u;
}

void main() {
  const uint head = gl_WorkGroupID.x, row = gl_WorkGroupID.y, lid = gl_LocalInvocationID.x;
  const uint g = head / (p.n_heads / p.n_kv_heads);
  const uint hd = p.head_dim;
  const uint qbase = (row * p.n_heads + head) * hd;  // relative to q_off and o_off
  for (uint d = lid; d < hd; d += WG) qs[d] = unpackHalf2x16(packHalf2x16(vec2(q[p.q_off + qbase + d], 0.0))).x;
  barrier();
  const uint n_pos = p.pos0 + row + 1u;
  const uint PER = (MAX_DIM + WG - 1u) / WG;
  float acc[PER];
  for (uint k = 0u; k < PER; ++k) acc[k] = 0.0;
  float m = -1.0 / 0.0, l = 0.0;
  const uint first = p.window > 0u && n_pos > p.window ? n_pos - p.window : 0u;
  for (uint c0 = first; c0 < n_pos; c0 += WG) {
    const uint t = c0 + lid;
    float s = -1.0 / 0.0;
    if (t < n_pos) {
      const uint kb = row_base(t, g);
      s = 0.0;
      for (uint d = 0u; d < hd; ++d) s += qs[d] * half_at(kb, d, false);
      s *= p.scale;
      if (p.softcap > 0.0) s = tanh(s * (1.0 / p.softcap)) * p.softcap;
    }
    sc[lid] = s;
    red[lid] = s;
    barrier();
    for (uint k = WG / 2u; k > 0u; k >>= 1u) {
      if (lid < k) red[lid] = max(red[lid], red[lid + k]);
      barrier();
    }
    const float new_m = max(m, red[0]);
    const float factor = exp(m - new_m);
    l *= factor;
    for (uint k = 0u; k < PER; ++k) acc[k] *= factor;
    const uint n = min(WG, n_pos - c0);
    for (uint j = 0u; j < n; ++j) {
      const float pj = exp(sc[j] - new_m);
      l += pj;
      const uint vb = row_base(c0 + j, g);
      for (uint k = 0u; k < PER; ++k) {
        const uint d = lid + k * WG;
        if (d < hd) acc[k] += pj * half_at(vb, d, true);
      }
    }
    m = new_m;
    barrier();
  }
  for (uint k = 0u; k < PER; ++k) {
    const uint d = lid + k * WG;
    if (d < hd) o[p.o_off + qbase + d] = acc[k] / l;
  }
}
