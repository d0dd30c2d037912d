// JS binding of the Vulkan device's probe and kernels, for `fulcrum devices` and the kernel
// tests against the CPU (vulkan.probe(), vulkan.matvec(...)). One context per process, opened on
// first use; the probe says why there is none.
#include <napi.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "addon_registry.h"
#include "device/device.h"
#include "core/fp16.h"
#include "device/vulkan/vulkan_context.h"

namespace fulcrum {
namespace {

std::mutex g_mu;  // one kernel call at a time on the shared context
std::string g_why;

VulkanContext* context() { return VulkanContext::shared(&g_why); }

Napi::Value Probe(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  VulkanContext* c = context();
  if (!c) {
    o.Set("available", false);
    o.Set("reason", g_why);
    return o;
  }
  const VulkanInfo& v = c->info();
  o.Set("available", true);
  o.Set("name", v.name);
  o.Set("type", v.type);
  o.Set("apiVersion", std::to_string(v.api_version >> 22) + "." + std::to_string((v.api_version >> 12) & 0x3ff) + "." + std::to_string(v.api_version & 0xfff));
  o.Set("heapBytes", static_cast<double>(v.heap_bytes));
  o.Set("budgetBytes", static_cast<double>(v.budget_bytes));
  o.Set("budgetFromExtension", v.budget_from_extension);
  o.Set("maxStorageBufferRange", static_cast<double>(v.max_storage_range));
  o.Set("subgroupSize", v.subgroup_size);
  o.Set("maxWorkgroupSize", v.max_workgroup_size);
  o.Set("sharedMemoryBytes", v.shared_memory_bytes);
  o.Set("transferQueue", v.transfer_queue);
  o.Set("validationMessages", static_cast<double>(c->validation_messages()));
  o.Set("lastValidationMessage", c->last_validation_message());
  return o;
}

// Device buffers of a kernel call, freed however the call ends.
struct Scoped {
  VulkanContext* c;
  std::vector<VulkanContext::Buffer> bufs;
  ~Scoped() {
    for (auto& b : bufs) c->free(b);
  }
  VulkanContext::Buffer& up(const float* data, size_t n, const char* what) {
    bufs.push_back(c->alloc_device(n * 4, what));
    c->upload(c->default_stream(), {&bufs.back(), 0}, data, n * 4);
    return bufs.back();
  }
  // Runs the recorded kernel and reads `n` floats of `b` back.
  void read(VulkanContext::Buffer& b, float* out, size_t n) {
    c->flush(c->default_stream());
    c->download(c->default_stream(), out, {&b, 0}, n * 4);
  }
};

VulkanContext* require(Napi::Env env) {
  VulkanContext* c = context();
  if (!c) throw Napi::Error::New(env, "vulkan: unavailable: " + g_why);
  return c;
}

Napi::Float32Array f32(const Napi::CallbackInfo& info, size_t i, const char* what) {
  if (info.Length() <= i || !info[i].IsTypedArray() || info[i].As<Napi::TypedArray>().TypedArrayType() != napi_float32_array)
    throw Napi::TypeError::New(info.Env(), std::string(what) + " must be a Float32Array");
  return info[i].As<Napi::Float32Array>();
}

int64_t int_arg(const Napi::CallbackInfo& info, size_t i, const char* what) {
  if (info.Length() <= i || !info[i].IsNumber()) throw Napi::TypeError::New(info.Env(), std::string(what) + " must be a number");
  return info[i].As<Napi::Number>().Int64Value();
}

template <class F>
Napi::Value guarded(Napi::Env env, F&& f) {
  std::lock_guard<std::mutex> lock(g_mu);
  try {
    return f();
  } catch (const Napi::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, e.what());
  }
}

// rmsnorm(x, w, rows, width, eps) -> y
Napi::Value RmsNorm(const Napi::CallbackInfo& info) {
  VulkanContext* c = require(info.Env());
  Napi::Float32Array x = f32(info, 0, "x"), w = f32(info, 1, "w");
  const int64_t rows = int_arg(info, 2, "rows"), width = int_arg(info, 3, "width");
  const float eps = static_cast<float>(info[4].As<Napi::Number>().DoubleValue());
  if (rows < 1 || width < 1 || static_cast<int64_t>(x.ElementLength()) < rows * width || static_cast<int64_t>(w.ElementLength()) < width)
    throw Napi::RangeError::New(info.Env(), "rmsnorm: shapes do not match");
  return guarded(info.Env(), [&]() -> Napi::Value {
    Scoped s{c, {}};
    s.bufs.reserve(3);
    auto& bx = s.up(x.Data(), static_cast<size_t>(rows * width), "x");
    auto& bw = s.up(w.Data(), static_cast<size_t>(width), "w");
    s.bufs.push_back(c->alloc_device(static_cast<uint64_t>(rows * width) * 4, "y"));
    c->rmsnorm(c->default_stream(), {&bx, 0}, {&bw, 0}, {&s.bufs.back(), 0}, rows, width, eps);
    Napi::Float32Array y = Napi::Float32Array::New(info.Env(), static_cast<size_t>(rows * width));
    s.read(s.bufs.back(), y.Data(), static_cast<size_t>(rows * width));
    return y;
  });
}

// rope(x, rows, heads, headDim, nRot, pos0, freqBase, freqScale, neox) -> rotated copy
Napi::Value Rope(const Napi::CallbackInfo& info) {
  VulkanContext* c = require(info.Env());
  Napi::Float32Array x = f32(info, 0, "x");
  const int64_t rows = int_arg(info, 1, "rows"), heads = int_arg(info, 2, "heads"), hd = int_arg(info, 3, "headDim"), n_rot = int_arg(info, 4, "nRot"), pos0 = int_arg(info, 5, "pos0");
  const float base = static_cast<float>(info[6].As<Napi::Number>().DoubleValue()), scale = static_cast<float>(info[7].As<Napi::Number>().DoubleValue());
  const bool neox = info[8].ToBoolean().Value();
  if (rows < 1 || heads < 1 || n_rot < 2 || n_rot % 2 || n_rot > hd || static_cast<int64_t>(x.ElementLength()) < rows * heads * hd)
    throw Napi::RangeError::New(info.Env(), "rope: shapes do not match");
  return guarded(info.Env(), [&]() -> Napi::Value {
    Scoped s{c, {}};
    s.bufs.reserve(1);
    auto& bx = s.up(x.Data(), static_cast<size_t>(rows * heads * hd), "x");
    c->rope(c->default_stream(), {&bx, 0}, rows, heads, hd, n_rot, pos0, base, scale, neox);
    Napi::Float32Array y = Napi::Float32Array::New(info.Env(), static_cast<size_t>(rows * heads * hd));
    s.read(bx, y.Data(), static_cast<size_t>(rows * heads * hd));
    return y;
  });
}

// add(y, b) -> y + b broadcast (b's length divides y's); swiglu(g, u) -> silu(g) · u
Napi::Value Add(const Napi::CallbackInfo& info) {
  VulkanContext* c = require(info.Env());
  Napi::Float32Array y = f32(info, 0, "y"), b = f32(info, 1, "b");
  const size_t n = y.ElementLength(), bw = b.ElementLength();
  if (n == 0 || bw == 0 || n % bw) throw Napi::RangeError::New(info.Env(), "add: b's length must divide y's");
  return guarded(info.Env(), [&]() -> Napi::Value {
    Scoped s{c, {}};
    s.bufs.reserve(2);
    auto& by = s.up(y.Data(), n, "y");
    auto& bb = s.up(b.Data(), bw, "b");
    c->add(c->default_stream(), {&by, 0}, {&bb, 0}, static_cast<int64_t>(n), static_cast<int64_t>(bw));
    Napi::Float32Array out = Napi::Float32Array::New(info.Env(), n);
    s.read(by, out.Data(), n);
    return out;
  });
}

Napi::Value SwiGlu(const Napi::CallbackInfo& info) {
  VulkanContext* c = require(info.Env());
  Napi::Float32Array g = f32(info, 0, "g"), u = f32(info, 1, "u");
  const size_t n = g.ElementLength();
  if (n == 0 || u.ElementLength() != n) throw Napi::RangeError::New(info.Env(), "swiglu: g and u differ in length");
  return guarded(info.Env(), [&]() -> Napi::Value {
    Scoped s{c, {}};
    s.bufs.reserve(2);
    auto& bg = s.up(g.Data(), n, "g");
    auto& bu = s.up(u.Data(), n, "u");
    c->swiglu(c->default_stream(), {&bg, 0}, {&bu, 0}, static_cast<int64_t>(n));
    Napi::Float32Array out = Napi::Float32Array::New(info.Env(), n);
    s.read(bg, out.Data(), n);
    return out;
  });
}

// attention(q, k, v, nHeads, nKvHeads, headDim, pageTokens) -> out: the CPU kernel's contract
// (kernels.attention): k and v hold every position [position][nKvHeads·headDim], q the last
// rows. They are laid out as f16 head-major pages stored in the pool in reverse order, so the
// page table is exercised.
Napi::Value Attention(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  VulkanContext* c = require(env);
  Napi::Float32Array q = f32(info, 0, "q"), k = f32(info, 1, "k"), v = f32(info, 2, "v");
  const int64_t nh = int_arg(info, 3, "nHeads"), nkv = int_arg(info, 4, "nKvHeads"), hd = int_arg(info, 5, "headDim"), pt = int_arg(info, 6, "pageTokens");
  if (nh < 1 || nkv < 1 || nh % nkv || hd < 2 || hd % 2 || pt < 1) throw Napi::RangeError::New(env, "attention: bad shape");
  const int64_t qrow = nh * hd, kvrow = nkv * hd;
  const int64_t rows = static_cast<int64_t>(q.ElementLength()) / qrow, n_kv = static_cast<int64_t>(k.ElementLength()) / kvrow;
  if (rows < 1 || rows * qrow != static_cast<int64_t>(q.ElementLength()) || n_kv < rows || v.ElementLength() != k.ElementLength())
    throw Napi::RangeError::New(env, "attention: q, k, v lengths do not match the shape");
  const int64_t n_pages = (n_kv + pt - 1) / pt, page = nkv * pt * hd;  // f16 values per page
  std::vector<uint16_t> kh(static_cast<size_t>(n_pages * page), 0), vh(kh.size(), 0);
  std::vector<uint32_t> table(static_cast<size_t>(n_pages));
  for (int64_t pg = 0; pg < n_pages; ++pg) table[static_cast<size_t>(pg)] = static_cast<uint32_t>((n_pages - 1 - pg) * page / 2);
  for (int64_t t = 0; t < n_kv; ++t)
    for (int64_t g = 0; g < nkv; ++g)
      for (int64_t d = 0; d < hd; ++d) {
        const size_t at = static_cast<size_t>(table[static_cast<size_t>(t / pt)]) * 2 + static_cast<size_t>((g * pt + t % pt) * hd + d);
        kh[at] = fp32_to_fp16(k.Data()[t * kvrow + g * hd + d]);
        vh[at] = fp32_to_fp16(v.Data()[t * kvrow + g * hd + d]);
      }
  return guarded(env, [&]() -> Napi::Value {
    Scoped s{c, {}};
    s.bufs.reserve(5);
    auto& bq = s.up(q.Data(), static_cast<size_t>(rows * qrow), "q");
    s.bufs.push_back(c->alloc_device(kh.size() * 2, "K pool"));
    auto& bk = s.bufs.back();
    c->upload(c->default_stream(), {&bk, 0}, kh.data(), kh.size() * 2);
    s.bufs.push_back(c->alloc_device(vh.size() * 2, "V pool"));
    auto& bv = s.bufs.back();
    c->upload(c->default_stream(), {&bv, 0}, vh.data(), vh.size() * 2);
    s.bufs.push_back(c->alloc_device(table.size() * 4, "page table"));
    auto& bt = s.bufs.back();
    c->upload(c->default_stream(), {&bt, 0}, table.data(), table.size() * 4);
    s.bufs.push_back(c->alloc_device(static_cast<uint64_t>(rows * qrow) * 4, "attention output"));
    c->attention(c->default_stream(), {&bq, 0}, {&bk, 0}, {&bv, 0}, {&bt, 0}, {&s.bufs.back(), 0}, rows, nh, nkv, hd, pt, n_kv - rows);
    Napi::Float32Array out = Napi::Float32Array::New(env, static_cast<size_t>(rows * qrow));
    s.read(s.bufs.back(), out.Data(), static_cast<size_t>(rows * qrow));
    return out;
  });
}

// matvec(type, weights: Uint8Array, rows, cols, x: Float32Array[, tokens]) -> {y: Float32Array, windows}
Napi::Value Matvec(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 5 || !info[0].IsNumber() || !info[1].IsTypedArray() || !info[2].IsNumber() || !info[3].IsNumber() || !info[4].IsTypedArray())
    throw Napi::TypeError::New(env, "matvec(type, weights: Uint8Array, rows, cols, x: Float32Array)");
  VulkanContext* c = context();
  if (!c) throw Napi::Error::New(env, "vulkan: unavailable: " + g_why);
  const auto type = static_cast<GgmlType>(info[0].As<Napi::Number>().Int32Value());
  Napi::Uint8Array w = info[1].As<Napi::Uint8Array>();
  const int64_t rows = info[2].As<Napi::Number>().Int64Value(), cols = info[3].As<Napi::Number>().Int64Value();
  Napi::Float32Array x = info[4].As<Napi::Float32Array>();
  const int64_t tokens = info.Length() > 5 && info[5].IsNumber() ? info[5].As<Napi::Number>().Int64Value() : 1;
  if (tokens < 1 || tokens > 65535) throw Napi::RangeError::New(env, "matvec: tokens outside [1, 65535]");
  const TypeTraits& tt = type_traits(type);
  if (!tt.name || rows < 1 || cols < 1 || cols % tt.block_size != 0) throw Napi::RangeError::New(env, "matvec: bad type or shape");
  const uint64_t wbytes = row_bytes(type, cols) * static_cast<uint64_t>(rows);
  if (w.ByteLength() < wbytes || static_cast<int64_t>(x.ElementLength()) < cols * tokens) throw Napi::RangeError::New(env, "matvec: weights or input too short");
  Napi::Float32Array y = Napi::Float32Array::New(env, static_cast<size_t>(rows * tokens));
  std::lock_guard<std::mutex> lock(g_mu);
  VulkanContext::Buffer bw, bx, by;
  try {
    bw = c->alloc_device(wbytes, "matvec weights");
    bx = c->alloc_device(static_cast<uint64_t>(cols * tokens) * 4, "matvec input");
    by = c->alloc_device(static_cast<uint64_t>(rows * tokens) * 4, "matvec output");
    VulkanContext::Stream& st = c->default_stream();
    c->upload(st, {&bw, 0}, w.Data(), wbytes);
    c->upload(st, {&bx, 0}, x.Data(), static_cast<uint64_t>(cols * tokens) * 4);
    c->matvec(st, type, {&bw, 0}, rows, cols, {&bx, 0}, {&by, 0}, tokens, rows);
    c->flush(st);
    c->download(st, y.Data(), {&by, 0}, static_cast<uint64_t>(rows * tokens) * 4);
  } catch (const std::exception& e) {
    c->free(bw);
    c->free(bx);
    c->free(by);
    throw Napi::Error::New(env, e.what());
  }
  c->free(bw);
  c->free(bx);
  c->free(by);
  Napi::Object out = Napi::Object::New(env);
  out.Set("y", y);
  out.Set("windows", static_cast<double>(c->last_windows()));
  out.Set("validationMessages", static_cast<double>(c->validation_messages()));
  return out;
}

