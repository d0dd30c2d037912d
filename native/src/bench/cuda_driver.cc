#include "bench/cuda_driver.h"

#include <dlfcn.h>

#include <mutex>

namespace fulcrum {
namespace bench {
namespace {

struct Loaded {
  CudaDriver driver;
  bool ok = false;
  std::string reason;
};

template <typename Fn>
bool bind(void* lib, const char* name, Fn* slot, std::string* reason) {
  void* sym = dlsym(lib, name);
  if (!sym) {
    *reason = std::string("libcuda.so.1 lacks ") + name;
    return false;
  }
  *slot = reinterpret_cast<Fn>(sym);
  return true;
}

Loaded load() {
  Loaded l;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    l.reason = std::string("libcuda.so.1 not loadable (") + (e ? e : "unknown error") + ")";
    return l;
  }
  CudaDriver& d = l.driver;
  std::string& why = l.reason;
  const bool bound =
      bind(lib, "cuInit", &d.cuInit, &why) && bind(lib, "cuDriverGetVersion", &d.cuDriverGetVersion, &why) &&
      bind(lib, "cuDeviceGetCount", &d.cuDeviceGetCount, &why) && bind(lib, "cuDeviceGet", &d.cuDeviceGet, &why) &&
      bind(lib, "cuDeviceGetName", &d.cuDeviceGetName, &why) &&
      bind(lib, "cuDeviceTotalMem_v2", &d.cuDeviceTotalMem, &why) &&
      bind(lib, "cuDeviceGetAttribute", &d.cuDeviceGetAttribute, &why) &&
      bind(lib, "cuGetErrorString", &d.cuGetErrorString, &why) &&
      bind(lib, "cuDevicePrimaryCtxRetain", &d.cuDevicePrimaryCtxRetain, &why) &&
      bind(lib, "cuDevicePrimaryCtxRelease_v2", &d.cuDevicePrimaryCtxRelease, &why) &&
      bind(lib, "cuDevicePrimaryCtxSetFlags_v2", &d.cuDevicePrimaryCtxSetFlags, &why) &&
      bind(lib, "cuCtxSetCurrent", &d.cuCtxSetCurrent, &why) && bind(lib, "cuCtxSynchronize", &d.cuCtxSynchronize, &why) &&
      bind(lib, "cuMemGetInfo_v2", &d.cuMemGetInfo, &why) && bind(lib, "cuMemAlloc_v2", &d.cuMemAlloc, &why) &&
      bind(lib, "cuMemFree_v2", &d.cuMemFree, &why) && bind(lib, "cuMemHostAlloc", &d.cuMemHostAlloc, &why) &&
      bind(lib, "cuMemFreeHost", &d.cuMemFreeHost, &why) && bind(lib, "cuMemcpyHtoD_v2", &d.cuMemcpyHtoD, &why) &&
      bind(lib, "cuMemcpyDtoH_v2", &d.cuMemcpyDtoH, &why) && bind(lib, "cuMemcpyDtoD_v2", &d.cuMemcpyDtoD, &why) &&
      bind(lib, "cuMemcpyHtoDAsync_v2", &d.cuMemcpyHtoDAsync, &why) &&
      bind(lib, "cuMemsetD8Async", &d.cuMemsetD8Async, &why) && bind(lib, "cuStreamCreate", &d.cuStreamCreate, &why) &&
      bind(lib, "cuStreamDestroy_v2", &d.cuStreamDestroy, &why) &&
      bind(lib, "cuStreamSynchronize", &d.cuStreamSynchronize, &why);
  if (!bound) return l;  // the library stays loaded: unloading a driver is not worth the risk
  CuResult r = d.cuInit(0);
  if (r != 0) {
    why = d.error("cuInit", r);
    return l;
  }
  int count = 0;
  r = d.cuDeviceGetCount(&count);
  if (r != 0) {
    why = d.error("cuDeviceGetCount", r);
    return l;
  }
  if (count == 0) {
    why = "the CUDA driver reports no devices";
    return l;
  }
  l.ok = true;
  return l;
}

}  // namespace

std::string CudaDriver::error(const char* call, CuResult r) const {
  const char* text = nullptr;
  if (cuGetErrorString) cuGetErrorString(r, &text);
  return std::string(call) + ": " + (text ? text : "error") + " (" + std::to_string(r) + ")";
}

const CudaDriver* cuda_driver(std::string* reason) {
  static Loaded loaded = load();
  if (!loaded.ok) {
    if (reason) *reason = loaded.reason;
    return nullptr;
  }
  return &loaded.driver;
}

}  // namespace bench
}  // namespace fulcrum
