// Micro-benchmarks of the block-format kernels (part "quant_bench"), for the profiler and for
// checking the kernels against the physical limit and against llama.cpp's own kernels:
//  - quantBenchMatVec: one matrix-vector product (activation quantize + rows x vec_dot), single
//    thread, on a given ISA path; median seconds over repetitions.
//  (The memory-bound ceiling they are compared with is the one read benchmark, bench.memoryRead:
//  native/src/bench/memory.h.)
//  - quantPeerOpen / quantPeerMatVec / quantPeerVecDot: the same on ggml's CPU kernels loaded
//    with dlopen from a llama.cpp build (node-llama-cpp ships one). GGUF block layouts are
//    shared, so the peer reads the very same bytes.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "addon_registry.h"
#include "ggml_types.h"
#include "quant/formats/blocks.h"
#include "quant/formats/quant_impl.h"

namespace fulcrum {
namespace quant {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(Napi::Env env, const std::string& msg) { throw Napi::Error::New(env, msg); }

struct AlignedBuf {
  uint8_t* p = nullptr;
  size_t n = 0;
  explicit AlignedBuf(size_t bytes) : n(bytes) {
    p = static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
  }
  ~AlignedBuf() { std::free(p); }
  AlignedBuf(const AlignedBuf&) = delete;
  AlignedBuf& operator=(const AlignedBuf&) = delete;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

const FormatInfo& weight_format(Napi::Env env, const Napi::Value& v) {
  const int id = v.IsNumber() ? v.As<Napi::Number>().Int32Value() : -1;
  const FormatInfo* fi = (id >= 0 && id < static_cast<int>(GgmlType::COUNT)) ? format_info(static_cast<GgmlType>(id)) : nullptr;
  if (!fi || !fi->has_vec_dot) fail(env, "quant bench: type id " + std::to_string(id) + " is not a weight block format");
  return *fi;
}

int64_t dim_arg(Napi::Env env, const Napi::Value& v, const char* what, int64_t max) {
  const double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : -1;
  if (!(d >= 1 && d <= static_cast<double>(max)) || d != std::floor(d))
    fail(env, std::string("quant bench: ") + what + " must be an integer in [1, " + std::to_string(max) + "]");
  return static_cast<int64_t>(d);
}

// A rows x cols matrix of `fi` built from 16 distinct quantized Gaussian rows (the values do not
// change the speed of integer kernels; realistic scales avoid denormal float products).
void fill_matrix(const FormatInfo& fi, int64_t rows, int64_t cols, uint8_t* dst) {
  const size_t rb = static_cast<size_t>(cols / fi.block_size) * fi.type_size;
  std::mt19937 rng(42);
  std::normal_distribution<float> g(0.0f, 0.02f);
  std::vector<float> row(static_cast<size_t>(cols));
  std::vector<uint8_t> q(rb * 16);
  for (int k = 0; k < 16; ++k) {
    for (float& x : row) x = g(rng);
    quant_impl(fi.type, Isa::Scalar)->quantize_row(row.data(), q.data() + rb * k, cols);
  }
  for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + rb * r, q.data() + rb * (r % 16), rb);
}

Isa isa_of(Napi::Env env, const Napi::Value& v) {
  const std::string s = v.IsString() ? v.As<Napi::String>().Utf8Value() : "";
  Isa isa = Isa::Scalar;
  if (!isa_from_name(s.c_str(), &isa)) fail(env, "quant bench: isa must be 'scalar', 'avx2' or 'avx512'");
  if (!isa_allowed(isa)) fail(env, "quant bench: isa " + s + " cannot run on this CPU");
  return isa;
}

// ---- llama.cpp's CPU kernels, for comparison ----
using PeerVecDotFn = void (*)(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy, size_t by, int nrc);
using PeerQuantize = void (*)(const float* x, void* y, int64_t k);
struct Peer {
  void* lib = nullptr;
  std::string path;
};
Peer g_peer;

const char* peer_dot_name(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: return "ggml_vec_dot_q4_0_q8_0";
    case GgmlType::Q4_1: return "ggml_vec_dot_q4_1_q8_1";
    case GgmlType::Q5_0: return "ggml_vec_dot_q5_0_q8_0";
    case GgmlType::Q5_1: return "ggml_vec_dot_q5_1_q8_1";
    case GgmlType::Q8_0: return "ggml_vec_dot_q8_0_q8_0";
    case GgmlType::Q4_K: return "ggml_vec_dot_q4_K_q8_K";
    case GgmlType::Q5_K: return "ggml_vec_dot_q5_K_q8_K";
    case GgmlType::Q6_K: return "ggml_vec_dot_q6_K_q8_K";
    default: return nullptr;
  }
}
const char* peer_quant_name(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0: return "quantize_row_q8_0";
    case GgmlType::Q8_1: return "quantize_row_q8_1";
    case GgmlType::Q8_K: return "quantize_row_q8_K";
    default: return nullptr;
  }
}