// bench({bytes, runs}) -> timings (ns per run) of the device as the cost model sees it: per
// weight format a decode GEMV (1 token) and a prefill GEMM (64 tokens) over `bytes` of weights,
// copies host->device and device->host of `bytes`, a device-to-device copy, one decode attention
// step over 4096 positions, and an empty submission (launch + submit + wait).
Napi::Value Bench(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  VulkanContext* c = require(env);
  Napi::Object o = info.Length() > 0 && info[0].IsObject() ? info[0].As<Napi::Object>() : Napi::Object::New(env);
  const double bytes_d = o.Has("bytes") && o.Get("bytes").IsNumber() ? o.Get("bytes").As<Napi::Number>().DoubleValue() : 16.0 * (1 << 20);
  const int runs = o.Has("runs") && o.Get("runs").IsNumber() ? o.Get("runs").As<Napi::Number>().Int32Value() : 5;
  if (!(bytes_d >= (1 << 20) && bytes_d <= 1024.0 * (1 << 20)) || runs < 1 || runs > 100) throw Napi::RangeError::New(env, "vulkan.bench: bytes in [1 MiB, 1 GiB], runs in [1, 100]");
  const uint64_t bytes = static_cast<uint64_t>(bytes_d);
  return guarded(env, [&]() -> Napi::Value {
    VulkanContext::Stream& st = c->default_stream();
    auto now = [] { return std::chrono::steady_clock::now(); };
    auto ns = [](auto a, auto b) { return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count()); };
    Napi::Object out = Napi::Object::New(env);
    Scoped s{c, {}};
    s.bufs.reserve(8);
    constexpr int64_t kCols = 4096, kTokens = 64;
    s.bufs.push_back(c->alloc_device(bytes, "bench weights"));
    VulkanContext::Buffer& w = s.bufs.back();
    std::vector<uint8_t> host(bytes, 0x11);  // every f16 scale 0x1111: a small normal number
    const auto h0 = now();
    c->upload(st, {&w, 0}, host.data(), bytes);
    const auto h1 = now();
    out.Set("h2dNs", ns(h0, h1));
    out.Set("bytes", static_cast<double>(bytes));
    std::vector<float> xs(static_cast<size_t>(kCols * kTokens), 0.01f);
    auto& x = s.up(xs.data(), xs.size(), "bench input");
    const int64_t max_rows = static_cast<int64_t>(bytes / row_bytes(GgmlType::F16, kCols));
    s.bufs.push_back(c->alloc_device(static_cast<uint64_t>(max_rows * kTokens) * 4, "bench output"));
    VulkanContext::Buffer& y = s.bufs.back();
    Napi::Array formats = Napi::Array::New(env);
    uint32_t fi = 0;
    for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
      const uint64_t rb = row_bytes(t, kCols);
      const int64_t rows = static_cast<int64_t>(bytes / rb);
      Napi::Object f = Napi::Object::New(env);
      f.Set("format", type_traits(t).name);
      f.Set("rows", static_cast<double>(rows));
      f.Set("cols", static_cast<double>(kCols));
      f.Set("weightBytes", static_cast<double>(rb * static_cast<uint64_t>(rows)));
      for (int64_t tokens : {int64_t{1}, kTokens}) {
        c->matvec(st, t, {&w, 0}, rows, kCols, {&x, 0}, {&y, 0}, tokens, rows);  // warm-up
        c->flush(st);
        Napi::Array times = Napi::Array::New(env);
        const int n = tokens == 1 ? runs : std::max(2, runs / 2);
        for (int r = 0; r < n; ++r) {
          const auto t0 = now();
          c->matvec(st, t, {&w, 0}, rows, kCols, {&x, 0}, {&y, 0}, tokens, rows);
          c->flush(st);
          times.Set(static_cast<uint32_t>(r), ns(t0, now()));
        }
        f.Set(tokens == 1 ? "gemvNs" : "gemmNs", times);
      }
      f.Set("gemmTokens", static_cast<double>(kTokens));
      formats.Set(fi++, f);
    }
    out.Set("formats", formats);
    {
      const auto t0 = now();
      c->download(st, host.data(), {&w, 0}, bytes);
      out.Set("d2hNs", ns(t0, now()));
      s.bufs.push_back(c->alloc_device(bytes, "bench copy"));
      Napi::Array d2d = Napi::Array::New(env);
      for (int r = 0; r < runs; ++r) {
        const auto t1 = now();
        c->copy(st, {&s.bufs.back(), 0}, {&w, 0}, bytes);
        c->flush(st);
        d2d.Set(static_cast<uint32_t>(r), ns(t1, now()));
      }
      out.Set("d2dNs", d2d);
    }
    {
      // Launch: one tiny kernel, submitted and waited for.
      Napi::Array launch = Napi::Array::New(env);
      for (int r = 0; r < 4 * runs; ++r) {
        const auto t0 = now();
        c->add(st, {&y, 0}, {&x, 0}, 64, 64);
        c->flush(st);
        launch.Set(static_cast<uint32_t>(r), ns(t0, now()));
      }
      out.Set("launchNs", launch);
    }
    {
      // Decode attention: 32 heads over 8 KV heads of 128, 4096 positions in pages of 64.
      constexpr int64_t kHeads = 32, kKv = 8, kHd = 128, kPos = 4096, kPt = 64;
      const uint64_t pool = static_cast<uint64_t>(kPos * kKv * kHd) * 2;
      s.bufs.push_back(c->alloc_device(pool, "bench K"));
      VulkanContext::Buffer& kb = s.bufs.back();
      s.bufs.push_back(c->alloc_device(pool, "bench V"));
      VulkanContext::Buffer& vb = s.bufs.back();
      std::vector<uint32_t> table(kPos / kPt);
      for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<uint32_t>(i * kPt * kKv * kHd / 2);
      s.bufs.push_back(c->alloc_device(table.size() * 4, "bench pages"));
      VulkanContext::Buffer& tb = s.bufs.back();
      c->upload(st, {&tb, 0}, table.data(), table.size() * 4);
      std::vector<uint8_t> zeros(pool, 0);
      c->upload(st, {&kb, 0}, zeros.data(), pool);
      c->upload(st, {&vb, 0}, zeros.data(), pool);
      Napi::Array attn = Napi::Array::New(env);
      for (int r = 0; r <= runs; ++r) {
        const auto t0 = now();
        c->attention(st, {&x, 0}, {&kb, 0}, {&vb, 0}, {&tb, 0}, {&y, 0}, 1, kHeads, kKv, kHd, kPt, kPos - 1);
        c->flush(st);
        if (r > 0) attn.Set(static_cast<uint32_t>(r - 1), ns(t0, now()));
      }
      out.Set("attentionNs", attn);
      out.Set("attentionKvBytes", static_cast<double>(2 * pool));
    }
    out.Set("validationMessages", static_cast<double>(c->validation_messages()));
    return out;
  });
}

void InitVulkan(Napi::Env env, Napi::Object exports) {
  Napi::Object v = Napi::Object::New(env);
  v.Set("probe", Napi::Function::New(env, Probe));
  v.Set("matvec", Napi::Function::New(env, Matvec));
  v.Set("rmsnorm", Napi::Function::New(env, RmsNorm));
  v.Set("rope", Napi::Function::New(env, Rope));
  v.Set("add", Napi::Function::New(env, Add));
  v.Set("swiglu", Napi::Function::New(env, SwiGlu));
  v.Set("attention", Napi::Function::New(env, Attention));
  v.Set("bench", Napi::Function::New(env, Bench));
  exports.Set("vulkan", v);
}

}  // namespace
}  // namespace fulcrum

FULCRUM_ADDON_PART(vulkan, fulcrum::InitVulkan);
