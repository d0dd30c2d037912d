// The `vulkan` device: the executor's view of a GPU through Vulkan compute.
//
// Memory: each allocation is its own device-local VkBuffer, within a budget this device enforces
// (--vram, else the driver's). The host sees an allocation as an address inside a range reserved
// with PROT_NONE: a handle that carries offsets (a sequence's rows, a KV page's position, a split
// matmul's columns) through the model's pointer arithmetic unchanged, and that faults at once if
// host code ever dereferenced it. resolve() maps a handle back to (buffer, offset).
//
// Work: the model calls Kernels (device/kernels.h) for every op placed on the device. Each calling thread (an
// executor lane, or the JS thread during set-up) records into its own stream; sync() submits
// and waits. The model syncs only after ops another lane waits for and at the end of a step, so
// a layer's kernels go to the queue as one submission.
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

#include "device/device.h"
#include "device/range_allocator.h"
#include "device/vulkan/vulkan_context.h"

namespace fulcrum {
namespace {

std::string mib(uint64_t b) {
  char s[48];
  std::snprintf(s, sizeof s, "%.2f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
  return s;
}

std::atomic<uint64_t> g_next_device_id{1};

class VulkanDevice final : public Device, public Kernels {
 public:
  VulkanDevice(VulkanContext& ctx, const VulkanDeviceOptions& o) : ctx_(ctx), id_(g_next_device_id.fetch_add(1)) {
    const VulkanInfo& v = ctx.info();
    capacity_ = o.budget_bytes ? o.budget_bytes : v.budget_bytes;
    if (capacity_ < 4096) throw DeviceError("vulkan: a VRAM budget of " + std::to_string(capacity_) + " bytes is below 4 KiB");
    space_ = (capacity_ + kAlign - 1) / kAlign * kAlign;
    base_ = ::mmap(nullptr, space_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base_ == MAP_FAILED) {
      base_ = nullptr;
      throw DeviceError("vulkan: cannot reserve " + mib(space_) + " of address space for device handles");
    }
    ranges_ = std::make_unique<RangeAllocator>(space_, kAlign);
    pool_ = std::make_unique<ThreadPool>(1);
    info_.name = "vulkan";
    info_.description = v.name + " (Vulkan, " + v.type + " device, subgroup " + std::to_string(v.subgroup_size) + ")";
    info_.emulated = false;
    info_.capacity_bytes = capacity_;
    for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K})
      info_.formats.push_back(type_traits(t).name);
    info_.ops = {"rmsnorm", "layernorm", "matmul", "add_bias", "rope", "store_kv", "attention", "add_residual", "swiglu", "geglu", "gelu", "moe_ffn"};
    info_.threads = 0;
  }

  ~VulkanDevice() override {
    std::vector<VulkanContext::Stream*> streams;
    {
      std::lock_guard<std::mutex> lock(streams_mu_);
      for (auto& [tid, s] : streams_) streams.push_back(s);
      streams_.clear();
    }
    // Work recorded but never submitted (a step that failed part-way) is dropped, not run: the
    // model has freed the buffers it names by now.
    for (VulkanContext::Stream* s : streams) ctx_.destroy_stream(s);
    for (auto& [off, b] : bufs_) ctx_.free(b);
    bufs_.clear();
    pool_.reset();
    if (base_) ::munmap(base_, space_);
  }

  const DeviceInfo& info() const override { return info_; }
  Kernels* kernels() override { return this; }

  void* alloc(size_t bytes, const std::string& what) override {
    if (fail_after_.load() == 0) throw DeviceError("vulkan: device lost (injected failure)");
    std::lock_guard<std::mutex> lock(mu_);
    const size_t n = ranges_->rounded(std::max<size_t>(bytes, 16));
    // The budget is checked before anything is allocated (lavapipe never refuses on its own).
    if (in_use_ + n > capacity_)
      throw DeviceError("vulkan: cannot allocate " + mib(n) + " for " + what + ": " + mib(in_use_) + " of the device's " + mib(capacity_) +
                        " VRAM budget are in use (--vram sets it)");
    const size_t off = ranges_->take(n);
    if (off == RangeAllocator::npos) throw DeviceError("vulkan: no handle range of " + mib(n) + " left for " + what);
    try {
      bufs_[off] = ctx_.alloc_device(n, what);
    } catch (...) {
      ranges_->give(off);
      throw;
    }
    in_use_ += n;
    peak_ = std::max(peak_.load(), in_use_.load());
    return static_cast<uint8_t*>(base_) + off;
  }

