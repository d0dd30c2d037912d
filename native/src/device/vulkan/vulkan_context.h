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
  // Device-local memory within the budget; throws DeviceError naming `what` and the numbers.
  Buffer alloc_device(uint64_t bytes, const std::string& what);
  void free(Buffer& b);
  uint64_t bytes_in_use() const { return in_use_.load(); }
  uint64_t peak_bytes() const { return peak_.load(); }

  // Host -> device and device -> host through a staging buffer, in chunks; waits for the copy.
  void upload(Buffer& dst, uint64_t dst_offset, const void* src, uint64_t bytes);
  void download(void* dst, const Buffer& src, uint64_t src_offset, uint64_t bytes);

  // y[r] = row r of `w` (rows × cols of `type`, row_bytes each) · x, for every row; windows of
  // at most maxStorageBufferRange bytes. Waits for the result in y (device buffers).
  // With `tokens` > 1, a matrix product: x holds tokens rows of cols, y tokens rows of rows.
  void matvec(GgmlType type, const Buffer& w, int64_t rows, int64_t cols, const Buffer& x, Buffer& y, int64_t tokens = 1);
  // Element-wise and per-row kernels over device buffers (each waits for its result):
  void rmsnorm(const Buffer& x, const Buffer& w, Buffer& y, int64_t rows, int64_t width, float eps);
  void rope(Buffer& x, int64_t rows, int64_t heads, int64_t head_dim, int64_t n_rot, int64_t pos0, float freq_base, float freq_scale, bool neox);
  void add(Buffer& y, const Buffer& b, int64_t n, int64_t bwidth);
  void swiglu(Buffer& g, const Buffer& u, int64_t n);
  // Causal attention of `rows` query rows at positions [pos0, pos0 + rows) over a paged f16 KV
  // pool: pages[p] is the word offset of page p in k_pool and v_pool (head-major pages).
  void attention(const Buffer& q, const Buffer& k_pool, const Buffer& v_pool, const Buffer& pages, Buffer& out, int64_t rows,
                 int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, int64_t page_tokens, int64_t pos0);
  // Rows per window the last matvec used (tests check that big tensors were windowed).
  int64_t last_windows() const { return last_windows_; }

  // Validation-layer messages (warnings and errors) seen so far; 0 when no layer is active.
  uint64_t validation_messages() const { return validation_messages_.load(); }
  const std::string& last_validation_message() const { return last_validation_message_; }

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
  // One dispatch of `name` over whole buffers, push constants `push` (≤ 64 bytes); waits.
  void dispatch(const char* name, std::initializer_list<const Buffer*> buffers, const void* push, uint32_t push_bytes, uint32_t gx, uint32_t gy = 1);
  VkCommandBuffer begin();
  void submit_and_wait(VkCommandBuffer cb);
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
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkDescriptorPool descriptors_ = VK_NULL_HANDLE;
  VkPhysicalDeviceMemoryProperties mem_props_{};
  Buffer staging_;
  std::map<std::string, Pipeline> pipelines_;
  std::atomic<uint64_t> in_use_{0}, peak_{0};
  std::atomic<uint64_t> validation_messages_{0};
  std::string last_validation_message_;
  int64_t last_windows_ = 0;
};

}  // namespace fulcrum
