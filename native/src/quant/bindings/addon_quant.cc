// JS exports of the block formats (part "quant"): quantize, dequantize, vecDot with an explicit
// ISA so tests can compare every path against scalar in one process, and quantIsas/quantFormats
// to say what exists. Every size and type is checked before any kernel runs; bad input throws a
// JS Error naming the type and the sizes.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "addon_registry.h"
#include "ggml_types.h"
#include "quant/formats/quant_impl.h"

namespace fulcrum {
namespace quant {
namespace {

[[noreturn]] void fail(Napi::Env env, const std::string& msg) {
  throw Napi::Error::New(env, msg);
}

const FormatInfo& format_arg(Napi::Env env, const Napi::Value& v, const char* fn) {
  if (!v.IsNumber()) fail(env, std::string(fn) + ": typeId must be a number");
  const double id = v.As<Napi::Number>().DoubleValue();
  if (!(id >= 0 && id < static_cast<int>(GgmlType::COUNT)) || id != std::floor(id))
    fail(env, std::string(fn) + ": unknown ggml type id " + std::to_string(id));
  const FormatInfo* fi = format_info(static_cast<GgmlType>(static_cast<int>(id)));
  if (!fi)
    fail(env, std::string(fn) + ": ggml type id " + std::to_string(static_cast<int>(id)) +
                  " is not a block format this addon implements (Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q8_1 Q4_K Q5_K Q6_K Q8_K)");
  return *fi;
}

Isa best_isa() { return kernel_choice().isa; }

Isa isa_arg(Napi::Env env, const Napi::CallbackInfo& info, size_t i, const char* fn) {
  if (info.Length() <= i || info[i].IsUndefined()) return best_isa();
  if (!info[i].IsString()) fail(env, std::string(fn) + ": isa must be 'scalar', 'avx2', 'avxvnni' or 'avx512'");
  const std::string s = info[i].As<Napi::String>().Utf8Value();
  Isa isa = Isa::Scalar;
  if (!isa_from_name(s.c_str(), &isa)) fail(env, std::string(fn) + ": unknown isa '" + s + "' (expected scalar, avx2, avxvnni or avx512)");
  if (!isa_allowed(isa))
    fail(env, std::string(fn) + ": isa " + s + " cannot run on this CPU (or FULCRUM_ISA caps it; level is " +
                  isa_level() + ")");
  return isa;
}

std::string sizes_of(const FormatInfo& fi) {
  return std::string(fi.name) + " (block of " + std::to_string(fi.block_size) + " elements, " +
         std::to_string(fi.type_size) + " bytes)";
}

void check_count(Napi::Env env, const FormatInfo& fi, int64_t n, const char* fn) {
  if (n % fi.block_size != 0)
    fail(env, std::string(fn) + " " + sizes_of(fi) + ": " + std::to_string(n) +
                  " elements is not a multiple of the block size");
}

void check_finite(Napi::Env env, const float* x, int64_t n, const char* fn, const char* what) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i]))
      fail(env, std::string(fn) + ": " + what + "[" + std::to_string(i) + "] is not finite");
}

// Block structs hold f16 (2-byte) and, in Q8_K, f32 fields; a Uint8Array view may start at any
// byte offset, so misaligned input is copied to an aligned buffer before the kernels read it.
const uint8_t* aligned_blocks(const Napi::Uint8Array& a, std::vector<uint8_t>& copy) {
  const uint8_t* p = a.Data();
  if (reinterpret_cast<uintptr_t>(p) % 4 == 0) return p;
  copy.assign(p, p + a.ByteLength());  // vector storage is aligned for any fundamental type
  return copy.data();
}

// quantize(typeId, src: Float32Array, isa?) -> Uint8Array
Napi::Value Quantize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const FormatInfo& fi = format_arg(env, info[0], "quantize");
  if (info.Length() < 2 || !info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_float32_array)
    fail(env, "quantize: src must be a Float32Array");
  Napi::Float32Array src = info[1].As<Napi::Float32Array>();
  const Isa isa = isa_arg(env, info, 2, "quantize");
  const int64_t n = static_cast<int64_t>(src.ElementLength());
  check_count(env, fi, n, "quantize");
  check_finite(env, src.Data(), n, "quantize", "src");
  const size_t bytes = static_cast<size_t>(n / fi.block_size) * fi.type_size;
  Napi::Uint8Array out = Napi::Uint8Array::New(env, bytes);
  if (n > 0) quant_impl(fi.type, isa)->quantize_row(src.Data(), out.Data(), n);
  return out;
}