template <typename Fn>
Fn peer_sym(Napi::Env env, const char* name) {
  if (!g_peer.lib) fail(env, "quant peer: not opened (call quantPeerOpen(path) first)");
  void* s = dlsym(g_peer.lib, name);
  if (!s) fail(env, std::string("quant peer: ") + g_peer.path + " has no symbol " + name);
  return reinterpret_cast<Fn>(s);
}

// quantPeerOpen(path): dlopen a ggml CPU backend library (e.g. libggml-cpu-<variant>.so).
Napi::Value PeerOpen(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) fail(env, "quantPeerOpen: path must be a string");
  const std::string path = info[0].As<Napi::String>().Utf8Value();
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) fail(env, "quantPeerOpen: cannot load " + path + ": " + dlerror());
  if (g_peer.lib) dlclose(g_peer.lib);
  g_peer.lib = lib;
  g_peer.path = path;
  if (void* init = dlsym(lib, "ggml_cpu_init")) reinterpret_cast<void (*)()>(init)();
  return Napi::Boolean::New(env, true);
}

// quantPeerVecDot(typeId, weightRow: Uint8Array, quantizedActivations: Uint8Array, n) -> number:
// ggml's vec_dot on bytes quantized by this addon (same layouts), for parity checks.
Napi::Value PeerVecDot(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const FormatInfo& fi = weight_format(env, info[0]);
  const FormatInfo* ai = format_info(fi.vec_dot_type);
  if (info.Length() < 4 || !info[1].IsTypedArray() || !info[2].IsTypedArray())
    fail(env, "quantPeerVecDot: (typeId, weightRow: Uint8Array, act: Uint8Array, n)");
  Napi::Uint8Array w = info[1].As<Napi::Uint8Array>();
  Napi::Uint8Array a = info[2].As<Napi::Uint8Array>();
  const int64_t n = dim_arg(env, info[3], "n", 1 << 24);
  if (n % fi.block_size != 0 || w.ByteLength() != static_cast<size_t>(n / fi.block_size) * fi.type_size ||
      a.ByteLength() != static_cast<size_t>(n / ai->block_size) * ai->type_size)
    fail(env, std::string("quantPeerVecDot ") + fi.name + ": sizes do not match n = " + std::to_string(n));
  auto dot = peer_sym<PeerVecDotFn>(env, peer_dot_name(fi.type));
  float s = 0.0f;
  dot(static_cast<int>(n), &s, 0, w.Data(), 0, a.Data(), 0, 1);
  return Napi::Number::New(env, s);
}

const char* peer_dequant_name(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: return "dequantize_row_q4_0";
    case GgmlType::Q4_1: return "dequantize_row_q4_1";
    case GgmlType::Q5_0: return "dequantize_row_q5_0";
    case GgmlType::Q5_1: return "dequantize_row_q5_1";
    case GgmlType::Q8_0: return "dequantize_row_q8_0";
    case GgmlType::Q4_K: return "dequantize_row_q4_K";
    case GgmlType::Q5_K: return "dequantize_row_q5_K";
    case GgmlType::Q6_K: return "dequantize_row_q6_K";
    case GgmlType::Q8_K: return "dequantize_row_q8_K";
    default: return nullptr;
  }
}

