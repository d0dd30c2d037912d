// The profiler's native side, exported as `bench` on the addon: every benchmark returns a
// Promise of raw timings (nanoseconds per timed run); the statistics (median, spread) and the
// profile are computed in engine/hardware/profiler.ts.
#include <napi.h>

#include "addon_registry.h"
#include "bench/cancel.h"
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
  // memoryRead: options.prefetch also prefetches each line 2 KiB ahead, as the decode kernels do.
  const bool prefetch = !kCopy && js_bool(o, fn, "prefetch", false);
  // memoryRead: options.streams reads each thread's slice as that many segments side by side.
  const int streams = kCopy ? 1 : static_cast<int>(js_number(o, fn, "streams", 1, 1, 16, true));
  const CancelToken cancel = CancelToken::current();
  return run_async<std::vector<ThreadSamples>>(
      info.Env(),
      [=] { return kCopy ? bench_memory_copy(bytes, threads, plan, cancel) : bench_memory_read(bytes, threads, plan, cancel, prefetch, streams); },
      [](Napi::Env env, const std::vector<ThreadSamples>& r) { return thread_samples_to_js(env, r); });
}

// The concurrent transfer a kernel benchmark runs under: options.disturb = 'none' (default),
// 'host-memcpy' (a host memcpy thread standing in for a DMA), options.disturbBytes = its buffer size.
struct DisturbSpec {
  std::string kind = "none";
  DisturbMode mode = DisturbMode::None;
  size_t bytes = 256u << 20;
  std::unique_ptr<Disturber> make() const {
    if (kind == "host-memcpy") return std::make_unique<BackgroundCopier>(bytes);
    return nullptr;
  }
};

DisturbSpec disturb_spec(const Napi::Object& o, const char* fn) {
  DisturbSpec d;
  Napi::Value v = o.Get("disturb");
  if (!v.IsUndefined()) {
    if (!v.IsString()) throw Napi::TypeError::New(o.Env(), std::string(fn) + ": disturb must be a string");
    d.kind = v.As<Napi::String>().Utf8Value();
    if (d.kind != "none" && d.kind != "host-memcpy")
      throw Napi::RangeError::New(o.Env(), std::string(fn) + ": disturb must be 'none' or 'host-memcpy', got '" + d.kind + "'");
  }
  Napi::Value inter = o.Get("interleave");
  if (!inter.IsUndefined() && !inter.IsBoolean()) throw Napi::TypeError::New(o.Env(), std::string(fn) + ": interleave must be a boolean");
  if (d.kind != "none") d.mode = inter.IsBoolean() && inter.As<Napi::Boolean>().Value() ? DisturbMode::Interleaved : DisturbMode::Always;
  d.bytes = static_cast<size_t>(js_number(o, fn, "disturbBytes", 256.0 * (1 << 20), 1 << 20, kMaxBufferBytes, true));
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
  spec.tokens = static_cast<int64_t>(js_number(o, fn, "tokens", 1, 1, 64, true));
  if (spec.tokens > spec.kv_len) throw Napi::RangeError::New(info.Env(), std::string(fn) + ": tokens must be at most kvLen");
  spec.ring_bytes = static_cast<size_t>(js_number(o, fn, "ringBytes", 0, 0, kMaxBufferBytes, true));
  {
    Napi::Value f = o.Get("kvFormat");
    const std::string name = f.IsUndefined() ? "F16" : f.IsString() ? f.As<Napi::String>().Utf8Value() : "(not a string)";
    if (name == "Q8_0") spec.format = KvFormat::Q8_0;
    else if (name != "F16") throw Napi::TypeError::New(info.Env(), std::string(fn) + ": kvFormat must be 'F16' or 'Q8_0', got '" + name + "'");
  }
  if (attention_cache_bytes(static_cast<double>(spec.kv_len), static_cast<double>(spec.kv_heads), static_cast<double>(spec.head_dim), spec.format) >
      kMaxBufferBytes)
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


Napi::Value CancelJs(const Napi::CallbackInfo& info) {
  CancelToken::cancel_all();
  return info.Env().Undefined();
}

void InitBench(Napi::Env env, Napi::Object exports) {
  Napi::Object b = Napi::Object::New(env);
  b.Set("memoryRead", Napi::Function::New(env, MemoryBench<false>, "memoryRead"));
  b.Set("memoryCopy", Napi::Function::New(env, MemoryBench<true>, "memoryCopy"));
  b.Set("matmul", Napi::Function::New(env, MatmulJs, "matmul"));
  b.Set("attention", Napi::Function::New(env, AttentionJs, "attention"));
  b.Set("cancel", Napi::Function::New(env, CancelJs, "cancel"));
  exports.Set("bench", b);
}

}  // namespace

FULCRUM_ADDON_PART(bench, InitBench);

}  // namespace bench
}  // namespace fulcrum