  void free(void* p) override {
    if (!p) return;
    std::lock_guard<std::mutex> lock(mu_);
    const size_t off = static_cast<size_t>(static_cast<uint8_t*>(p) - static_cast<uint8_t*>(base_));
    auto it = bufs_.find(off);
    if (it == bufs_.end()) return;  // not ours: a bug, but freeing must never crash the engine
    ctx_.free(it->second);
    bufs_.erase(it);
    in_use_ -= ranges_->give(off);
  }

  uint64_t bytes_in_use() const override { return in_use_.load(); }
  uint64_t peak_bytes() const override { return peak_.load(); }
  void reset_peak() override { peak_ = in_use_.load(); }

  void copy_to_device(void* dst, const void* src, size_t bytes) override { ctx_.upload(stream(), resolve(dst, bytes), src, bytes); }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    VulkanContext::Stream& s = stream();
    ctx_.download(s, dst, resolve(src, bytes), bytes);
  }
  void copy_rows_to_host(void* dst, size_t dst_stride, const void* src, size_t src_stride, size_t row_bytes, size_t rows) override {
    if (rows == 0) return;
    ctx_.download_rows(stream(), dst, dst_stride, resolve(src, (rows - 1) * src_stride + row_bytes), src_stride, row_bytes, rows);
  }
  ThreadPool& pool() override { return *pool_; }

  void check() override {
    int64_t left = fail_after_.load();
    while (left > 0 && !fail_after_.compare_exchange_weak(left, left - 1)) {
    }
    if (left == 0) throw DeviceError("vulkan: device lost (injected failure)");
  }
  void fail_after(int64_t n) override { fail_after_ = n; }

