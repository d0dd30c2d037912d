// Devices behind one interface. A device owns memory (allocated within a budget it enforces,
// with bytes in use and the peak), a thread pool its kernels run on, and a link to host memory
// that copies in each direction. The executor (exec/executor.h) gives each device its lanes
// (device queue, host->device copy, device->host copy), which run concurrently with events
// between them; the device itself only does what one lane asks of it, synchronously.
//
// Implementations: `cpu` (host memory, today's kernels on the model's pool) and `loopback` (an
// accelerator emulated on the host: its own arena of enforced capacity, its own worker pool,
// copies through a link with an optional bandwidth cap and latency; it runs the CPU kernels, so
// results are bit-identical to `cpu`), and `vulkan` (a GPU through Vulkan compute: device-local
// memory the host cannot address, its own kernels; see device/vulkan/).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "ggml_types.h"
#include "device/kernels.h"

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
  std::vector<std::string> kv_formats = {"F16"};  // KV cache formats its attention reads (KvFormat names)
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
  // `rows` strided rows of `row_bytes` each, device -> host (a split matmul's device columns
  // into the host's output rows). Default: one copy per row.
  virtual void copy_rows_to_host(void* dst, size_t dst_stride, const void* src, size_t src_stride, size_t row_bytes, size_t rows) {
    for (size_t r = 0; r < rows; ++r)
      copy_to_host(static_cast<uint8_t*>(dst) + r * dst_stride, static_cast<const uint8_t*>(src) + r * src_stride, row_bytes);
  }
  // The pool the device's kernels run on.
  virtual ThreadPool& pool() = 0;
  // Throws DeviceError if the device was lost. Every lane calls it before each op it runs on the
  // device or its link; each call counts as one operation for fail_after.
  virtual void check() = 0;
  // Test hook: the device is lost after `n` more operations (0: at the next; negative: never).
  virtual void fail_after(int64_t n) = 0;
  // The device's own kernels (device/kernels.h), or nullptr when it runs the CPU kernels on
  // pool() over host-addressable memory (cpu, loopback).
  virtual Kernels* kernels() { return nullptr; }
};

struct LoopbackOptions {
  uint64_t capacity_bytes = uint64_t{1} << 30;
  double link_bytes_per_s = 0;  // 0: uncapped
  double link_latency_s = 0;
  int threads = 1;
};

std::unique_ptr<Device> make_loopback_device(const LoopbackOptions& o);

struct VulkanDeviceOptions {
  uint64_t budget_bytes = 0;  // --vram; 0: the driver's budget (VK_EXT_memory_budget, else heap × 0.8)
};
// The process's Vulkan device (the best one the loader finds). Throws DeviceError saying why
// there is none (no loader, no device, no shaders in this build).
std::unique_ptr<Device> make_vulkan_device(const VulkanDeviceOptions& o);

// The devices this build can open here, with why each other one cannot be (e.g. "vulkan: not
// built"). Loopback is always listed (emulated).
struct DeviceListing {
  std::vector<DeviceInfo> found;
  std::vector<std::string> unavailable;  // "name: reason"
};
DeviceListing list_devices();

}  // namespace fulcrum
