#version 450
// New K or V rows (f32, `src_stride` floats apart) into one f16 KV page, head-major as the CPU's
// cache ([kv head][position in page][head_dim]): positions [pos_in_page, pos_in_page + n_pos) of
// the page. One invocation per pair of values (head_dim is even), rounded to nearest even as
// the CPU's f32 -> f16 conversion.
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Rows { float src[]; };
layout(std430, binding = 1) buffer Page { uint dst[]; };
layout(push_constant) uniform Params {
  uint src_off; uint src_stride; uint dst_off; uint n_pos; uint pos_in_page; uint n_kv_heads; uint head_dim; uint page_tokens;
} p;  // src_off, src_stride in floats; dst_off in 32-bit words

void main() {
  const uint id = gl_GlobalInvocationID.x;
  const uint pairs = p.head_dim / 2u;
  if (id >= p.n_pos * p.n_kv_heads * pairs) return;
  const uint d2 = id % pairs, g = (id / pairs) % p.n_kv_heads, r = id / (pairs * p.n_kv_heads);
  const uint s = p.src_off + r * p.src_stride + g * p.head_dim + 2u * d2;
  dst[p.dst_off + ((g * p.page_tokens + p.pos_in_page + r) * p.head_dim) / 2u + d2] = packHalf2x16(vec2(src[s], src[s + 1u]));
}
