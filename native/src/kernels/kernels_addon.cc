// JS access to single kernels for tests and diagnostics: `kernels.matmul`, `kernels.rmsnorm`,
// `kernels.rope`, plus the detected ISA level and core count; and greedy sampling's
// `kernels.argmaxFinite`, which the engine uses. Each call validates its inputs
// (sizes against buffer lengths) and throws a JS Error instead of reading out of bounds.
#include <napi.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "addon_registry.h"
#include "core/thread_pool.h"
#include "ggml_types.h"
#include "core/fp16.h"
#include "kernels/attention.h"
#include "kernels/float_fns.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace fulcrum {
namespace {

int64_t int_arg(const Napi::CallbackInfo& info, size_t i, const char* name, int64_t lo, int64_t hi) {
  if (info.Length() <= i || !info[i].IsNumber()) throw Napi::TypeError::New(info.Env(), std::string(name) + " must be a number");
  const int64_t v = info[i].As<Napi::Number>().Int64Value();
  if (v < lo || v > hi)
    throw Napi::RangeError::New(info.Env(), std::string(name) + " = " + std::to_string(v) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

Napi::Float32Array f32_arg(const Napi::CallbackInfo& info, size_t i, const char* name) {
  if (info.Length() <= i || !info[i].IsTypedArray() || info[i].As<Napi::TypedArray>().TypedArrayType() != napi_float32_array)
    throw Napi::TypeError::New(info.Env(), std::string(name) + " must be a Float32Array");
  return info[i].As<Napi::Float32Array>();
}

// A weight as the model's load copy has it on this CPU: repacked (in a copy) into its packed
// layout; throws when rows × cols of the format has none here.
std::vector<uint8_t> packed_copy(Napi::Env env, GgmlType t, const Napi::Uint8Array& w, int64_t rows, int64_t cols) {
  const TypeTraits& tt = type_traits(t);
  if (!quant::packs(t, rows, cols))
    throw Napi::RangeError::New(env, std::string(tt.name) + " " + std::to_string(rows) + "x" + std::to_string(cols) + " has no packed layout on this CPU");
  const quant::PackedFormat& pf = *quant::packed_format(t);
  const size_t rb = static_cast<size_t>(cols / tt.block_size) * tt.type_size;
  std::vector<uint8_t> wp(w.Data(), w.Data() + w.ByteLength()), group(rb * static_cast<size_t>(pf.group_rows));
  quant::repack_rows(pf, wp.data(), rows, cols, group.data());
  return wp;
}

// n_tokens rows of x converted to `t` (the weight format's vec_dot_type).
std::vector<uint8_t> converted(GgmlType t, const float* x, int64_t cols, int64_t n_tokens) {
  const TypeTraits& at = type_traits(t);
  std::vector<uint8_t> act(converted_bytes(t, cols, n_tokens));
  for (int64_t r = 0; r < n_tokens; ++r) at.quantize_row(x + r * cols, act.data() + r * converted_bytes(t, cols, 1), cols);
  return act;
}

// Checks a weight buffer of `type` against rows × cols; returns the format's traits.
const TypeTraits& checked_weight(Napi::Env env, const char* fn, int64_t type, const Napi::Uint8Array& w, int64_t rows, int64_t cols) {
  const TypeTraits& tt = type_traits(static_cast<GgmlType>(type));
  if (!tt.supported || !tt.vec_dot) throw Napi::Error::New(env, std::string(fn) + ": type " + std::to_string(type) + " is not supported");
  if (cols % tt.block_size != 0) throw Napi::RangeError::New(env, std::string(fn) + ": cols is not a multiple of the block size");
  if (static_cast<uint64_t>(w.ByteLength()) != static_cast<uint64_t>(cols / tt.block_size) * tt.type_size * static_cast<uint64_t>(rows))
    throw Napi::RangeError::New(env, std::string(fn) + ": weights hold " + std::to_string(w.ByteLength()) + " bytes, rows × row bytes = " +
                                         std::to_string((cols / tt.block_size) * tt.type_size * rows));
  return tt;
}

// matmul(type, weights: Uint8Array, rows, cols, x: Float32Array, nTokens, threads, path?) -> Float32Array
// (nTokens × rows). path: 'auto' (default: prefill tile kernels where the format has them) or
// 'vecdot' (one vec_dot per output; the reference the tile kernels are tested against).
Napi::Value Matmul(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int64_t type = int_arg(info, 0, "type", 0, static_cast<int64_t>(GgmlType::COUNT) - 1);
  if (!info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array)
    throw Napi::TypeError::New(env, "weights must be a Uint8Array");
  Napi::Uint8Array w = info[1].As<Napi::Uint8Array>();
  const int64_t rows = int_arg(info, 2, "rows", 1, 1 << 20);
  const int64_t cols = int_arg(info, 3, "cols", 1, 1 << 20);
  Napi::Float32Array x = f32_arg(info, 4, "x");
  const int64_t n_tokens = int_arg(info, 5, "nTokens", 1, 1 << 16);
  const int threads = static_cast<int>(int_arg(info, 6, "threads", 1, 256));
  bool use_tiles = true, packed = false;
  if (info.Length() > 7 && !info[7].IsUndefined()) {
    const std::string path = info[7].IsString() ? info[7].As<Napi::String>().Utf8Value() : std::string();
    if (path == "vecdot") use_tiles = false;
    else if (path == "packed") packed = true;
    else if (path != "auto") throw Napi::TypeError::New(env, "matmul: path must be 'auto', 'vecdot' or 'packed'");
  }
  const GgmlType t = static_cast<GgmlType>(type);
  const TypeTraits& tt = checked_weight(env, "matmul", type, w, rows, cols);
  if (static_cast<int64_t>(x.ElementLength()) != cols * n_tokens)
    throw Napi::RangeError::New(env, "matmul: x holds " + std::to_string(x.ElementLength()) + " floats, expected cols × nTokens");
  ThreadPool pool(threads);
  Scratch scratch;
  Napi::Float32Array y = Napi::Float32Array::New(env, static_cast<size_t>(rows * n_tokens));
  if (packed) {
    // As the model's load copy does: the weight repacked (in a copy), activations converted, then
    // the packed kernels.
    const std::vector<uint8_t> wp = packed_copy(env, t, w, rows, cols);
    const std::vector<uint8_t> act = converted(tt.vec_dot_type, x.Data(), cols, n_tokens);
    matmul_packed(pool, *quant::packed_format(t), wp.data(), rows, cols, act.data(), n_tokens, y.Data(), rows);
    return y;
  }
  matmul(pool, t, w.Data(), rows, cols, x.Data(), n_tokens, y.Data(), scratch, use_tiles);
  return y;
}

// gemvGroup(items: {type, weights: Uint8Array, rows}[], x: Float32Array, threads) -> Float32Array[]:
// one token's products with 1..32 matrices of x.length columns, each repacked as the model's load
// copy is, in one grouped pass (gemv_packed_group) — what a decode step runs for a layer's Q, K, V, or a MoE token's experts.
Napi::Value GemvGroup(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsArray()) throw Napi::TypeError::New(env, "gemvGroup: items must be an array");
  Napi::Array arr = info[0].As<Napi::Array>();
  const int n = static_cast<int>(arr.Length());
  if (n < 1 || n > kMaxGemvItems) throw Napi::RangeError::New(env, "gemvGroup: 1 to " + std::to_string(kMaxGemvItems) + " items, got " + std::to_string(n));
  Napi::Float32Array x = f32_arg(info, 1, "x");
  const int threads = static_cast<int>(int_arg(info, 2, "threads", 1, 256));
  const int64_t cols = static_cast<int64_t>(x.ElementLength());
  std::vector<std::vector<uint8_t>> weights(static_cast<size_t>(n)), acts(static_cast<size_t>(n));
  std::vector<Napi::Float32Array> ys;
  PackedGemv items[kMaxGemvItems];
  for (int i = 0; i < n; ++i) {
    Napi::Value v = arr.Get(static_cast<uint32_t>(i));
    if (!v.IsObject()) throw Napi::TypeError::New(env, "gemvGroup: items[" + std::to_string(i) + "] must be an object");
    Napi::Object o = v.As<Napi::Object>();
    if (!o.Get("type").IsNumber() || !o.Get("rows").IsNumber()) throw Napi::TypeError::New(env, "gemvGroup: items[" + std::to_string(i) + "] needs numeric type and rows");
    Napi::Value wv = o.Get("weights");
    if (!wv.IsTypedArray() || wv.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array)
      throw Napi::TypeError::New(env, "gemvGroup: items[" + std::to_string(i) + "].weights must be a Uint8Array");
    const int64_t type = o.Get("type").As<Napi::Number>().Int64Value(), rows = o.Get("rows").As<Napi::Number>().Int64Value();
    if (type < 0 || type >= static_cast<int64_t>(GgmlType::COUNT) || rows < 1 || rows > (1 << 20))
      throw Napi::RangeError::New(env, "gemvGroup: items[" + std::to_string(i) + "] type or rows out of range");
    Napi::Uint8Array w = wv.As<Napi::Uint8Array>();
    const GgmlType t = static_cast<GgmlType>(type);
    const TypeTraits& tt = checked_weight(env, "gemvGroup", type, w, rows, cols);
    weights[static_cast<size_t>(i)] = packed_copy(env, t, w, rows, cols);
    // One converted row per activation format, as a decode step has it (the group's matrices of
    // one format then share their arranged row too).
    const void* act = nullptr;
    for (int j = 0; j < i && !act; ++j)
      if (type_traits(items[j].pf->type).vec_dot_type == tt.vec_dot_type) act = items[j].act;
    if (!act) {
      acts[static_cast<size_t>(i)] = converted(tt.vec_dot_type, x.Data(), cols, 1);
      act = acts[static_cast<size_t>(i)].data();
    }
    ys.push_back(Napi::Float32Array::New(env, static_cast<size_t>(rows)));
    items[i] = PackedGemv{quant::packed_format(t), weights[static_cast<size_t>(i)].data(), rows, cols, act, ys.back().Data()};
  }
  ThreadPool pool(threads);
  gemv_packed_group(pool, items, n);
  Napi::Array out = Napi::Array::New(env, static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out.Set(static_cast<uint32_t>(i), ys[static_cast<size_t>(i)]);
  return out;
}

// rmsnorm(x: Float32Array, w: Float32Array, eps) -> Float32Array (one row)
Napi::Value RmsNorm(const Napi::CallbackInfo& info) {
  Napi::Float32Array x = f32_arg(info, 0, "x"), w = f32_arg(info, 1, "w");
  if (x.ElementLength() != w.ElementLength() || x.ElementLength() == 0) throw Napi::RangeError::New(info.Env(), "rmsnorm: x and w lengths differ or are 0");
  if (!info[2].IsNumber()) throw Napi::TypeError::New(info.Env(), "eps must be a number");
  Napi::Float32Array y = Napi::Float32Array::New(info.Env(), x.ElementLength());
  rmsnorm_row(x.Data(), w.Data(), y.Data(), static_cast<int64_t>(x.ElementLength()), info[2].As<Napi::Number>().FloatValue());
  return y;
}

// swiglu(gate: Float32Array, up: Float32Array) -> Float32Array: silu(gate) · up (the ISA version
// the CPU runs, as the executor uses it).
Napi::Value Swiglu(const Napi::CallbackInfo& info) {
  Napi::Float32Array g = f32_arg(info, 0, "gate"), u = f32_arg(info, 1, "up");
  if (g.ElementLength() != u.ElementLength()) throw Napi::RangeError::New(info.Env(), "swiglu: gate and up lengths differ");
  Napi::Float32Array y = Napi::Float32Array::New(info.Env(), g.ElementLength());
  swiglu_row(g.Data(), u.Data(), y.Data(), static_cast<int64_t>(g.ElementLength()));
  return y;
}

// argmaxFinite(x: Float32Array) -> number: greedy sampling's pick (the engine's sampler calls it
// for every greedy token, so it is not only for tests): the index of the largest value, the first
// on ties; -1 when any value is NaN or ±Inf.
Napi::Value ArgmaxFinite(const Napi::CallbackInfo& info) {
  Napi::Float32Array x = f32_arg(info, 0, "x");
  if (x.ElementLength() == 0) throw Napi::RangeError::New(info.Env(), "argmaxFinite: x is empty");
  return Napi::Number::New(info.Env(), static_cast<double>(kernels::float_fns().argmax_finite(x.Data(), static_cast<int64_t>(x.ElementLength()))));
}

// rope(x: Float32Array, nHeads, headDim, pos, nRot, freqBase, freqScale, neox: boolean) -> Float32Array
Napi::Value Rope(const Napi::CallbackInfo& info) {
  Napi::Float32Array x = f32_arg(info, 0, "x");
  const int64_t heads = int_arg(info, 1, "nHeads", 1, 4096);
  const int64_t hd = int_arg(info, 2, "headDim", 2, 1024);
  const int64_t pos = int_arg(info, 3, "pos", 0, 1 << 24);
  RopeParams p;
  p.n_rot = int_arg(info, 4, "nRot", 2, hd);
  if (p.n_rot % 2) throw Napi::RangeError::New(info.Env(), "nRot must be even");
  if (!info[5].IsNumber() || !info[6].IsNumber()) throw Napi::TypeError::New(info.Env(), "freqBase and freqScale must be numbers");
  p.freq_base = info[5].As<Napi::Number>().FloatValue();
  p.freq_scale = info[6].As<Napi::Number>().FloatValue();
  p.style = info.Length() > 7 && info[7].ToBoolean().Value() ? RopeStyle::Neox : RopeStyle::Normal;
  if (static_cast<int64_t>(x.ElementLength()) != heads * hd) throw Napi::RangeError::New(info.Env(), "rope: x length != nHeads × headDim");
  Napi::Float32Array y = Napi::Float32Array::New(info.Env(), x.ElementLength());
  for (size_t i = 0; i < x.ElementLength(); ++i) y[i] = x[i];
  rope_row(y.Data(), heads, hd, pos, p);
  return y;
}

// attention(q, k, v, nHeads, nKvHeads, headDim, pageTokens, threads, context?, kvFormat?) -> Float32Array
// The executor's causal attention for nTokens = q.length / (nHeads·headDim) query rows (prefill
// for more than one, decode for one) at positions [pos0, pos0 + nTokens), where k and v hold the
// pos0 + nTokens cached positions, [position][nKvHeads·headDim]. They are stored as the KV cache
// stores them (kvFormat 'F16', the default: rounded to f16; 'Q8_0': quantized per 32 values) in
// head-major pages of pageTokens positions; context (default: the positions held) sizes the
// scratch as the model's context does.
Napi::Value Attention(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Float32Array q = f32_arg(info, 0, "q"), k = f32_arg(info, 1, "k"), v = f32_arg(info, 2, "v");
  AttentionShape s;
  s.n_heads = int_arg(info, 3, "nHeads", 1, 1024);
  s.n_kv_heads = int_arg(info, 4, "nKvHeads", 1, s.n_heads);
  s.head_dim = int_arg(info, 5, "headDim", 1, 1024);
  const int64_t page_tokens = int_arg(info, 6, "pageTokens", 1, 1 << 16);
  const int threads = static_cast<int>(int_arg(info, 7, "threads", 1, 256));
  if (s.n_heads % s.n_kv_heads != 0) throw Napi::RangeError::New(env, "attention: nHeads is not a multiple of nKvHeads");
  const int64_t qrow = s.n_heads * s.head_dim, kvrow = s.n_kv_heads * s.head_dim;
  const int64_t q_len = static_cast<int64_t>(q.ElementLength()), kv_len = static_cast<int64_t>(k.ElementLength());
  if (q_len == 0 || q_len % qrow != 0) throw Napi::RangeError::New(env, "attention: q length is not a positive multiple of nHeads × headDim");
  if (kv_len % kvrow != 0 || static_cast<int64_t>(v.ElementLength()) != kv_len)
    throw Napi::RangeError::New(env, "attention: k and v must both hold whole positions of nKvHeads × headDim values");
  const int64_t n_tokens = q_len / qrow, n_kv = kv_len / kvrow;
  if (n_kv < n_tokens) throw Napi::RangeError::New(env, "attention: k and v hold fewer positions than q has tokens");
  if (n_kv > (1 << 20)) throw Napi::RangeError::New(env, "attention: more than 2^20 positions");
  const int64_t ctx = info.Length() > 8 && !info[8].IsUndefined() ? int_arg(info, 8, "context", n_kv, 1 << 20) : n_kv;
  if (s.n_heads * ctx > (int64_t{1} << 24)) throw Napi::RangeError::New(env, "attention: nHeads × context is over 2^24 (score scratch)");
  s.scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));

  KvFormat format = KvFormat::F16;
  if (info.Length() > 9 && !info[9].IsUndefined()) {
    const std::string f = info[9].IsString() ? info[9].As<Napi::String>().Utf8Value() : "(not a string)";
    if (f == "Q8_0") format = KvFormat::Q8_0;
    else if (f != "F16") throw Napi::TypeError::New(env, "attention: kvFormat must be 'F16' or 'Q8_0', got '" + f + "'");
  }
  const std::string refusal = kv_format_refusal(format, s.head_dim);
  if (!refusal.empty()) throw Napi::RangeError::New(env, "attention: " + refusal);
  const int64_t row_bytes = kv_row_bytes(format, s.head_dim);
  const int64_t n_pages = (n_kv + page_tokens - 1) / page_tokens, page = s.n_kv_heads * page_tokens * row_bytes;
  // uint16_t storage: the pages' 2-byte alignment for F16 rows.
  std::vector<uint16_t> kbuf(static_cast<size_t>(n_pages * page / 2 + 1), 0), vbuf(kbuf.size(), 0);
  uint8_t* kb = reinterpret_cast<uint8_t*>(kbuf.data());
  uint8_t* vb = reinterpret_cast<uint8_t*>(vbuf.data());
  std::vector<const uint16_t*> kp(static_cast<size_t>(n_pages)), vp(static_cast<size_t>(n_pages));
  for (int64_t p = 0; p < n_pages; ++p)
    kp[p] = reinterpret_cast<const uint16_t*>(kb + p * page), vp[p] = reinterpret_cast<const uint16_t*>(vb + p * page);
  const float* kf = k.Data();
  const float* vf = v.Data();
  for (int64_t t = 0; t < n_kv; ++t)
    for (int64_t g = 0; g < s.n_kv_heads; ++g) {
      const int64_t at = (t / page_tokens) * page + (g * page_tokens + t % page_tokens) * row_bytes;
      const float* ks = kf + t * kvrow + g * s.head_dim;
      const float* vs = vf + t * kvrow + g * s.head_dim;
      if (format == KvFormat::Q8_0) {
        type_traits(GgmlType::Q8_0).quantize_row(ks, kb + at, s.head_dim);
        type_traits(GgmlType::Q8_0).quantize_row(vs, vb + at, s.head_dim);
        continue;
      }
      for (int64_t d = 0; d < s.head_dim; ++d) {
        reinterpret_cast<uint16_t*>(kb + at)[d] = fp32_to_fp16(ks[d]);
        reinterpret_cast<uint16_t*>(vb + at)[d] = fp32_to_fp16(vs[d]);
      }
    }
  ThreadPool pool(threads);
  AttentionScratch scratch;
  scratch.reserve(s, ctx, n_tokens, threads);
  Napi::Float32Array out = Napi::Float32Array::New(env, static_cast<size_t>(q_len));
  attention(pool, s, q.Data(), n_tokens, n_kv - n_tokens, KvPages{kp.data(), vp.data(), page_tokens, format}, out.Data(), scratch);
  return out;
}

void InitKernels(Napi::Env env, Napi::Object exports) {
  Napi::Object k = Napi::Object::New(env);
  k.Set("matmul", Napi::Function::New(env, Matmul));
  k.Set("gemvGroup", Napi::Function::New(env, GemvGroup));
  k.Set("rmsnorm", Napi::Function::New(env, RmsNorm));
  k.Set("rope", Napi::Function::New(env, Rope));
  k.Set("swiglu", Napi::Function::New(env, Swiglu));
  k.Set("argmaxFinite", Napi::Function::New(env, ArgmaxFinite));
  // gemmTile(type) -> { rows, cols } of the prefill tile kernel matmul uses for that format, or null.
  k.Set("gemmTile", Napi::Function::New(env, [](const Napi::CallbackInfo& i) -> Napi::Value {
    const TypeTraits& tt = type_traits(static_cast<GgmlType>(int_arg(i, 0, "type", 0, static_cast<int64_t>(GgmlType::COUNT) - 1)));
    if (!tt.gemm_tile) return i.Env().Null();
    Napi::Object o = Napi::Object::New(i.Env());
    o.Set("rows", tt.tile_rows);
    o.Set("cols", tt.tile_cols);
    return o;
  }));
  // gemvRows(type) -> rows per pass of the decode GEMV kernel matmul uses for one token, or null.
  k.Set("gemvRows", Napi::Function::New(env, [](const Napi::CallbackInfo& i) -> Napi::Value {
    const TypeTraits& tt = type_traits(static_cast<GgmlType>(int_arg(i, 0, "type", 0, static_cast<int64_t>(GgmlType::COUNT) - 1)));
    if (!tt.gemv) return i.Env().Null();
    return Napi::Number::New(i.Env(), tt.gemv_rows);
  }));
  // packedLayout(type, rows, cols) -> the layout the model's load copy repacks such a weight into
  // on this CPU ('q4_0x16', 'q4_kx8'…), or null (kept in the GGUF layout).
  k.Set("packedLayout", Napi::Function::New(env, [](const Napi::CallbackInfo& i) -> Napi::Value {
    const GgmlType t = static_cast<GgmlType>(int_arg(i, 0, "type", 0, static_cast<int64_t>(GgmlType::COUNT) - 1));
    const int64_t rows = int_arg(i, 1, "rows", 1, 1 << 20), cols = int_arg(i, 2, "cols", 1, 1 << 20);
    if (!quant::packs(t, rows, cols)) return i.Env().Null();
    return Napi::String::New(i.Env(), weight_layout_name(quant::packed_format(t)->layout));
  }));
  k.Set("attention", Napi::Function::New(env, Attention));
  // attentionBlocked(headDim) -> whether prefill attention takes the blocked kernels for that head
  // size on this ISA (else kq_f16 / pv_f16 per token).
  k.Set("attentionBlocked", Napi::Function::New(env, [](const Napi::CallbackInfo& i) {
    const int64_t hd = int_arg(i, 0, "headDim", 1, 1024);
    const kernels::FloatFns& f = kernels::float_fns();
    const bool kq = f.kq_block_f16(0, hd, nullptr, hd, nullptr, 0, 1, hd, 1.f, nullptr, 0, nullptr);
    const bool pv = f.pv_block_f16(0, hd, nullptr, hd, nullptr, 0, 1, 0, 0, nullptr, hd, nullptr);
    return Napi::Boolean::New(i.Env(), kq && pv);
  }));
  k.Set("isaLevel", Napi::Function::New(env, [](const Napi::CallbackInfo& i) { return Napi::String::New(i.Env(), isa_level()); }));
  // gemvPrefetch() -> whether the packed decode GEMVs prefetch their weights in software
  // ('software') or leave it to the CPU ('hardware'): core/isa.h KernelChoice::gemv_prefetch.
  k.Set("gemvPrefetch", Napi::Function::New(env, [](const Napi::CallbackInfo& i) {
    return Napi::String::New(i.Env(), kernel_choice().gemv_prefetch ? "software" : "hardware");
  }));
  // amxInt8() -> whether this process's prefill tiles of the 16-row groups (and of Q8_0/Q4_0/Q5_0/
  // Q4_K left in the GGUF layout) run on AMX-INT8 (KernelChoice::amx_int8: an AMX CPU at avx512,
  // unless FULCRUM_AMX=0).
  k.Set("amxInt8", Napi::Function::New(env, [](const Napi::CallbackInfo& i) { return Napi::Boolean::New(i.Env(), kernel_choice().amx_int8); }));
  // gemvPrefetchQ6K(level?) -> the same for the Q6_K decode GEMV at this process's ISA level, or at
  // `level` ('avx512': KernelChoice::q6_k_gemv_prefetch_bytes; the AVX2 levels:
  // q6_k_avx2_gemv_prefetch, or the two-stream walk, q6_k_gemv_two_streams), for a parent that
  // runs children at another level.
  k.Set("gemvPrefetchQ6K", Napi::Function::New(env, [](const Napi::CallbackInfo& i) {
    const KernelChoice& c = kernel_choice();
    Isa level = c.isa;
    if (i.Length() > 0 && i[0].IsString() && !isa_from_name(i[0].As<Napi::String>().Utf8Value().c_str(), &level))
      throw Napi::RangeError::New(i.Env(), "gemvPrefetchQ6K: level must be scalar, avx2, avxvnni or avx512");
    const bool software = level == Isa::Avx512 ? c.q6_k_gemv_prefetch_bytes > 0 : c.q6_k_avx2_gemv_prefetch || q6_k_gemv_two_streams(c, false);
    return Napi::String::New(i.Env(), software ? "software" : "hardware");
  }));
  // gemvPrefetchQ5_0() -> the same for the Q5_0 decode GEMV (KernelChoice::q5_0_gemv_prefetch).
  k.Set("gemvPrefetchQ5_0", Napi::Function::New(env, [](const Napi::CallbackInfo& i) {
    return Napi::String::New(i.Env(), kernel_choice().q5_0_gemv_prefetch ? "software" : "hardware");
  }));
  // gemvStreams() -> how many streams the software-prefetched decode GEMVs of the 32-element
  // formats read: 4 (the four-stream walks) or 1 (the kernel's own; KernelChoice::gemv_four_streams).
  k.Set("gemvStreams", Napi::Function::New(env, [](const Napi::CallbackInfo& i) { return Napi::Number::New(i.Env(), kernel_choice().gemv_four_streams ? 4 : 1); }));
  // gemvStreamsK() -> how many streams the software-prefetched Q4_K / Q5_K decode GEMVs read: 2 or
  // 1 (their own walk; KernelChoice::k_gemv_two_streams).
  k.Set("gemvStreamsK", Napi::Function::New(env, [](const Napi::CallbackInfo& i) { return Napi::Number::New(i.Env(), kernel_choice().k_gemv_two_streams ? 2 : 1); }));
  k.Set("physicalCores", Napi::Function::New(env, [](const Napi::CallbackInfo& i) { return Napi::Number::New(i.Env(), physical_cores()); }));
  exports.Set("kernels", k);
}

}  // namespace
}  // namespace fulcrum

FULCRUM_ADDON_PART(kernels, fulcrum::InitKernels);