// quantPeerDequantize(typeId, data: Uint8Array, n) -> Float32Array: ggml's own decoder (from
// libggml-base, a dependency of the opened library) on the same bytes.
Napi::Value PeerDequantize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int id = info.Length() > 0 && info[0].IsNumber() ? info[0].As<Napi::Number>().Int32Value() : -1;
  const FormatInfo* fi = (id >= 0 && id < static_cast<int>(GgmlType::COUNT)) ? format_info(static_cast<GgmlType>(id)) : nullptr;
  const char* name = fi ? peer_dequant_name(fi->type) : nullptr;
  if (!name) fail(env, "quantPeerDequantize: type id " + std::to_string(id) + " has no ggml decoder here");
  if (info.Length() < 3 || !info[1].IsTypedArray()) fail(env, "quantPeerDequantize: (typeId, data: Uint8Array, n)");
  Napi::Uint8Array data = info[1].As<Napi::Uint8Array>();
  const int64_t n = dim_arg(env, info[2], "n", 1 << 24);
  if (n % fi->block_size != 0 || data.ByteLength() != static_cast<size_t>(n / fi->block_size) * fi->type_size)
    fail(env, std::string("quantPeerDequantize ") + fi->name + ": sizes do not match n = " + std::to_string(n));
  auto deq = peer_sym<void (*)(const void*, float*, int64_t)>(env, name);
  Napi::Float32Array out = Napi::Float32Array::New(env, static_cast<size_t>(n));
  deq(data.Data(), out.Data(), n);
  return out;
}

// quantPeerQuantize(typeId, src: Float32Array) -> Uint8Array: ggml's reference quantizer
// (quantize_row_<type>_ref from libggml-base), to compare quantization quality.
Napi::Value PeerQuantizeRef(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int id = info.Length() > 0 && info[0].IsNumber() ? info[0].As<Napi::Number>().Int32Value() : -1;
  const FormatInfo* fi = (id >= 0 && id < static_cast<int>(GgmlType::COUNT)) ? format_info(static_cast<GgmlType>(id)) : nullptr;
  const char* dq = fi ? peer_dequant_name(fi->type) : nullptr;  // same set of types
  if (!dq) fail(env, "quantPeerQuantize: type id " + std::to_string(id) + " has no ggml quantizer here");
  if (info.Length() < 2 || !info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_float32_array)
    fail(env, "quantPeerQuantize: (typeId, src: Float32Array)");
  Napi::Float32Array src = info[1].As<Napi::Float32Array>();
  const int64_t n = static_cast<int64_t>(src.ElementLength());
  if (n % fi->block_size != 0) fail(env, std::string("quantPeerQuantize ") + fi->name + ": n is not a multiple of the block size");
  const std::string name = std::string("quantize_row_") + (dq + std::strlen("dequantize_row_")) + "_ref";
  auto q = peer_sym<void (*)(const float*, void*, int64_t)>(env, name.c_str());
  Napi::Uint8Array out = Napi::Uint8Array::New(env, static_cast<size_t>(n / fi->block_size) * fi->type_size);
  if (n > 0) q(src.Data(), out.Data(), n);
  return out;
}

struct MatVecResult {
  double seconds;
  size_t bytes;
};

// Times `reps` matrix-vector products; each = quantize the activations + rows x vec_dot.
constexpr size_t kMaxBenchBytes = size_t{4} << 30;  // a benchmark never takes more than 4 GiB

void check_alloc(Napi::Env env, const AlignedBuf& b, const char* what) {
  if (!b.p) fail(env, std::string("quant bench: cannot allocate ") + std::to_string(b.n) + " bytes for " + what);
}