// dequantize(typeId, data: Uint8Array, n, isa?) -> Float32Array
Napi::Value Dequantize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const FormatInfo& fi = format_arg(env, info[0], "dequantize");
  if (info.Length() < 2 || !info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array)
    fail(env, "dequantize: data must be a Uint8Array");
  Napi::Uint8Array data = info[1].As<Napi::Uint8Array>();
  if (info.Length() < 3 || !info[2].IsNumber()) fail(env, "dequantize: n (element count) must be a number");
  const double nd = info[2].As<Napi::Number>().DoubleValue();
  if (!(nd >= 0) || nd != std::floor(nd) || nd > 9007199254740991.0)
    fail(env, "dequantize " + sizes_of(fi) + ": n must be an integer in [0, 2^53), got " + std::to_string(nd));
  const int64_t n = static_cast<int64_t>(nd);
  check_count(env, fi, n, "dequantize");
  const Isa isa = isa_arg(env, info, 3, "dequantize");
  const size_t want = static_cast<size_t>(n / fi.block_size) * fi.type_size;
  if (data.ByteLength() != want)
    fail(env, "dequantize " + sizes_of(fi) + ": " + std::to_string(n) + " elements need " + std::to_string(want) +
                  " bytes, got " + std::to_string(data.ByteLength()));
  Napi::Float32Array out = Napi::Float32Array::New(env, static_cast<size_t>(n));
  std::vector<uint8_t> copy;
  if (n > 0) quant_impl(fi.type, isa)->dequantize_row(aligned_blocks(data, copy), out.Data(), n);
  return out;
}

// vecDot(typeId, weightRow: Uint8Array, activations: Float32Array, isa?) -> number
Napi::Value VecDot(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const FormatInfo& fi = format_arg(env, info[0], "vecDot");
  if (!fi.has_vec_dot)
    fail(env, std::string("vecDot: ") + fi.name + " is an activation format and has no vec_dot of its own");
  if (info.Length() < 2 || !info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array)
    fail(env, "vecDot: weightRow must be a Uint8Array");
  if (info.Length() < 3 || !info[2].IsTypedArray() || info[2].As<Napi::TypedArray>().TypedArrayType() != napi_float32_array)
    fail(env, "vecDot: activations must be a Float32Array");
  Napi::Uint8Array w = info[1].As<Napi::Uint8Array>();
  Napi::Float32Array act = info[2].As<Napi::Float32Array>();
  const Isa isa = isa_arg(env, info, 3, "vecDot");
  const int64_t n = static_cast<int64_t>(act.ElementLength());
  check_count(env, fi, n, "vecDot");
  const size_t want = static_cast<size_t>(n / fi.block_size) * fi.type_size;
  if (w.ByteLength() != want)
    fail(env, "vecDot " + sizes_of(fi) + ": " + std::to_string(n) + " activations need a weight row of " +
                  std::to_string(want) + " bytes, got " + std::to_string(w.ByteLength()));
  check_finite(env, act.Data(), n, "vecDot", "activations");
  const FormatInfo* ai = format_info(fi.vec_dot_type);
  std::vector<uint8_t> qa(static_cast<size_t>(n / ai->block_size) * ai->type_size);
  float result = 0.0f;
  if (n > 0) {
    quant_impl(ai->type, isa)->quantize_row(act.Data(), qa.data(), n);
    std::vector<uint8_t> copy;
    quant_impl(fi.type, isa)->vec_dot(n, &result, aligned_blocks(w, copy), qa.data());
  }
  return Napi::Number::New(env, result);
}

// quantIsas() -> the ISA paths this CPU can run (as capped by FULCRUM_ISA), lowest first.
Napi::Value QuantIsas(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Array out = Napi::Array::New(env);
  uint32_t k = 0;
  for (int i = 0; i < kIsaCount; ++i)
    if (isa_allowed(static_cast<Isa>(i))) out.Set(k++, Napi::String::New(env, isa_name(static_cast<Isa>(i))));
  return out;
}

// quantFormats() -> [{ typeId, name, blockSize, typeSize, vecDotType, hasVecDot }]
Napi::Value QuantFormats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Array out = Napi::Array::New(env);
  uint32_t k = 0;
  for (int t = 0; t < static_cast<int>(GgmlType::COUNT); ++t) {
    const FormatInfo* fi = format_info(static_cast<GgmlType>(t));
    if (!fi) continue;
    Napi::Object o = Napi::Object::New(env);
    o.Set("typeId", Napi::Number::New(env, t));
    o.Set("name", Napi::String::New(env, fi->name));
    o.Set("blockSize", Napi::Number::New(env, static_cast<double>(fi->block_size)));
    o.Set("typeSize", Napi::Number::New(env, static_cast<double>(fi->type_size)));
    o.Set("vecDotType", Napi::Number::New(env, static_cast<int>(fi->vec_dot_type)));
    o.Set("hasVecDot", Napi::Boolean::New(env, fi->has_vec_dot));
    out.Set(k++, o);
  }
  return out;
}

void InitQuant(Napi::Env env, Napi::Object exports) {
  exports.Set("quantize", Napi::Function::New(env, Quantize, "quantize"));
  exports.Set("dequantize", Napi::Function::New(env, Dequantize, "dequantize"));
  exports.Set("vecDot", Napi::Function::New(env, VecDot, "vecDot"));
  exports.Set("quantIsas", Napi::Function::New(env, QuantIsas, "quantIsas"));
  exports.Set("quantFormats", Napi::Function::New(env, QuantFormats, "quantFormats"));
}

}  // namespace
}  // namespace quant
}  // namespace fulcrum

FULCRUM_ADDON_PART(quant, fulcrum::quant::InitQuant);
