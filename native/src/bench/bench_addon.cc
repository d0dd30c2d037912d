// The profiler's native side, exported as `bench` on the addon: every benchmark returns a
// Promise of raw timings (nanoseconds per timed run); the statistics (median, spread) and the
// profile are computed in engine/hardware/profiler.ts.
#include <napi.h>

#include "addon_registry.h"
#include "bench/cancel.h"
#include "bench/cublas_bench.h"
#include "bench/cuda_bench.h"
#include "bench/js_args.h"
#include "bench/kernels_bench.h"
#include "bench/memory.h"

#include <algorithm>
#include <memory>
#include <string>

namespace fulcrum {
namespace bench {
namespace {

constexpr double kMaxBufferBytes = 16.0 * (1ull << 30);
constexpr double kMaxActivationBytes = 2.0 * (1ull << 30);

RunPlan run_plan(const Napi::Object& o, const char* fn) {
  RunPlan p;
  p.warmups = static_cast<int>(js_number(o, fn, "warmups", 1, 0, 100, true));
  p.runs = static_cast<int>(js_number(o, fn, "runs", 5, 1, 1000, true));
  return p;
}

Napi::Array thread_samples_to_js(Napi::Env env, const std::vector<ThreadSamples>& v) {
  Napi::Array a = Napi::Array::New(env, v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("threads", v[i].threads);
    o.Set("ns", js_ns_array(env, v[i].ns));
    if (!v[i].cpu_ns.empty()) o.Set("cpuNs", js_ns_array(env, v[i].cpu_ns));
    a.Set(static_cast<uint32_t>(i), o);
  }
  return a;
}

template <bool kCopy>
Napi::Value MemoryBench(const Napi::CallbackInfo& info) {
  const char* fn = kCopy ? "bench.memoryCopy" : "bench.memoryRead";
  Napi::Object o = js_options(info, fn);
  const size_t bytes = static_cast<size_t>(js_number(o, fn, "bytes", 0, 1 << 20, kMaxBufferBytes, true));
  const std::vector<int> threads = js_int_list(o, fn, "threads", 1, 1024);
  const RunPlan plan = run_plan(o, fn);
  const CancelToken cancel = CancelToken::current();
  return run_async<std::vector<ThreadSamples>>(
      info.Env(),
      [=] { return kCopy ? bench_memory_copy(bytes, threads, plan, cancel) : bench_memory_read(bytes, threads, plan, cancel); },
      [](Napi::Env env, const std::vector<ThreadSamples>& r) { return thread_samples_to_js(env, r); });
}

Napi::Value CudaProbeJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const CudaProbe p = cuda_probe();
  Napi::Object o = Napi::Object::New(env);
  o.Set("available", p.available);
  if (!p.available) o.Set("reason", p.reason);
  o.Set("driverVersion", p.driver_version);
  Napi::Array devs = Napi::Array::New(env, p.devices.size());
  for (size_t i = 0; i < p.devices.size(); ++i) {
    const CudaDeviceInfo& d = p.devices[i];
    Napi::Object e = Napi::Object::New(env);
    e.Set("index", d.index);
    e.Set("name", d.name);
    e.Set("totalBytes", static_cast<double>(d.total_bytes));
    e.Set("computeCapability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor));
    e.Set("multiprocessors", d.multiprocessors);
    e.Set("clockKHz", d.clock_khz);
    e.Set("memoryClockKHz", d.memory_clock_khz);
    e.Set("memoryBusBits", d.memory_bus_bits);
    devs.Set(static_cast<uint32_t>(i), e);
  }
  o.Set("devices", devs);
  return o;
}

Napi::Value CudaLinkJs(const Napi::CallbackInfo& info) {
  const char* fn = "bench.cudaLink";
  Napi::Object o = js_options(info, fn);
  const int device = static_cast<int>(js_number(o, fn, "device", 0, 0, 64, true));
  const size_t bytes = static_cast<size_t>(js_number(o, fn, "bytes", 256.0 * (1 << 20), 1 << 20, kMaxBufferBytes, true));
  const RunPlan plan = run_plan(o, fn);
  const CancelToken cancel = CancelToken::current();
  return run_async<CudaLinkSamples>(
      info.Env(), [=] { return bench_cuda_link(device, bytes, plan, cancel); },
      [](Napi::Env env, const CudaLinkSamples& s) {
        Napi::Object r = Napi::Object::New(env);
        r.Set("bytes", static_cast<double>(s.bytes));
        r.Set("smallBytes", static_cast<double>(s.small_bytes));
        r.Set("freeBytes", static_cast<double>(s.free_bytes));
        r.Set("totalBytes", static_cast<double>(s.total_bytes));
        r.Set("h2dPageable", js_ns_array(env, s.h2d_pageable));
        r.Set("h2dPinned", js_ns_array(env, s.h2d_pinned));
        r.Set("d2hPageable", js_ns_array(env, s.d2h_pageable));
        r.Set("d2hPinned", js_ns_array(env, s.d2h_pinned));
        r.Set("d2d", js_ns_array(env, s.d2d));
        r.Set("smallH2d", js_ns_array(env, s.small_h2d));
        r.Set("tinyOp", js_ns_array(env, s.tiny_op));
        return r;
      });
}

// The concurrent transfer a kernel benchmark runs under: options.disturb = 'none' (default),
// 'host-memcpy' or 'cuda-h2d', options.disturbBytes = its buffer size.
struct DisturbSpec {
  std::string kind = "none";
  DisturbMode mode = DisturbMode::None;
  size_t bytes = 256u << 20;
  int device = 0;
  std::unique_ptr<Disturber> make() const {
    if (kind == "host-memcpy") return std::make_unique<BackgroundCopier>(bytes);
    if (kind == "cuda-h2d") return std::make_unique<CudaDmaCopier>(device, bytes);
    return nullptr;
  }
};

DisturbSpec disturb_spec(const Napi::Object& o, const char* fn) {
  DisturbSpec d;
  Napi::Value v = o.Get("disturb");
  if (!v.IsUndefined()) {
    if (!v.IsString()) throw Napi::TypeError::New(o.Env(), std::string(fn) + ": disturb must be a string");
    d.kind = v.As<Napi::String>().Utf8Value();
    if (d.kind != "none" && d.kind != "host-memcpy" && d.kind != "cuda-h2d")
      throw Napi::RangeError::New(o.Env(), std::string(fn) + ": disturb must be 'none', 'host-memcpy' or 'cuda-h2d', got '" + d.kind + "'");
  }
  Napi::Value inter = o.Get("interleave");
  if (!inter.IsUndefined() && !inter.IsBoolean()) throw Napi::TypeError::New(o.Env(), std::string(fn) + ": interleave must be a boolean");
  if (d.kind != "none") d.mode = inter.IsBoolean() && inter.As<Napi::Boolean>().Value() ? DisturbMode::Interleaved : DisturbMode::Always;
  d.bytes = static_cast<size_t>(js_number(o, fn, "disturbBytes", 256.0 * (1 << 20), 1 << 20, kMaxBufferBytes, true));
  d.device = static_cast<int>(js_number(o, fn, "cudaDevice", 0, 0, 64, true));
  return d;
}

Napi::Object kernel_result_to_js(Napi::Env env, const KernelBenchResult& r) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("byThreads", thread_samples_to_js(env, r.by_threads));
  if (!r.contended_by_threads.empty()) o.Set("contendedByThreads", thread_samples_to_js(env, r.contended_by_threads));
  o.Set("bytesPerRun", static_cast<double>(r.bytes_per_run));
  o.Set("flopsPerRun", r.flops_per_run);
  o.Set("copies", r.copies);
  if (r.disturbed) {
    Napi::Object t = Napi::Object::New(env);
    t.Set("kind", r.transfer_kind);
    t.Set("bytes", static_cast<double>(r.transfer.bytes));
    t.Set("ns", static_cast<double>(r.transfer.ns));
    o.Set("transfer", t);
  }
  return o;
}

Napi::Value MatmulJs(const Napi::CallbackInfo& info) {
  const char* fn = "bench.matmul";
  Napi::Object o = js_options(info, fn);
  MatmulBenchSpec spec;
  spec.type = static_cast<GgmlType>(static_cast<int>(js_number(o, fn, "type", -1, 0, static_cast<double>(GgmlType::COUNT) - 1, true)));
  spec.rows = static_cast<int64_t>(js_number(o, fn, "rows", 0, 1, 1 << 20, true));
  spec.cols = static_cast<int64_t>(js_number(o, fn, "cols", 0, 1, 1 << 20, true));
  spec.tokens = static_cast<int64_t>(js_number(o, fn, "tokens", 1, 1, 1 << 14, true));
  spec.ring_bytes = static_cast<size_t>(js_number(o, fn, "ringBytes", 0, 0, kMaxBufferBytes, true));
  if (static_cast<double>(spec.rows) * static_cast<double>(spec.cols) * 4.0 > kMaxBufferBytes)
    throw Napi::RangeError::New(info.Env(), std::string(fn) + ": rows × cols is too large");
  // Activations (tokens × cols floats) and outputs (tokens × rows floats) are allocated too.
  if (static_cast<double>(spec.tokens) * static_cast<double>(std::max(spec.rows, spec.cols)) * 4.0 > kMaxActivationBytes)
    throw Napi::RangeError::New(info.Env(), std::string(fn) + ": tokens × max(rows, cols) is too large");
  const std::vector<int> threads = js_int_list(o, fn, "threads", 1, 1024);
  const RunPlan plan = run_plan(o, fn);
  const DisturbSpec disturb = disturb_spec(o, fn);
  const CancelToken cancel = CancelToken::current();
  return run_async<KernelBenchResult>(
      info.Env(),
      [=] {
        std::unique_ptr<Disturber> d = disturb.make();
        return bench_matmul(spec, threads, plan, d.get(), disturb.mode, cancel);
      },
      kernel_result_to_js);
}

Napi::Value AttentionJs(const Napi::CallbackInfo& info) {
  const char* fn = "bench.attention";
  Napi::Object o = js_options(info, fn);
  AttentionBenchSpec spec;
  spec.kv_len = static_cast<int64_t>(js_number(o, fn, "kvLen", 0, 1, 1 << 20, true));
  spec.heads = static_cast<int64_t>(js_number(o, fn, "heads", 32, 1, 1024, true));
  spec.kv_heads = static_cast<int64_t>(js_number(o, fn, "kvHeads", 8, 1, 1024, true));
  spec.head_dim = static_cast<int64_t>(js_number(o, fn, "headDim", 128, 1, 1024, true));
  spec.ring_bytes = static_cast<size_t>(js_number(o, fn, "ringBytes", 0, 0, kMaxBufferBytes, true));
  if (4.0 * static_cast<double>(spec.kv_len) * static_cast<double>(spec.kv_heads * spec.head_dim) > kMaxBufferBytes)
    throw Napi::RangeError::New(info.Env(), std::string(fn) + ": kvLen × kvHeads × headDim is too large");
  const std::vector<int> threads = js_int_list(o, fn, "threads", 1, 1024);
  const RunPlan plan = run_plan(o, fn);
  const DisturbSpec disturb = disturb_spec(o, fn);
  const CancelToken cancel = CancelToken::current();
  return run_async<KernelBenchResult>(
      info.Env(),
      [=] {
        std::unique_ptr<Disturber> d = disturb.make();
        return bench_attention(spec, threads, plan, d.get(), disturb.mode, cancel);
      },
      kernel_result_to_js);
}

Napi::Value CublasJs(const Napi::CallbackInfo& info) {
  const char* fn = "bench.cublas";
  Napi::Object o = js_options(info, fn);
  const int device = static_cast<int>(js_number(o, fn, "device", 0, 0, 64, true));
  const RunPlan plan = run_plan(o, fn);
  const CancelToken cancel = CancelToken::current();
  return run_async<CublasSamples>(
      info.Env(), [=] { return bench_cublas(device, plan, cancel); },
      [](Napi::Env env, const CublasSamples& s) {
        Napi::Object r = Napi::Object::New(env);
        r.Set("library", s.library);
        Napi::Object g = Napi::Object::New(env);
        g.Set("m", static_cast<double>(s.gemm_m));
        g.Set("n", static_cast<double>(s.gemm_n));
        g.Set("k", static_cast<double>(s.gemm_k));
        g.Set("ns", js_ns_array(env, s.gemm));
        r.Set("gemm", g);
        Napi::Object v = Napi::Object::New(env);
        v.Set("rows", static_cast<double>(s.gemv_rows));
        v.Set("cols", static_cast<double>(s.gemv_cols));
        v.Set("ns", js_ns_array(env, s.gemv));
        r.Set("gemv", v);
        Napi::Object a = Napi::Object::New(env);
        a.Set("heads", static_cast<double>(s.attn_heads));
        a.Set("kvLen", static_cast<double>(s.attn_kv));
        a.Set("headDim", static_cast<double>(s.attn_head_dim));
        a.Set("ns", js_ns_array(env, s.attention));
        r.Set("attention", a);
        return r;
      });
}

Napi::Value CancelJs(const Napi::CallbackInfo& info) {
  CancelToken::cancel_all();
  return info.Env().Undefined();
}

void InitBench(Napi::Env env, Napi::Object exports) {
  Napi::Object b = Napi::Object::New(env);
  b.Set("memoryRead", Napi::Function::New(env, MemoryBench<false>, "memoryRead"));
  b.Set("memoryCopy", Napi::Function::New(env, MemoryBench<true>, "memoryCopy"));
  b.Set("cudaProbe", Napi::Function::New(env, CudaProbeJs, "cudaProbe"));
  b.Set("cudaLink", Napi::Function::New(env, CudaLinkJs, "cudaLink"));
  b.Set("matmul", Napi::Function::New(env, MatmulJs, "matmul"));
  b.Set("attention", Napi::Function::New(env, AttentionJs, "attention"));
  b.Set("cublas", Napi::Function::New(env, CublasJs, "cublas"));
  b.Set("cancel", Napi::Function::New(env, CancelJs, "cancel"));
  exports.Set("bench", b);
}

}  // namespace

FULCRUM_ADDON_PART(bench, InitBench);

}  // namespace bench
}  // namespace fulcrum