template <typename Quant, typename Dot>
MatVecResult time_matvec(Napi::Env env, const FormatInfo& fi, int64_t rows, int64_t cols, int reps, Quant quant, Dot dot) {
  const FormatInfo* ai = format_info(fi.vec_dot_type);
  const size_t rb = static_cast<size_t>(cols / fi.block_size) * fi.type_size;
  if (rb * static_cast<size_t>(rows) > kMaxBenchBytes)
    fail(env, "quant bench: a " + std::to_string(rows) + " x " + std::to_string(cols) + " " + fi.name + " matrix needs " +
                  std::to_string(rb * static_cast<size_t>(rows)) + " bytes, more than the 4 GiB limit");
  AlignedBuf w(rb * static_cast<size_t>(rows));
  check_alloc(env, w, "the matrix");
  fill_matrix(fi, rows, cols, w.p);
  std::vector<float> x(static_cast<size_t>(cols)), y(static_cast<size_t>(rows));
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (float& v : x) v = g(rng);
  AlignedBuf qa(static_cast<size_t>(cols / ai->block_size) * ai->type_size);
  check_alloc(env, qa, "the activations");
  std::vector<double> times;
  for (int r = -1; r < reps; ++r) {  // r = -1 warms caches and pages
    const auto t0 = Clock::now();
    quant(x.data(), qa.p, cols);
    for (int64_t i = 0; i < rows; ++i) dot(cols, &y[static_cast<size_t>(i)], w.p + rb * static_cast<size_t>(i), qa.p);
    const auto t1 = Clock::now();
    if (r >= 0) times.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  return {median(times), rb * static_cast<size_t>(rows)};
}

Napi::Object result_object(Napi::Env env, const MatVecResult& r) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("seconds", r.seconds);
  o.Set("bytes", static_cast<double>(r.bytes));
  o.Set("gbPerSecond", static_cast<double>(r.bytes) / r.seconds / 1e9);
  return o;
}

// quantBenchMatVec(typeId, rows, cols, isa, reps) -> { seconds, bytes, gbPerSecond }
Napi::Value BenchMatVec(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const FormatInfo& fi = weight_format(env, info[0]);
  const int64_t rows = dim_arg(env, info[1], "rows", 1 << 22);
  const int64_t cols = dim_arg(env, info[2], "cols", 1 << 20);
  if (cols % QK_K != 0) fail(env, "quantBenchMatVec: cols must be a multiple of 256");
  const Isa isa = isa_of(env, info[3]);
  const int reps = static_cast<int>(dim_arg(env, info[4], "reps", 1000));
  const Kernels* k = quant_impl(fi.type, isa);
  const Kernels* ka = quant_impl(fi.vec_dot_type, isa);
  return result_object(env, time_matvec(env, fi, rows, cols, reps, ka->quantize_row,
                                        [k](int64_t n, float* out, const void* w, const void* a) { k->vec_dot(n, out, w, a); }));
}

// quantPeerMatVec(typeId, rows, cols, reps) -> { seconds, bytes, gbPerSecond } on ggml's kernels
Napi::Value PeerMatVec(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const FormatInfo& fi = weight_format(env, info[0]);
  const int64_t rows = dim_arg(env, info[1], "rows", 1 << 22);
  const int64_t cols = dim_arg(env, info[2], "cols", 1 << 20);
  if (cols % QK_K != 0) fail(env, "quantPeerMatVec: cols must be a multiple of 256");
  const int reps = static_cast<int>(dim_arg(env, info[3], "reps", 1000));
  auto dot = peer_sym<PeerVecDotFn>(env, peer_dot_name(fi.type));
  auto quant = peer_sym<PeerQuantize>(env, peer_quant_name(fi.vec_dot_type));
  return result_object(env, time_matvec(env, fi, rows, cols, reps, quant,
                                        [dot](int64_t n, float* out, const void* w, const void* a) {
                                          dot(static_cast<int>(n), out, 0, w, 0, a, 0, 1);
                                        }));
}

void InitQuantBench(Napi::Env env, Napi::Object exports) {
  exports.Set("quantBenchMatVec", Napi::Function::New(env, BenchMatVec, "quantBenchMatVec"));
  exports.Set("quantPeerOpen", Napi::Function::New(env, PeerOpen, "quantPeerOpen"));
  exports.Set("quantPeerVecDot", Napi::Function::New(env, PeerVecDot, "quantPeerVecDot"));
  exports.Set("quantPeerDequantize", Napi::Function::New(env, PeerDequantize, "quantPeerDequantize"));
  exports.Set("quantPeerQuantize", Napi::Function::New(env, PeerQuantizeRef, "quantPeerQuantize"));
  exports.Set("quantPeerMatVec", Napi::Function::New(env, PeerMatVec, "quantPeerMatVec"));
}

}  // namespace
}  // namespace quant
}  // namespace fulcrum

FULCRUM_ADDON_PART(quant_bench, fulcrum::quant::InitQuantBench);
