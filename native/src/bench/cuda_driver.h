// The CUDA driver API, loaded at run time with dlopen("libcuda.so.1"), so the addon builds and
// runs on machines without CUDA. Only the calls the profiler needs, declared here with the
// driver's documented C signatures (CUresult is an int; 0 is CUDA_SUCCESS).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace fulcrum {
namespace bench {

using CuResult = int;
using CuDevice = int;
using CuContext = struct CuCtxOpaque*;
using CuStream = struct CuStreamOpaque*;
using CuDevicePtr = unsigned long long;

// cuDeviceGetAttribute ids (driver API enum CUdevice_attribute).
constexpr int kCuAttrMultiprocessorCount = 16;
constexpr int kCuAttrClockRateKHz = 13;
constexpr int kCuAttrMemoryClockRateKHz = 36;
constexpr int kCuAttrGlobalMemoryBusWidth = 37;
constexpr int kCuAttrComputeCapabilityMajor = 75;
constexpr int kCuAttrComputeCapabilityMinor = 76;
// Context flag: host threads block (not spin) in synchronisation, so a waiting copy thread
// does not take a core from the CPU kernels being timed.
constexpr unsigned kCuCtxSchedBlockingSync = 0x4;

struct CudaDriver {
  CuResult (*cuInit)(unsigned) = nullptr;
  CuResult (*cuDriverGetVersion)(int*) = nullptr;
  CuResult (*cuDeviceGetCount)(int*) = nullptr;
  CuResult (*cuDeviceGet)(CuDevice*, int) = nullptr;
  CuResult (*cuDeviceGetName)(char*, int, CuDevice) = nullptr;
  CuResult (*cuDeviceTotalMem)(size_t*, CuDevice) = nullptr;  // _v2
  CuResult (*cuDeviceGetAttribute)(int*, int, CuDevice) = nullptr;
  CuResult (*cuGetErrorString)(CuResult, const char**) = nullptr;
  CuResult (*cuDevicePrimaryCtxRetain)(CuContext*, CuDevice) = nullptr;
  CuResult (*cuDevicePrimaryCtxRelease)(CuDevice) = nullptr;  // _v2
  CuResult (*cuDevicePrimaryCtxSetFlags)(CuDevice, unsigned) = nullptr;  // _v2
  CuResult (*cuCtxSetCurrent)(CuContext) = nullptr;
  CuResult (*cuCtxSynchronize)() = nullptr;
  CuResult (*cuMemGetInfo)(size_t*, size_t*) = nullptr;          // _v2
  CuResult (*cuMemAlloc)(CuDevicePtr*, size_t) = nullptr;        // _v2
  CuResult (*cuMemFree)(CuDevicePtr) = nullptr;                  // _v2
  CuResult (*cuMemHostAlloc)(void**, size_t, unsigned) = nullptr;
  CuResult (*cuMemFreeHost)(void*) = nullptr;
  CuResult (*cuMemcpyHtoD)(CuDevicePtr, const void*, size_t) = nullptr;  // _v2
  CuResult (*cuMemcpyDtoH)(void*, CuDevicePtr, size_t) = nullptr;        // _v2
  CuResult (*cuMemcpyDtoD)(CuDevicePtr, CuDevicePtr, size_t) = nullptr;  // _v2
  CuResult (*cuMemcpyHtoDAsync)(CuDevicePtr, const void*, size_t, CuStream) = nullptr;  // _v2
  CuResult (*cuMemsetD8Async)(CuDevicePtr, unsigned char, size_t, CuStream) = nullptr;
  CuResult (*cuStreamCreate)(CuStream*, unsigned) = nullptr;
  CuResult (*cuStreamDestroy)(CuStream) = nullptr;  // _v2
  CuResult (*cuStreamSynchronize)(CuStream) = nullptr;

  // Describes a failed call: "cuMemAlloc: out of memory (2)".
  std::string error(const char* call, CuResult r) const;
};

// Loads the driver and runs cuInit once. Returns nullptr when there is none and writes why
// (library missing, symbol missing, cuInit error, no devices) to *reason.
const CudaDriver* cuda_driver(std::string* reason);

}  // namespace bench
}  // namespace fulcrum
