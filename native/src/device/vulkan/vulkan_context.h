// A Vulkan compute device: instance, the best physical device (discrete > integrated > virtual
// > CPU, e.g. lavapipe), a compute queue (and a transfer-only queue where the device has one),
// device-local buffers within a VRAM budget Fulcrum enforces itself (lavapipe never refuses an
// allocation), uploads and downloads through host-visible staging buffers (also where memory is
// unified, so CI runs the discrete-GPU path), and compute pipelines from the SPIR-V embedded at
// build time, with workgroup sizes taken from the device's limits. Tensors larger than
// maxStorageBufferRange are bound through windows.
#pragma once
#include <atomic>
#include <initializer_list>
#include <cstdint>
#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <vector>

#include "device/vulkan/vk_api.h"
#include "ggml_types.h"

namespace fulcrum {

struct VulkanInfo {
  std::string name;
  std::string type;  // "discrete", "integrated", "virtual", "cpu", "other"
  uint32_t api_version = 0;
  uint64_t heap_bytes = 0;       // the device-local heap
  uint64_t budget_bytes = 0;     // what Fulcrum lets itself use (VK_EXT_memory_budget, else heap × 0.8)
  bool budget_from_extension = false;
  uint64_t max_storage_range = 0;
  uint32_t storage_offset_alignment = 0;
  uint32_t subgroup_size = 0;
  uint32_t max_workgroup_size = 0;
  uint32_t shared_memory_bytes = 0;
  bool transfer_queue = false;
};

class VulkanContext {
 public:
  // Opens the first usable device. Returns nullptr with *why set when there is none (no loader,
  // no device, no compute queue, no shaders in this build). `budget_override`: --vram.
  static std::unique_ptr<VulkanContext> open(std::string* why, uint64_t budget_override = 0);
  // The process's one context, opened on first use (instance, device and pipeline warm-up cost
  // 20-200 ms: `fulcrum devices`, every `--device auto` and the kernel tests share it). nullptr
  // with *why set when there is none.
  static VulkanContext* shared(std::string* why);
  ~VulkanContext();
  VulkanContext(const VulkanContext&) = delete;
  VulkanContext& operator=(const VulkanContext&) = delete;

  const VulkanInfo& info() const { return info_; }

  struct Buffer {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    uint64_t size = 0;
    void* mapped = nullptr;  // host-visible buffers only
    bool device_local = false;
  };
  // A place in a device buffer: `off` bytes from its start (a multiple of 4: every kernel reads
  // 32-bit words). Kernels take offsets as push constants and bind whole buffers, so a view into
  // the middle of an allocation (a sequence's rows, a split matmul's columns) needs no
  // storage-buffer offset alignment.
  struct Ref {
    const Buffer* buf = nullptr;
    uint64_t off = 0;
  };
  // Device-local memory within the budget; throws DeviceError naming `what` and the numbers.
  Buffer alloc_device(uint64_t bytes, const std::string& what);
  void free(Buffer& b);
  uint64_t bytes_in_use() const { return in_use_.load(); }
  uint64_t peak_bytes() const { return peak_.load(); }

  // A command stream: its own command pool and buffer, fence, descriptor pool and staging
  // buffer, used by one thread at a time (each executor lane has its own, so the device queue,
  // the host->device and the device->host lanes record and submit concurrently; submission to
  // the one queue is serialised inside). Kernels are recorded, with a memory barrier after each,
  // and run at flush().
  struct Stream;
  Stream* create_stream();
  void destroy_stream(Stream* s);
  // The stream of the process-wide kernel tests (callers serialise on their own lock).
  Stream& default_stream();
  // Submits what `s` recorded and waits for it. Throws DeviceError when the device fails.
  void flush(Stream& s);
  // Drops what `s` recorded without running it (a step that failed part-way: its buffers may be
  // gone before the next flush).
  void discard(Stream& s);

  // Host -> device and device -> host through the stream's staging buffer, in chunks, after the
  // stream's recorded work; each waits for its copy.
  void upload(Stream& s, Ref dst, const void* src, uint64_t bytes);
  void download(Stream& s, void* dst, Ref src, uint64_t bytes);
  // `rows` rows of `row_bytes`, src_stride apart on the device, to dst_stride apart on the host:
  // one copy command per staging-buffer load instead of one submission per row.
  void download_rows(Stream& s, void* dst, uint64_t dst_stride, Ref src, uint64_t src_stride, uint64_t row_bytes, uint64_t rows);
  // Device -> device copy, recorded.
  void copy(Stream& s, Ref dst, Ref src, uint64_t bytes);

