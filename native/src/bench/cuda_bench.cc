#include "bench/cuda_bench.h"

#include <cstring>
#include <memory>
#include <stdexcept>

#include "bench/clock.h"

namespace fulcrum {
namespace bench {
namespace {

constexpr unsigned kHostAllocPortable = 0x1;  // CU_MEMHOSTALLOC_PORTABLE

const CudaDriver& need_driver() {
  std::string why;
  const CudaDriver* d = cuda_driver(&why);
  if (!d) throw std::runtime_error("no CUDA device: " + why);
  return *d;
}

void check(const CudaDriver& d, const char* call, CuResult r) {
  if (r != 0) throw std::runtime_error(d.error(call, r));
}

// The device's primary context, current on this thread for the object's lifetime.
class ContextScope {
 public:
  ContextScope(const CudaDriver& d, int index) : d_(d) {
    check(d, "cuDeviceGet", d.cuDeviceGet(&dev_, index));
    // Fails harmlessly (CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE) when another part made it first.
    d.cuDevicePrimaryCtxSetFlags(dev_, kCuCtxSchedBlockingSync);
    check(d, "cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain(&ctx_, dev_));
    CuResult r = d.cuCtxSetCurrent(ctx_);
    if (r != 0) {
      d.cuDevicePrimaryCtxRelease(dev_);
      throw std::runtime_error(d.error("cuCtxSetCurrent", r));
    }
  }
  ~ContextScope() { d_.cuDevicePrimaryCtxRelease(dev_); }
  CuContext context() const { return ctx_; }
  CuDevice device() const { return dev_; }

 private:
  const CudaDriver& d_;
  CuDevice dev_ = 0;
  CuContext ctx_ = nullptr;
};

struct DeviceMem {
  const CudaDriver& d;
  CuDevicePtr p = 0;
  DeviceMem(const CudaDriver& drv, size_t n) : d(drv) { check(d, "cuMemAlloc", d.cuMemAlloc(&p, n)); }
  ~DeviceMem() { if (p) d.cuMemFree(p); }
};

struct PinnedMem {
  const CudaDriver& d;
  void* p = nullptr;
  PinnedMem(const CudaDriver& drv, size_t n) : d(drv) {
    check(d, "cuMemHostAlloc", d.cuMemHostAlloc(&p, n, kHostAllocPortable));
  }
  ~PinnedMem() { if (p) d.cuMemFreeHost(p); }
};

// Times warm-ups + runs of op(); returns the timed runs.
template <typename Op>
std::vector<int64_t> time_runs(const RunPlan& plan, const CancelToken& cancel, Op op) {
  std::vector<int64_t> ns;
  ns.reserve(static_cast<size_t>(plan.runs));
  for (int r = 0; r < plan.warmups + plan.runs && !cancel.cancelled(); ++r) {
    const int64_t t0 = now_ns();
    op();
    const int64_t t1 = now_ns();
    if (r >= plan.warmups) ns.push_back(t1 - t0);
  }
  return ns;
}

}  // namespace

CudaProbe cuda_probe() {
  CudaProbe p;
  const CudaDriver* d = cuda_driver(&p.reason);
  if (!d) return p;
  d->cuDriverGetVersion(&p.driver_version);
  int count = 0;
  CuResult r = d->cuDeviceGetCount(&count);
  if (r != 0) {
    p.reason = d->error("cuDeviceGetCount", r);
    return p;
  }
  for (int i = 0; i < count; ++i) {
    CudaDeviceInfo info;
    info.index = i;
    CuDevice dev = 0;
    if (d->cuDeviceGet(&dev, i) != 0) continue;
    char name[256] = {0};
    d->cuDeviceGetName(name, sizeof(name) - 1, dev);
    info.name = name;
    d->cuDeviceTotalMem(&info.total_bytes, dev);
    d->cuDeviceGetAttribute(&info.cc_major, kCuAttrComputeCapabilityMajor, dev);
    d->cuDeviceGetAttribute(&info.cc_minor, kCuAttrComputeCapabilityMinor, dev);
    d->cuDeviceGetAttribute(&info.multiprocessors, kCuAttrMultiprocessorCount, dev);
    d->cuDeviceGetAttribute(&info.clock_khz, kCuAttrClockRateKHz, dev);
    d->cuDeviceGetAttribute(&info.memory_clock_khz, kCuAttrMemoryClockRateKHz, dev);
    d->cuDeviceGetAttribute(&info.memory_bus_bits, kCuAttrGlobalMemoryBusWidth, dev);
    p.devices.push_back(std::move(info));
  }
  p.available = !p.devices.empty();
  if (!p.available) p.reason = "the CUDA driver reports no usable devices";
  return p;
}

CudaLinkSamples bench_cuda_link(int device, size_t bytes, const RunPlan& plan, const CancelToken& cancel) {
  const CudaDriver& d = need_driver();
  if (bytes < (1u << 20)) throw std::runtime_error("cuda link bench: transfer must be at least 1 MiB");
  ContextScope scope(d, device);
  CudaLinkSamples s;
  s.bytes = bytes;
  s.small_bytes = 4096;
  check(d, "cuMemGetInfo", d.cuMemGetInfo(&s.free_bytes, &s.total_bytes));

  DeviceMem dev_a(d, bytes), dev_b(d, bytes);
  PinnedMem pinned(d, bytes);
  BigBuffer pageable(bytes);
  std::memset(pageable.data(), 1, bytes);
  std::memset(pinned.p, 1, bytes);

  s.h2d_pageable = time_runs(plan, cancel, [&] { check(d, "cuMemcpyHtoD", d.cuMemcpyHtoD(dev_a.p, pageable.data(), bytes)); });
  s.h2d_pinned = time_runs(plan, cancel, [&] { check(d, "cuMemcpyHtoD", d.cuMemcpyHtoD(dev_a.p, pinned.p, bytes)); });
  s.d2h_pageable = time_runs(plan, cancel, [&] { check(d, "cuMemcpyDtoH", d.cuMemcpyDtoH(pageable.data(), dev_a.p, bytes)); });
  s.d2h_pinned = time_runs(plan, cancel, [&] { check(d, "cuMemcpyDtoH", d.cuMemcpyDtoH(pinned.p, dev_a.p, bytes)); });
  s.d2d = time_runs(plan, cancel, [&] {
    check(d, "cuMemcpyDtoD", d.cuMemcpyDtoD(dev_b.p, dev_a.p, bytes));
    check(d, "cuCtxSynchronize", d.cuCtxSynchronize());
  });
  // Latency: the mean of a batch of small pinned copies per sample.
  const int batch = 64;
  s.small_h2d = time_runs(plan, cancel, [&] {
    for (int i = 0; i < batch; ++i) check(d, "cuMemcpyHtoD", d.cuMemcpyHtoD(dev_a.p, pinned.p, s.small_bytes));
  });
  for (int64_t& v : s.small_h2d) v /= batch;

  CuStream stream = nullptr;
  check(d, "cuStreamCreate", d.cuStreamCreate(&stream, 0));
  const int ops = 256;
  s.tiny_op = time_runs(plan, cancel, [&] {
    for (int i = 0; i < ops; ++i) check(d, "cuMemsetD8Async", d.cuMemsetD8Async(dev_b.p, 0, 1, stream));
    check(d, "cuStreamSynchronize", d.cuStreamSynchronize(stream));
  });
  for (int64_t& v : s.tiny_op) v /= ops;
  d.cuStreamDestroy(stream);
  return s;
}

CudaDmaCopier::CudaDmaCopier(int device, size_t bytes) : d_(&need_driver()), device_(device), bytes_(bytes) {
  const CudaDriver& d = *d_;
  CuDevice dev = 0;
  check(d, "cuDeviceGet", d.cuDeviceGet(&dev, device));
  d.cuDevicePrimaryCtxSetFlags(dev, kCuCtxSchedBlockingSync);
  check(d, "cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain(&ctx_, dev));
  CuResult r = d.cuCtxSetCurrent(ctx_);
  if (r == 0) r = d.cuMemHostAlloc(&host_, bytes, kHostAllocPortable);
  if (r == 0) r = d.cuMemAlloc(&dev_, bytes);
  if (r != 0) {
    if (host_) d.cuMemFreeHost(host_);
    d.cuDevicePrimaryCtxRelease(dev);
    throw std::runtime_error(d.error("cuda dma copier setup", r));
  }
  std::memset(host_, 1, bytes);
}

CudaDmaCopier::~CudaDmaCopier() {
  if (thread_.joinable()) {  // not stop(): it may throw, and a destructor must not
    stop_.store(true);
    thread_.join();
  }
  const CudaDriver& d = *d_;
  d.cuCtxSetCurrent(ctx_);
  if (dev_) d.cuMemFree(dev_);
  if (host_) d.cuMemFreeHost(host_);
  CuDevice dev = 0;
  if (d.cuDeviceGet(&dev, device_) == 0) d.cuDevicePrimaryCtxRelease(dev);
}

void CudaDmaCopier::start() {
  if (thread_.joinable()) throw std::runtime_error("cuda dma copier: already running");
  stop_.store(false);
  copied_.store(0);
  error_.clear();
  started_ns_ = now_ns();
  std::atomic<bool> running{false};
  thread_ = std::thread([this, &running] {
    const CudaDriver& d = *d_;
    CuStream stream = nullptr;
    CuResult r = d.cuCtxSetCurrent(ctx_);
    if (r == 0) r = d.cuStreamCreate(&stream, 0);
    running.store(true, std::memory_order_release);
    if (r != 0) {
      error_ = d.error("cuda dma copier", r);
      return;
    }
    // 16 MiB pieces: large enough for full link speed, small enough to stop promptly.
    const size_t piece = size_t{16} << 20;
    uint64_t copied = 0;
    while (!stop_.load(std::memory_order_relaxed) && r == 0) {
      for (size_t off = 0; off < bytes_ && r == 0 && !stop_.load(std::memory_order_relaxed); off += piece) {
        const size_t n = bytes_ - off < piece ? bytes_ - off : piece;
        r = d.cuMemcpyHtoDAsync(dev_ + off, static_cast<const uint8_t*>(host_) + off, n, stream);
        if (r == 0) r = d.cuStreamSynchronize(stream);
        if (r == 0) copied += n;
      }
    }
    if (r != 0) error_ = d.error("cuMemcpyHtoDAsync", r);
    d.cuStreamDestroy(stream);
    copied_.store(copied, std::memory_order_release);
  });
  while (!running.load(std::memory_order_acquire)) std::this_thread::yield();
}

TransferTotals CudaDmaCopier::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  if (!error_.empty()) throw std::runtime_error(error_);
  TransferTotals t;
  t.ns = now_ns() - started_ns_;
  t.bytes = copied_.load(std::memory_order_acquire);
  return t;
}

}  // namespace bench
}  // namespace fulcrum