  // Kernels (device/kernels.h). The shaders read f32 activations and the GGUF layout; the
  // host-only ops and the CPU's fused conversions are refused (compile never places them here).
  bool runs(GgmlType type) const override { return VulkanContext::runs(type); }
  GgmlType act_type(GgmlType) const override { return GgmlType::F32; }
  void matmul(GgmlType type, const void* w, const quant::PackedFormat* packed, int64_t rows, int64_t cols, const void* x, int64_t tokens, float* y,
              int64_t y_stride, bool) override {
    if (packed) throw DeviceError("vulkan: matmul given a CPU-repacked weight");
    const uint64_t wbytes = row_bytes(type, cols) * static_cast<uint64_t>(rows);
    ctx_.matvec(stream(), type, resolve(w, wbytes), rows, cols, resolve(x, 4), resolve(y, 4), tokens, y_stride);
  }
  void convert(GgmlType type, const float*, int64_t, int64_t, void*) override {
    throw DeviceError(std::string("vulkan: no conversion to ") + type_traits(type).name + " (the device's matmuls read f32 activations)");
  }
  void rmsnorm(const float* x, const float* w, float* y, int64_t rows, int64_t groups, int64_t width, float eps, const RowConverts& cv) override {
    no_converts(cv, "rmsnorm");
    // Per head (groups > 1): each head a row of its own.
    const int64_t n_rows = rows * groups;
    const uint64_t n = static_cast<uint64_t>(n_rows * width) * 4;
    ctx_.rmsnorm(stream(), resolve(x, n), resolve(w, static_cast<uint64_t>(width) * 4), resolve(y, n), n_rows, width, eps);
  }
  void layernorm(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t width, float eps, const RowConverts& cv) override {
    no_converts(cv, "layernorm");
    const uint64_t n = static_cast<uint64_t>(rows * width) * 4, vw = static_cast<uint64_t>(width) * 4;
    ctx_.layernorm(stream(), resolve(x, n), resolve(w, vw), resolve(b, vw), resolve(y, n), rows, width, eps);
  }
  void rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int64_t* pos, const RopeParams& p) override {
    // The shader rotates runs of consecutive positions (a sequence's rows): one dispatch per run.
    const int64_t w = heads * head_dim;
    for (int64_t r0 = 0; r0 < rows;) {
      int64_t r1 = r0 + 1;
      while (r1 < rows && pos[r1] == pos[r1 - 1] + 1) ++r1;
      ctx_.rope(stream(), resolve(x + r0 * w, static_cast<uint64_t>((r1 - r0) * w) * 4), r1 - r0, heads, head_dim, p.n_rot, pos[r0], p.freq_base,
                p.freq_scale, p.style == RopeStyle::Neox);
      r0 = r1;
    }
  }
  void add(float* y, const float* b, int64_t rows, int64_t width, int64_t b_stride) override {
    // The shader adds b[i % bwidth]: one bias row (bwidth = width) or whole rows (bwidth = n).
    if (b_stride != 0 && b_stride != width) throw DeviceError("vulkan: add with rows of b " + std::to_string(b_stride) + " floats apart");
    const int64_t n = rows * width, bwidth = b_stride == 0 ? width : n;
    ctx_.add(stream(), resolve(y, static_cast<uint64_t>(n) * 4), resolve(b, static_cast<uint64_t>(bwidth) * 4), n, bwidth);
  }
  void swiglu(float* g, const float* u, int64_t rows, int64_t width, const RowConverts& cv) override {
    no_converts(cv, "swiglu");
    const int64_t n = rows * width;
    ctx_.swiglu(stream(), resolve(g, static_cast<uint64_t>(n) * 4), resolve(u, static_cast<uint64_t>(n) * 4), n);
  }
  void geglu(float* g, const float* u, int64_t rows, int64_t width, const RowConverts& cv) override {
    no_converts(cv, "geglu");
    const int64_t n = rows * width;
    const uint64_t bytes = static_cast<uint64_t>(n) * 4;
    ctx_.gelu(stream(), resolve(g, bytes), resolve(u, bytes), n, true);
  }
  void gelu(float* x, int64_t rows, int64_t width, const RowConverts& cv) override {
    no_converts(cv, "gelu");
    const int64_t n = rows * width;
    const uint64_t bytes = static_cast<uint64_t>(n) * 4;
    // Ungated: the second binding is the first buffer again (the shader does not read it).
    ctx_.gelu(stream(), resolve(x, bytes), resolve(x, bytes), n, false);
  }
  void gather_rows(const float* src, float* dst, const uint32_t* rows, int64_t n, int64_t width) override {
    ctx_.move_rows(stream(), resolve(src, 4), resolve(dst, static_cast<uint64_t>(n * width) * 4), resolve(rows, static_cast<uint64_t>(n) * 4), resolve(dst, 4), n,
                   width, false);
  }
  void scatter_rows(const float* src, float* dst, const uint32_t* rows, const float* weights, int64_t n, int64_t width) override {
    ctx_.move_rows(stream(), resolve(src, static_cast<uint64_t>(n * width) * 4), resolve(dst, 4), resolve(rows, static_cast<uint64_t>(n) * 4),
                   resolve(weights, static_cast<uint64_t>(n) * 4), n, width, true);
  }
  void kv_store(const float* rows, int64_t stride, void* page, KvFormat format, int64_t n_pos, int64_t pos_in_page, int64_t n_kv_heads,
                int64_t head_dim, int64_t page_tokens) override {
    if (format != KvFormat::F16)
      throw DeviceError(std::string("vulkan: a ") + kv_format_name(format) + " KV cache on the device (its attention shader reads F16 KV)");
    ctx_.kv_store(stream(), resolve(rows, 4), stride, resolve(page, 4), n_pos, pos_in_page, n_kv_heads, head_dim, page_tokens);
  }
  void attention(const AttentionShape& shape, const float* q, int64_t rows, int64_t pos0, const KvPages& kv, float* out,
                 const AttentionWork& work) override {
    if (!work.k_pool || !work.v_pool || !work.page_table) throw DeviceError("vulkan: attention without its K and V pools");
    if (kv.format != KvFormat::F16)
      throw DeviceError(std::string("vulkan: attention over a ") + kv_format_name(kv.format) + " KV cache (its shader reads F16 KV)");
    // The sequence's pages into the contiguous pools the shader binds (device-side copies).
    const int64_t pt = kv.page_tokens;
    const size_t half = static_cast<size_t>(pt * shape.n_kv_heads * shape.head_dim);  // f16 values of K (or V) per page
    const int64_t n_pages = (pos0 + rows + pt - 1) / pt;
    for (int64_t p = 0; p < n_pages; ++p) {
      copy(work.k_pool + static_cast<size_t>(p) * half, kv.k[p], half * sizeof(uint16_t));
      copy(work.v_pool + static_cast<size_t>(p) * half, kv.v[p], half * sizeof(uint16_t));
    }
    ctx_.attention(stream(), resolve(q, 4), resolve(work.k_pool, 4), resolve(work.v_pool, 4), resolve(work.page_table, 4), resolve(out, 4), rows,
                   shape.n_heads, shape.n_kv_heads, shape.head_dim, pt, pos0, shape.scale, shape.softcap, shape.window);
  }
  void embed(GgmlType, const uint8_t*, size_t, const int32_t*, int64_t, float*, int64_t, float) override {
    throw DeviceError("vulkan: the embedding lookup runs on the host");
  }
  void softcap(float*, int64_t, float) override { throw DeviceError("vulkan: logit soft-capping runs on the host"); }
  void copy(void* dst, const void* src, size_t bytes) override { ctx_.copy(stream(), resolve(dst, bytes), resolve(src, bytes), bytes); }
  void sync() override { ctx_.flush(stream()); }
  void discard() override {
    std::lock_guard<std::mutex> lock(streams_mu_);
    for (auto& [tid, s] : streams_) ctx_.discard(*s);
  }

 private:
  static void no_converts(const RowConverts& cv, const char* op) {
    if (cv.n > 0) throw DeviceError(std::string("vulkan: ") + op + " with fused conversions (the device's matmuls read f32 activations)");
  }
  // The buffer and offset of a handle, checking that `bytes` from it stay inside its allocation.
  VulkanContext::Ref resolve(const void* p, uint64_t bytes) {
    const auto at = reinterpret_cast<uintptr_t>(p), base = reinterpret_cast<uintptr_t>(base_);
    if (at < base || at >= base + space_) throw DeviceError("vulkan: a kernel was given host memory where device memory was expected");
    const size_t off = at - base;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = bufs_.upper_bound(off);
    if (it == bufs_.begin()) throw DeviceError("vulkan: a handle below every allocation");
    --it;
    const uint64_t within = off - it->first;
    if (within + bytes > it->second.size)
      throw DeviceError("vulkan: " + std::to_string(bytes) + " bytes at offset " + std::to_string(within) + " run past an allocation of " +
                        std::to_string(it->second.size));
    return VulkanContext::Ref{&it->second, within};
  }

  // The calling thread's stream, created on first use. A thread-local cache keyed by this
  // device's id avoids the map lookup on every kernel.
  VulkanContext::Stream& stream() {
    thread_local uint64_t cached_id = 0;
    thread_local VulkanContext::Stream* cached = nullptr;
    if (cached_id == id_) return *cached;
    std::lock_guard<std::mutex> lock(streams_mu_);
    VulkanContext::Stream*& s = streams_[std::this_thread::get_id()];
    if (!s) s = ctx_.create_stream();
    cached_id = id_;
    cached = s;
    return *s;
  }

  static constexpr size_t kAlign = 256;  // ≥ minStorageBufferOffsetAlignment of every known GPU
  VulkanContext& ctx_;
  const uint64_t id_;
  DeviceInfo info_;
  uint64_t capacity_ = 0;
  void* base_ = nullptr;
  size_t space_ = 0;
  std::mutex mu_;
  std::unique_ptr<RangeAllocator> ranges_;
  std::map<size_t, VulkanContext::Buffer> bufs_;  // handle offset -> its buffer
  std::atomic<uint64_t> in_use_{0}, peak_{0};
  std::atomic<int64_t> fail_after_{-1};
  std::unique_ptr<ThreadPool> pool_;
  std::mutex streams_mu_;
  std::map<std::thread::id, VulkanContext::Stream*> streams_;
};

}  // namespace

std::unique_ptr<Device> make_vulkan_device(const VulkanDeviceOptions& o) {
  std::string why;
  VulkanContext* ctx = VulkanContext::shared(&why);
  if (!ctx) throw DeviceError("vulkan: unavailable: " + why);
  return std::make_unique<VulkanDevice>(*ctx, o);
}

}  // namespace fulcrum
