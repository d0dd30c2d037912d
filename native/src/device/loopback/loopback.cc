// The loopback device: an accelerator emulated on the host. Its memory is one address range of
// exactly `capacity_bytes` (reserved with mmap, committed by the OS only where written) carved by
// a first-fit allocator, so the capacity is enforced by construction, not by a counter beside
// malloc. Kernels run on its own thread pool (the device queue's "cores"); copies go through a
// link that, when capped, holds the copying lane until latency + bytes / bandwidth has passed, as
// a DMA engine on a PCIe link would. It runs the CPU kernels, so its results are bit-identical to
// the cpu device and every scheduling path can be tested exactly; it makes no speed claims.
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "device/device.h"
#include "device/range_allocator.h"
#include "ggml_types.h"
#include "kernels/attention.h"

namespace fulcrum {
namespace {

std::string mib(uint64_t b) {
  char s[48];
  std::snprintf(s, sizeof s, "%.2f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
  return s;
}

class LoopbackDevice final : public Device {
 public:
  explicit LoopbackDevice(const LoopbackOptions& o) : opts_(o) {
    if (o.capacity_bytes < 4096) throw DeviceError("loopback: capacity " + std::to_string(o.capacity_bytes) + " bytes is below 4 KiB");
    if (o.threads < 1 || o.threads > 256) throw DeviceError("loopback: threads " + std::to_string(o.threads) + " outside [1, 256]");
    if (!(o.link_bytes_per_s >= 0) || !(o.link_latency_s >= 0)) throw DeviceError("loopback: link bandwidth and latency must be >= 0");
    size_ = (o.capacity_bytes + kAlign - 1) / kAlign * kAlign;
    base_ = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base_ == MAP_FAILED) {
      base_ = nullptr;
      throw DeviceError("loopback: cannot reserve " + mib(size_) + " of address space for the device arena");
    }
    ranges_ = std::make_unique<RangeAllocator>(size_, kAlign);
    pool_ = std::make_unique<ThreadPool>(o.threads);
    info_.name = "loopback";
    info_.description = "accelerator emulated on the host (own arena, worker pool and link; runs the CPU kernels)";
    info_.emulated = true;
    info_.capacity_bytes = o.capacity_bytes;
    info_.link_bytes_per_s = o.link_bytes_per_s;
    info_.link_latency_s = o.link_latency_s;
    info_.threads = o.threads;
    for (int t = 0; t < static_cast<int>(GgmlType::COUNT); ++t) {
      const TypeTraits& tt = type_traits(static_cast<GgmlType>(t));
      if (tt.name && tt.supported && tt.vec_dot) info_.formats.push_back(tt.name);
    }
    info_.kv_formats = cpu_kv_format_names();  // it runs the CPU attention kernels
    info_.ops = {"embed", "rmsnorm", "layernorm", "matmul", "add_bias", "rope", "store_kv", "attention", "add_residual", "swiglu", "geglu", "gelu", "moe_ffn"};
  }
  ~LoopbackDevice() override {
    pool_.reset();
    if (base_) ::munmap(base_, size_);
  }

  const DeviceInfo& info() const override { return info_; }

  void* alloc(size_t bytes, const std::string& what) override {
    if (fail_after_.load() == 0) throw DeviceError("loopback: device lost (injected failure)");
    std::lock_guard<std::mutex> lock(mu_);
    const size_t n = std::max<size_t>(kAlign, ranges_->rounded(bytes));
    const size_t off = ranges_->take(n);
    if (off != RangeAllocator::npos) {
      in_use_ += n;
      peak_ = std::max(peak_.load(), in_use_.load());
      return static_cast<uint8_t*>(base_) + off;
    }
    const bool fragmented = in_use_ + n <= size_;
    throw DeviceError("loopback: cannot allocate " + mib(n) + " for " + what + ": " + mib(in_use_) + " of the device's " +
                      mib(opts_.capacity_bytes) + " are in use" + (fragmented ? " (no free range that large)" : ""));
  }

  void free(void* p) override {
    if (!p) return;
    std::lock_guard<std::mutex> lock(mu_);
    // Not ours gives back 0: a bug, but freeing must never crash the engine.
    in_use_ -= ranges_->give(static_cast<size_t>(static_cast<uint8_t*>(p) - static_cast<uint8_t*>(base_)));
  }

  uint64_t bytes_in_use() const override { return in_use_.load(); }
  uint64_t peak_bytes() const override { return peak_.load(); }
  void reset_peak() override { peak_ = in_use_.load(); }

  void copy_to_device(void* dst, const void* src, size_t bytes) override { link_copy(dst, src, bytes); }
  void copy_to_host(void* dst, const void* src, size_t bytes) override { link_copy(dst, src, bytes); }
  ThreadPool& pool() override { return *pool_; }

  void check() override {
    int64_t left = fail_after_.load();
    while (left > 0 && !fail_after_.compare_exchange_weak(left, left - 1)) {
    }
    if (left == 0) throw DeviceError("loopback: device lost (injected failure)");
  }
  void fail_after(int64_t n) override { fail_after_ = n; }

 private:
  void link_copy(void* dst, const void* src, size_t bytes) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst, src, bytes);
    if (opts_.link_bytes_per_s <= 0 && opts_.link_latency_s <= 0) return;
    const double secs = opts_.link_latency_s + (opts_.link_bytes_per_s > 0 ? static_cast<double>(bytes) / opts_.link_bytes_per_s : 0.0);
    const auto until = t0 + std::chrono::nanoseconds(static_cast<int64_t>(secs * 1e9));
    // Sleep for the bulk, then yield: a copy lane holds no core while "the DMA engine" works.
    const auto now = std::chrono::steady_clock::now();
    if (until - now > std::chrono::microseconds(200)) std::this_thread::sleep_until(until - std::chrono::microseconds(100));
    while (std::chrono::steady_clock::now() < until) std::this_thread::yield();
  }

  static constexpr size_t kAlign = 64;
  LoopbackOptions opts_;
  DeviceInfo info_;
  void* base_ = nullptr;
  size_t size_ = 0;
  std::mutex mu_;
  std::unique_ptr<RangeAllocator> ranges_;
  std::atomic<uint64_t> in_use_{0}, peak_{0};
  std::atomic<int64_t> fail_after_{-1};
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace

std::unique_ptr<Device> make_loopback_device(const LoopbackOptions& o) { return std::make_unique<LoopbackDevice>(o); }

}  // namespace fulcrum