  // Recorded kernels (run at flush). Offsets and strides in the Refs are bytes; sizes in elements.
  // y[t][row0 + r] (rows apart by y_stride floats) = row r of `w` (rows × cols of `type`, its row 0
  // at w.off) · x[t] (cols floats apart), for t < tokens; windows of at most
  // maxStorageBufferRange bytes over the weights.
  void matvec(Stream& s, GgmlType type, Ref w, int64_t rows, int64_t cols, Ref x, Ref y, int64_t tokens, int64_t y_stride);
  void rmsnorm(Stream& s, Ref x, Ref w, Ref y, int64_t rows, int64_t width, float eps);
  void rope(Stream& s, Ref x, int64_t rows, int64_t heads, int64_t head_dim, int64_t n_rot, int64_t pos0, float freq_base, float freq_scale, bool neox);
  // y[i] += b[i % bwidth] for i < n.
  void add(Stream& s, Ref y, Ref b, int64_t n, int64_t bwidth);
  void swiglu(Stream& s, Ref g, Ref u, int64_t n);
  // y = (x - mean) / sqrt(var + eps) · w + b per row of `width`.
  void layernorm(Stream& s, Ref x, Ref w, Ref b, Ref y, int64_t rows, int64_t width, float eps);
  // g[i] = gelu(g[i]) · u[i] (GeGLU), or gelu(g[i]) when gated is false (u unused).
  void gelu(Stream& s, Ref g, Ref u, int64_t n, bool gated);
  // scatter false: dst[i] = src[rows[i]]; true: dst[rows[i]] = weights[i] · src[i] (rows of width floats, i < n).
  void move_rows(Stream& s, Ref src, Ref dst, Ref rows, Ref weights, int64_t n, int64_t width, bool scatter);
  // Rows of K or V (f32, src_stride floats apart) into one head-major f16 page at positions
  // [pos_in_page, pos_in_page + n_pos).
  void kv_store(Stream& s, Ref src, int64_t src_stride, Ref page, int64_t n_pos, int64_t pos_in_page, int64_t n_kv_heads, int64_t head_dim, int64_t page_tokens);
  // Causal attention of `rows` query rows at positions [pos0, pos0 + rows) over a paged f16 KV
  // pool: pages[p] is the word offset of page p in k_pool and v_pool (head-major pages). Scores
  // are scaled by `scale`, soft-capped when softcap > 0, and a query sees only its last `window`
  // positions when window > 0 (AttentionShape).
  void attention(Stream& s, Ref q, Ref k_pool, Ref v_pool, Ref pages, Ref out, int64_t rows, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                 int64_t page_tokens, int64_t pos0, float scale = 0, float softcap = 0, int64_t window = 0);  // scale 0: 1/sqrt(head_dim)
  // Whether matvec has a kernel for `type`.
  static bool runs(GgmlType type);
  // Rows per window the last matvec used (tests check that big tensors were windowed).
  int64_t last_windows() const { return last_windows_.load(); }

  // Validation-layer messages (warnings and errors) seen so far; 0 when no layer is active.
  uint64_t validation_messages() const { return validation_messages_.load(); }
  std::string last_validation_message() const {
    std::lock_guard<std::mutex> lock(message_mu_);
    return last_validation_message_;
  }

 private:
  VulkanContext() = default;
  struct Pipeline {
    VkShaderModule module = VK_NULL_HANDLE;
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    VkPipeline pipeline = VK_NULL_HANDLE;
    uint32_t workgroup = 0;
  };
  void check(VkResult r, const char* what) const;
  Buffer alloc_buffer(uint64_t bytes, VkBufferUsageFlags usage, bool device_local);
  uint32_t memory_type(uint32_t bits, VkMemoryPropertyFlags want) const;
  const Pipeline& pipeline(const char* name);
  // Records one dispatch of `name` over whole buffers (the first binding may be a window:
  // `first_offset`, `first_range`), push constants `push` (≤ kPushBytes), and a barrier after it.
  void dispatch(Stream& s, const char* name, std::initializer_list<const Buffer*> buffers, const void* push, uint32_t push_bytes, uint32_t gx,
                uint32_t gy = 1, uint64_t first_offset = 0, uint64_t first_range = 0);
  VkCommandBuffer recording(Stream& s);
  VkDescriptorSet descriptor_set(Stream& s, VkDescriptorSetLayout layout);
  static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT,
                                                   const VkDebugUtilsMessengerCallbackDataEXT* data, void* self);

  vk::Api api_{};
  VulkanInfo info_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  std::mutex queue_mu_;  // vkQueueSubmit needs the queue externally synchronised
  VkPhysicalDeviceMemoryProperties mem_props_{};
  Stream* default_stream_ = nullptr;
  std::mutex streams_mu_;
  std::vector<Stream*> streams_;
  std::map<std::string, Pipeline> pipelines_;
  std::atomic<uint64_t> in_use_{0}, peak_{0};
  std::atomic<uint64_t> validation_messages_{0};
  mutable std::mutex message_mu_;  // the driver may call on_message from any thread
  std::string last_validation_message_;
  std::atomic<int64_t> last_windows_{0};
};

}  // namespace fulcrum
