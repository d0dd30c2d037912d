// Devices behind one interface. A device owns memory (allocated within a budget it enforces,
// with bytes in use and the peak), a thread pool its kernels run on, and a link to host memory
// that copies in each direction. The executor (exec/executor.h) gives each device its lanes
// (device queue, host->device copy, device->host copy), which run concurrently with events
// between them; the device itself only does what one lane asks of it, synchronously.
//
// Implementations: `cpu` (host memory, today's kernels on the model's pool) and `loopback` (an
// accelerator emulated on the host: its own arena of enforced capacity, its own worker pool,
// copies through a link with an optional bandwidth cap and latency; it runs the CPU kernels, so
// results are bit-identical to `cpu`). The Vulkan device will sit beside them.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/thread_pool.h"

namespace fulcrum {

// A device refused an allocation, was lost, or failed an operation. The message names the device,
// what was being done and the numbers; the engine falls back to the CPU on it.
class DeviceError : public std::runtime_error {
 public:
  explicit DeviceError(const std::string& what) : std::runtime_error(what) {}
};

struct DeviceInfo {
  std::string name;         // "cpu", "loopback"
  std::string description;  // what it is, for `fulcrum devices`
  bool emulated = false;    // never picked by `--device auto`
  uint64_t capacity_bytes = 0;  // the budget the device enforces (0: host memory, no own budget)
  std::vector<std::string> formats;  // weight formats its matmuls run
  std::vector<std::string> ops;      // op kinds it runs
  double link_bytes_per_s = 0;       // host<->device cap (0: uncapped memcpy)
  double link_latency_s = 0;         // added per copy
  int threads = 0;                   // kernel threads
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceInfo& info() const = 0;
  // Host-addressable device memory of `bytes`, 64-byte aligned. Throws DeviceError naming `what`,
  // the bytes, the bytes in use and the capacity when the budget would be exceeded; nothing is
  // allocated then.
  virtual void* alloc(size_t bytes, const std::string& what) = 0;
  virtual void free(void* p) = 0;
  virtual uint64_t bytes_in_use() const = 0;
  virtual uint64_t peak_bytes() const = 0;
  virtual void reset_peak() = 0;
  // Copies through the link (the calling lane's thread waits for the transfer to complete).
  virtual void copy_to_device(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  // The pool the device's kernels run on.
  virtual ThreadPool& pool() = 0;
  // Throws DeviceError if the device was lost. Every lane calls it before each op it runs on the
  // device or its link; each call counts as one operation for fail_after.
  virtual void check() = 0;
  // Test hook: the device is lost after `n` more operations (0: at the next; negative: never).
  virtual void fail_after(int64_t n) = 0;
};

struct LoopbackOptions {
  uint64_t capacity_bytes = uint64_t{1} << 30;
  double link_bytes_per_s = 0;  // 0: uncapped
  double link_latency_s = 0;
  int threads = 1;
};

std::unique_ptr<Device> make_loopback_device(const LoopbackOptions& o);

// The devices this build can open here, with why each other one cannot be (e.g. "vulkan: not
// built"). Loopback is always listed (emulated).
struct DeviceListing {
  std::vector<DeviceInfo> found;
  std::vector<std::string> unavailable;  // "name: reason"
};
DeviceListing list_devices();

}  // namespace fulcrum
