// JS binding of the Vulkan device's probe and kernels, for `fulcrum devices` and the kernel
// tests against the CPU (vulkan.probe(), vulkan.matvec(...)). One context per process, opened on
// first use; the probe says why there is none.
#include <napi.h>

#include <memory>
#include <mutex>
#include <string>

#include "addon_registry.h"
#include "device/device.h"
#include "device/vulkan/vulkan_context.h"

namespace fulcrum {
namespace {

std::mutex g_mu;
std::unique_ptr<VulkanContext> g_ctx;
std::string g_why;
bool g_tried = false;

VulkanContext* context() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_tried) {
    g_tried = true;
    g_ctx = VulkanContext::open(&g_why);
  }
  return g_ctx.get();
}

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

// matvec(type, weights: Uint8Array, rows, cols, x: Float32Array) -> {y: Float32Array, windows}
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
  const TypeTraits& tt = type_traits(type);
  if (!tt.name || rows < 1 || cols < 1 || cols % tt.block_size != 0) throw Napi::RangeError::New(env, "matvec: bad type or shape");
  const uint64_t wbytes = row_bytes(type, cols) * static_cast<uint64_t>(rows);
  if (w.ByteLength() < wbytes || static_cast<int64_t>(x.ElementLength()) < cols) throw Napi::RangeError::New(env, "matvec: weights or input too short");
  Napi::Float32Array y = Napi::Float32Array::New(env, static_cast<size_t>(rows));
  std::lock_guard<std::mutex> lock(g_mu);
  VulkanContext::Buffer bw, bx, by;
  try {
    bw = c->alloc_device(wbytes, "matvec weights");
    bx = c->alloc_device(static_cast<uint64_t>(cols) * 4, "matvec input");
    by = c->alloc_device(static_cast<uint64_t>(rows) * 4, "matvec output");
    c->upload(bw, 0, w.Data(), wbytes);
    c->upload(bx, 0, x.Data(), static_cast<uint64_t>(cols) * 4);
    c->matvec(type, bw, rows, cols, bx, by);
    c->download(y.Data(), by, 0, static_cast<uint64_t>(rows) * 4);
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

void InitVulkan(Napi::Env env, Napi::Object exports) {
  Napi::Object v = Napi::Object::New(env);
  v.Set("probe", Napi::Function::New(env, Probe));
  v.Set("matvec", Napi::Function::New(env, Matvec));
  exports.Set("vulkan", v);
}

}  // namespace
}  // namespace fulcrum

FULCRUM_ADDON_PART(vulkan, fulcrum::InitVulkan);
