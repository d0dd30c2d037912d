#include "device/vulkan/vulkan_context.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include "device/device.h"

namespace fulcrum {
namespace {

struct ShaderBlob {
  const char* name;
  const uint32_t* words;
  size_t bytes;
};
#include "device/vulkan/gen/shaders.inc"

std::string mib(uint64_t b) {
  char s[48];
  std::snprintf(s, sizeof s, "%.2f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
  return s;
}

// Per stream: 8 MiB of host-visible staging (copies go through it in chunks), and descriptor
// sets for this many recorded dispatches before a flush is forced.
constexpr uint64_t kStagingBytes = uint64_t{8} << 20;
constexpr uint32_t kSetsPerStream = 512;

struct MatvecPush {
  uint32_t rows, cols, row_bytes, skew, row0, y_stride, x_off, y_off, tokens, tpr;
};
constexpr uint32_t kPushBytes = 64;
constexpr uint32_t kTokenTile = 8;  // matvec_body.glsl's TILE

// Storage buffers each shader binds (0..n-1).
uint32_t bindings_of(const char* name) {
  if (std::strcmp(name, "rope") == 0) return 1;
  if (std::strcmp(name, "add") == 0 || std::strcmp(name, "swiglu") == 0 || std::strcmp(name, "gelu") == 0 || std::strcmp(name, "kv_store") == 0) return 2;
  if (std::strcmp(name, "layernorm") == 0 || std::strcmp(name, "move_rows") == 0) return 4;
  if (std::strcmp(name, "attention") == 0) return 5;
  return 3;
}

uint32_t words(uint64_t bytes_off) { return static_cast<uint32_t>(bytes_off / 4); }

}  // namespace

struct VulkanContext::Stream {
  VkCommandPool pool = VK_NULL_HANDLE;
  VkCommandBuffer cb = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  VkDescriptorPool descriptors = VK_NULL_HANDLE;
  Buffer staging;
  bool recording = false;
  uint32_t sets_used = 0;
  std::vector<VkBufferCopy> regions;  // reused by download_rows: no allocation per step
};

void VulkanContext::check(VkResult r, const char* what) const {
  if (r != VK_SUCCESS) throw DeviceError(std::string("vulkan: ") + what + " failed: " + vk::result_name(r) + " (" + std::to_string(r) + ")");
}

VKAPI_ATTR VkBool32 VKAPI_CALL VulkanContext::on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT,
                                                         const VkDebugUtilsMessengerCallbackDataEXT* data, void* self) {
  if (severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
    auto* ctx = static_cast<VulkanContext*>(self);
    ctx->validation_messages_.fetch_add(1);
    std::lock_guard<std::mutex> lock(ctx->message_mu_);
    ctx->last_validation_message_ = data && data->pMessage ? data->pMessage : "?";
  }
  return VK_FALSE;
}

std::unique_ptr<VulkanContext> VulkanContext::open(std::string* why, uint64_t budget_override) {
  if (kShaderBuildProblem) {
    *why = kShaderBuildProblem;
    return nullptr;
  }
  const vk::Api* global = vk::load_api(why);
  if (!global) return nullptr;
  std::unique_ptr<VulkanContext> c(new VulkanContext());
  c->api_ = *global;
  vk::Api& a = c->api_;
  try {
    // The debug-utils extension, when the loader has it, so validation-layer messages are counted.
    uint32_t n_ext = 0;
    a.vkEnumerateInstanceExtensionProperties(nullptr, &n_ext, nullptr);
    std::vector<VkExtensionProperties> exts(n_ext);
    a.vkEnumerateInstanceExtensionProperties(nullptr, &n_ext, exts.data());
    bool debug_utils = false;
    for (auto& e : exts) debug_utils = debug_utils || std::strcmp(e.extensionName, VK_EXT_DEBUG_UTILS_EXTENSION_NAME) == 0;
    VkApplicationInfo app{};
    app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
    app.pApplicationName = "fulcrum";
    app.apiVersion = VK_API_VERSION_1_1;
    VkInstanceCreateInfo ici{};
    ici.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
    ici.pApplicationInfo = &app;
    const char* ext_names[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
    if (debug_utils) {
      ici.enabledExtensionCount = 1;
      ici.ppEnabledExtensionNames = ext_names;
    }
    VkResult r = a.vkCreateInstance(&ici, nullptr, &c->instance_);
    if (r != VK_SUCCESS) {
      *why = std::string("vulkan: no instance (") + vk::result_name(r) + "): no Vulkan driver is installed";
      return nullptr;
    }
    vk::load_instance_api(&a, c->instance_);
    if (debug_utils && a.vkCreateDebugUtilsMessengerEXT) {
      VkDebugUtilsMessengerCreateInfoEXT mi{};
    mi.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
      mi.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
      mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
      mi.pfnUserCallback = &VulkanContext::on_message;
      mi.pUserData = c.get();
      a.vkCreateDebugUtilsMessengerEXT(c->instance_, &mi, nullptr, &c->messenger_);
    }
    uint32_t n_dev = 0;
    a.vkEnumeratePhysicalDevices(c->instance_, &n_dev, nullptr);
    std::vector<VkPhysicalDevice> devs(n_dev);
    a.vkEnumeratePhysicalDevices(c->instance_, &n_dev, devs.data());
    if (devs.empty()) {
      *why = "vulkan: the loader found no Vulkan device (no GPU driver, and no lavapipe: apt-get install mesa-vulkan-drivers)";
      return nullptr;
    }
    auto rank = [&](VkPhysicalDevice d) {
      VkPhysicalDeviceProperties p;
      a.vkGetPhysicalDeviceProperties(d, &p);
      switch (p.deviceType) {
        case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
        case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
        case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
        case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
        default: return 4;
      }
    };
    std::stable_sort(devs.begin(), devs.end(), [&](VkPhysicalDevice x, VkPhysicalDevice y) { return rank(x) < rank(y); });
    c->physical_ = devs[0];
    // Properties: limits, subgroup size.
    VkPhysicalDeviceSubgroupProperties sub{};
    sub.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
    VkPhysicalDeviceProperties2 p2{};
    p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    p2.pNext = &sub;
    a.vkGetPhysicalDeviceProperties2(c->physical_, &p2);
    const VkPhysicalDeviceProperties& p = p2.properties;
    VulkanInfo& info = c->info_;
    info.name = p.deviceName;
    static const char* const types[] = {"other", "integrated", "discrete", "virtual", "cpu"};
    info.type = p.deviceType <= 4 ? types[p.deviceType] : "other";
    info.api_version = p.apiVersion;
    info.max_storage_range = p.limits.maxStorageBufferRange;
    info.storage_offset_alignment = static_cast<uint32_t>(p.limits.minStorageBufferOffsetAlignment);
    info.subgroup_size = sub.subgroupSize;
    info.max_workgroup_size = std::min(p.limits.maxComputeWorkGroupSize[0], p.limits.maxComputeWorkGroupInvocations);
    info.shared_memory_bytes = p.limits.maxComputeSharedMemorySize;
    // Queues: a compute family, and a transfer-only one where there is one.
    uint32_t n_q = 0;
    a.vkGetPhysicalDeviceQueueFamilyProperties(c->physical_, &n_q, nullptr);
    std::vector<VkQueueFamilyProperties> qs(n_q);
    a.vkGetPhysicalDeviceQueueFamilyProperties(c->physical_, &n_q, qs.data());
    int compute = -1;
    for (uint32_t i = 0; i < n_q; ++i) {
      if ((qs[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && compute < 0) compute = static_cast<int>(i);
      if ((qs[i].queueFlags & VK_QUEUE_TRANSFER_BIT) && !(qs[i].queueFlags & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT))) info.transfer_queue = true;
    }
    if (compute < 0) {
      *why = "vulkan: device " + info.name + " has no compute queue";
      return nullptr;
    }
    c->queue_family_ = static_cast<uint32_t>(compute);
    // Memory: the largest device-local heap, and its budget.
    a.vkGetPhysicalDeviceMemoryProperties(c->physical_, &c->mem_props_);
    uint32_t heap = 0;
    for (uint32_t i = 0; i < c->mem_props_.memoryHeapCount; ++i)
      if ((c->mem_props_.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) && c->mem_props_.memoryHeaps[i].size > c->mem_props_.memoryHeaps[heap].size) heap = i;
    info.heap_bytes = c->mem_props_.memoryHeaps[heap].size;
    uint32_t n_dext = 0;
    a.vkEnumerateDeviceExtensionProperties(c->physical_, nullptr, &n_dext, nullptr);
    std::vector<VkExtensionProperties> dexts(n_dext);
    a.vkEnumerateDeviceExtensionProperties(c->physical_, nullptr, &n_dext, dexts.data());
    bool has_budget = false;
    for (auto& e : dexts) has_budget = has_budget || std::strcmp(e.extensionName, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME) == 0;
    info.budget_bytes = static_cast<uint64_t>(static_cast<double>(info.heap_bytes) * 0.8);
    if (has_budget && a.vkGetPhysicalDeviceMemoryProperties2) {
      VkPhysicalDeviceMemoryBudgetPropertiesEXT b{};
    b.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT;
      VkPhysicalDeviceMemoryProperties2 m2{};
    m2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2;
      m2.pNext = &b;
      a.vkGetPhysicalDeviceMemoryProperties2(c->physical_, &m2);
      if (b.heapBudget[heap] > 0) {
        info.budget_bytes = b.heapBudget[heap] > b.heapUsage[heap] ? b.heapBudget[heap] - b.heapUsage[heap] : 0;
        info.budget_from_extension = true;
      }
    }
    if (budget_override > 0) info.budget_bytes = budget_override;
    // Device and queue.
    const float prio = 1.0f;
    VkDeviceQueueCreateInfo qci{};
    qci.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
    qci.queueFamilyIndex = c->queue_family_;
    qci.queueCount = 1;
    qci.pQueuePriorities = &prio;
    VkDeviceCreateInfo dci{};
    dci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    c->check(a.vkCreateDevice(c->physical_, &dci, nullptr, &c->device_), "vkCreateDevice");
    vk::load_device_api(&a, c->device_);
    a.vkGetDeviceQueue(c->device_, c->queue_family_, 0, &c->queue_);
    c->default_stream_ = c->create_stream();
    // Warm the pipelines now: their first use compiles them (20-400 ms on lavapipe's JIT).
    for (size_t i = 0; i < kShaderCount; ++i) c->pipeline(kShaders[i].name);
  } catch (const std::exception& e) {
    *why = e.what();
    return nullptr;
  }
  return c;
}

VulkanContext* VulkanContext::shared(std::string* why) {
  static std::mutex mu;
  static std::unique_ptr<VulkanContext> ctx;
  static std::string reason;
  static bool tried = false;
  std::lock_guard<std::mutex> lock(mu);
  if (!tried) {
    tried = true;
    ctx = open(&reason);
  }
  if (!ctx && why) *why = reason;
  return ctx.get();
}

VulkanContext::~VulkanContext() {
  vk::Api& a = api_;
  if (device_) {
    a.vkDeviceWaitIdle(device_);
    for (auto& [name, p] : pipelines_) {
      a.vkDestroyPipeline(device_, p.pipeline, nullptr);
      a.vkDestroyPipelineLayout(device_, p.layout, nullptr);
      a.vkDestroyDescriptorSetLayout(device_, p.set_layout, nullptr);
      a.vkDestroyShaderModule(device_, p.module, nullptr);
    }
    std::vector<Stream*> left;
    {
      std::lock_guard<std::mutex> lock(streams_mu_);
      left = streams_;
    }
    for (Stream* st : left) destroy_stream(st);
    a.vkDestroyDevice(device_, nullptr);
  }
  if (messenger_ && a.vkDestroyDebugUtilsMessengerEXT) a.vkDestroyDebugUtilsMessengerEXT(instance_, messenger_, nullptr);
  if (instance_) a.vkDestroyInstance(instance_, nullptr);
}

uint32_t VulkanContext::memory_type(uint32_t bits, VkMemoryPropertyFlags want) const {
  for (uint32_t i = 0; i < mem_props_.memoryTypeCount; ++i)
    if ((bits & (1u << i)) && (mem_props_.memoryTypes[i].propertyFlags & want) == want) return i;
  throw DeviceError("vulkan: no memory type with the required properties");
}

VulkanContext::Buffer VulkanContext::alloc_buffer(uint64_t bytes, VkBufferUsageFlags usage, bool device_local) {
  vk::Api& a = api_;
  Buffer b;
  b.size = bytes;
  b.device_local = device_local;
  VkBufferCreateInfo bci{};
    bci.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bci.size = bytes;
  bci.usage = usage;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(a.vkCreateBuffer(device_, &bci, nullptr, &b.buffer), "vkCreateBuffer");
  VkMemoryRequirements req;
  a.vkGetBufferMemoryRequirements(device_, b.buffer, &req);
  VkMemoryAllocateInfo mai{};
    mai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = memory_type(req.memoryTypeBits, device_local ? VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
                                                                      : VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
  VkResult r = a.vkAllocateMemory(device_, &mai, nullptr, &b.memory);
  if (r != VK_SUCCESS) {
    a.vkDestroyBuffer(device_, b.buffer, nullptr);
    check(r, "vkAllocateMemory");
  }
  check(a.vkBindBufferMemory(device_, b.buffer, b.memory, 0), "vkBindBufferMemory");
  if (!device_local) check(a.vkMapMemory(device_, b.memory, 0, bytes, 0, &b.mapped), "vkMapMemory");
  return b;
}

VulkanContext::Buffer VulkanContext::alloc_device(uint64_t bytes, const std::string& what) {
  // The budget is checked before anything is allocated: lavapipe (and some drivers) never refuse.
  const uint64_t used = in_use_.load();
  if (used + bytes > info_.budget_bytes)
    throw DeviceError("vulkan: cannot allocate " + mib(bytes) + " for " + what + ": " + mib(used) + " of the " + mib(info_.budget_bytes) +
                      " VRAM budget are in use (--vram sets the budget)");
  // Rounded up to whole 16-byte units: shaders read tensors as 32-bit words (a Q8_0 row of 34
  // bytes ends inside a word), and a read past the buffer's end is undefined without robustness.
  // Plus 4 bytes: a shader reading 4 bytes at an unaligned offset may load the word after the last.
  Buffer b = alloc_buffer(std::max<uint64_t>((bytes + 4 + 15) / 16 * 16, 16), VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT, true);
  in_use_ += b.size;
  peak_ = std::max(peak_.load(), in_use_.load());
  return b;
}

void VulkanContext::free(Buffer& b) {
  if (!device_) return;
  if (b.mapped) api_.vkUnmapMemory(device_, b.memory);
  if (b.buffer) api_.vkDestroyBuffer(device_, b.buffer, nullptr);
  if (b.memory) api_.vkFreeMemory(device_, b.memory, nullptr);
  if (b.device_local && b.buffer) in_use_ -= b.size;
  b = Buffer{};
}

VulkanContext::Stream* VulkanContext::create_stream() {
  vk::Api& a = api_;
  auto st = std::make_unique<Stream>();
  auto undo = [&] { destroy_stream(st.release()); };
  try {
    VkCommandPoolCreateInfo pci{};
    pci.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
    pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pci.queueFamilyIndex = queue_family_;
    check(a.vkCreateCommandPool(device_, &pci, nullptr, &st->pool), "vkCreateCommandPool");
    VkCommandBufferAllocateInfo cai{};
    cai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    cai.commandPool = st->pool;
    cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cai.commandBufferCount = 1;
    check(a.vkAllocateCommandBuffers(device_, &cai, &st->cb), "vkAllocateCommandBuffers");
    VkFenceCreateInfo fci{};
    fci.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
    check(a.vkCreateFence(device_, &fci, nullptr, &st->fence), "vkCreateFence");
    VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 5 * kSetsPerStream};
    VkDescriptorPoolCreateInfo dpi{};
    dpi.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
    dpi.maxSets = kSetsPerStream;
    dpi.poolSizeCount = 1;
    dpi.pPoolSizes = &ps;
    check(a.vkCreateDescriptorPool(device_, &dpi, nullptr, &st->descriptors), "vkCreateDescriptorPool");
    st->staging = alloc_buffer(kStagingBytes, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT, false);
  } catch (...) {
    undo();
    throw;
  }
  std::lock_guard<std::mutex> lock(streams_mu_);
  streams_.push_back(st.get());
  return st.release();
}

void VulkanContext::discard(Stream& s) {
  if (!s.recording) return;
  api_.vkEndCommandBuffer(s.cb);
  api_.vkResetCommandBuffer(s.cb, 0);
  api_.vkResetDescriptorPool(device_, s.descriptors, 0);
  s.recording = false;
  s.sets_used = 0;
}

void VulkanContext::destroy_stream(Stream* st) {
  if (!st) return;
  vk::Api& a = api_;
  discard(*st);  // never submitted: the buffers it names may already be gone
  free(st->staging);
  if (st->descriptors) a.vkDestroyDescriptorPool(device_, st->descriptors, nullptr);
  if (st->fence) a.vkDestroyFence(device_, st->fence, nullptr);
  if (st->pool) a.vkDestroyCommandPool(device_, st->pool, nullptr);
  {
    std::lock_guard<std::mutex> lock(streams_mu_);
    streams_.erase(std::remove(streams_.begin(), streams_.end(), st), streams_.end());
  }
  if (st == default_stream_) default_stream_ = nullptr;
  delete st;
}

VulkanContext::Stream& VulkanContext::default_stream() { return *default_stream_; }

VkCommandBuffer VulkanContext::recording(Stream& s) {
  if (s.recording) return s.cb;
  api_.vkResetCommandBuffer(s.cb, 0);
  VkCommandBufferBeginInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(api_.vkBeginCommandBuffer(s.cb, &bi), "vkBeginCommandBuffer");
  s.recording = true;
  // Everything earlier on the queue (other lanes' submissions, which the executor's events
  // ordered before this one) is complete and visible before this batch reads or writes.
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT;
  api_.vkCmdPipelineBarrier(s.cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  return s.cb;
}

void VulkanContext::flush(Stream& s) {
  if (!s.recording) return;
  s.recording = false;
  check(api_.vkEndCommandBuffer(s.cb), "vkEndCommandBuffer");
  VkSubmitInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &s.cb;
  check(api_.vkResetFences(device_, 1, &s.fence), "vkResetFences");
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    check(api_.vkQueueSubmit(queue_, 1, &si, s.fence), "vkQueueSubmit");
  }
  const VkResult r = api_.vkWaitForFences(device_, 1, &s.fence, VK_TRUE, UINT64_MAX);
  api_.vkResetDescriptorPool(device_, s.descriptors, 0);
  s.sets_used = 0;
  check(r, "vkWaitForFences");
}

namespace {
void barrier_after(const vk::Api& a, VkCommandBuffer cb) {
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags st = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  a.vkCmdPipelineBarrier(cb, st, st, 0, 1, &mb, 0, nullptr, 0, nullptr);
}
}  // namespace

void VulkanContext::upload(Stream& s, Ref dst, const void* src, uint64_t bytes) {
  if (!dst.buf || dst.off + bytes > dst.buf->size)
    throw DeviceError("vulkan: upload of " + std::to_string(bytes) + " bytes at " + std::to_string(dst.off) + " past a buffer of " +
                      std::to_string(dst.buf ? dst.buf->size : 0));
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = std::min(kStagingBytes, bytes - done);
    flush(s);  // the staging buffer is free once the stream's earlier work is done
    std::memcpy(s.staging.mapped, static_cast<const uint8_t*>(src) + done, n);
    VkCommandBuffer cb = recording(s);
    VkBufferCopy region{0, dst.off + done, n};
    api_.vkCmdCopyBuffer(cb, s.staging.buffer, dst.buf->buffer, 1, &region);
    flush(s);
    done += n;
  }
}

void VulkanContext::download(Stream& s, void* dst, Ref src, uint64_t bytes) {
  if (!src.buf || src.off + bytes > src.buf->size) throw DeviceError("vulkan: download past the end of a buffer");
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = std::min(kStagingBytes, bytes - done);
    VkCommandBuffer cb = recording(s);
    VkBufferCopy region{src.off + done, 0, n};
    api_.vkCmdCopyBuffer(cb, src.buf->buffer, s.staging.buffer, 1, &region);
    flush(s);
    std::memcpy(static_cast<uint8_t*>(dst) + done, s.staging.mapped, n);
    done += n;
  }
}

void VulkanContext::download_rows(Stream& s, void* dst, uint64_t dst_stride, Ref src, uint64_t src_stride, uint64_t row_bytes, uint64_t rows) {
  if (rows == 0 || row_bytes == 0) return;
  if (!src.buf || src.off + (rows - 1) * src_stride + row_bytes > src.buf->size) throw DeviceError("vulkan: row download past the end of a buffer");
  if (row_bytes > kStagingBytes) {
    for (uint64_t r = 0; r < rows; ++r) download(s, static_cast<uint8_t*>(dst) + r * dst_stride, {src.buf, src.off + r * src_stride}, row_bytes);
    return;
  }
  const uint64_t per_load = kStagingBytes / row_bytes;
  std::vector<VkBufferCopy>& regions = s.regions;
  for (uint64_t r0 = 0; r0 < rows; r0 += per_load) {
    const uint64_t n = std::min(per_load, rows - r0);
    regions.clear();
    for (uint64_t i = 0; i < n; ++i) regions.push_back(VkBufferCopy{src.off + (r0 + i) * src_stride, i * row_bytes, row_bytes});
    VkCommandBuffer cb = recording(s);
    api_.vkCmdCopyBuffer(cb, src.buf->buffer, s.staging.buffer, static_cast<uint32_t>(regions.size()), regions.data());
    flush(s);
    for (uint64_t i = 0; i < n; ++i)
      std::memcpy(static_cast<uint8_t*>(dst) + (r0 + i) * dst_stride, static_cast<const uint8_t*>(s.staging.mapped) + i * row_bytes, row_bytes);
  }
}

void VulkanContext::copy(Stream& s, Ref dst, Ref src, uint64_t bytes) {
  if (!dst.buf || !src.buf || dst.off + bytes > dst.buf->size || src.off + bytes > src.buf->size) throw DeviceError("vulkan: device copy past the end of a buffer");
  if (bytes == 0) return;
  VkCommandBuffer cb = recording(s);
  VkBufferCopy region{src.off, dst.off, bytes};
  api_.vkCmdCopyBuffer(cb, src.buf->buffer, dst.buf->buffer, 1, &region);
  barrier_after(api_, cb);
}

const VulkanContext::Pipeline& VulkanContext::pipeline(const char* name) {
  auto it = pipelines_.find(name);
  if (it != pipelines_.end()) return it->second;
  const ShaderBlob* blob = nullptr;
  for (size_t i = 0; i < kShaderCount; ++i)
    if (std::strcmp(kShaders[i].name, name) == 0) blob = &kShaders[i];
  if (!blob) throw DeviceError(std::string("vulkan: no shader '") + name + "' in this build");
  vk::Api& a = api_;
  Pipeline p;
  VkShaderModuleCreateInfo smi{};
    smi.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  smi.codeSize = blob->bytes;
  smi.pCode = blob->words;
  check(a.vkCreateShaderModule(device_, &smi, nullptr, &p.module), "vkCreateShaderModule");
  const uint32_t n_bind = bindings_of(name);
  VkDescriptorSetLayoutBinding binds[5];
  for (uint32_t i = 0; i < n_bind; ++i) binds[i] = VkDescriptorSetLayoutBinding{i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo dli{};
    dli.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  dli.bindingCount = n_bind;
  dli.pBindings = binds;
  check(a.vkCreateDescriptorSetLayout(device_, &dli, nullptr, &p.set_layout), "vkCreateDescriptorSetLayout");
  VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushBytes};
  VkPipelineLayoutCreateInfo pli{};
    pli.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &p.set_layout;
  pli.pushConstantRangeCount = 1;
  pli.pPushConstantRanges = &pcr;
  check(a.vkCreatePipelineLayout(device_, &pli, nullptr, &p.layout), "vkCreatePipelineLayout");
  // Workgroup: a power of two of at least the subgroup size, at most 256 and the device's limit,
  // and small enough for the reduction array in shared memory.
  uint32_t wg = std::max<uint32_t>(info_.subgroup_size ? info_.subgroup_size : 32, 64);
  while (wg > info_.max_workgroup_size || (256 + 2 * wg) * 4 > info_.shared_memory_bytes || wg > 256) wg /= 2;
  if (wg < 1) wg = 1;
  p.workgroup = wg;
  VkSpecializationMapEntry entry{0, 0, sizeof(uint32_t)};
  VkSpecializationInfo spec{1, &entry, sizeof(uint32_t), &p.workgroup};
  VkComputePipelineCreateInfo cpi{};
    cpi.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  cpi.stage = VkPipelineShaderStageCreateInfo{};
  cpi.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  cpi.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cpi.stage.module = p.module;
  cpi.stage.pName = "main";
  cpi.stage.pSpecializationInfo = &spec;
  cpi.layout = p.layout;
  check(a.vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &cpi, nullptr, &p.pipeline), "vkCreateComputePipelines");
  return pipelines_.emplace(name, p).first->second;
}

VkDescriptorSet VulkanContext::descriptor_set(Stream& s, VkDescriptorSetLayout layout) {
  if (s.sets_used == kSetsPerStream) flush(s);  // the pool is full: run what is recorded, then reuse it
  VkDescriptorSetAllocateInfo dai{};
  dai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  dai.descriptorPool = s.descriptors;
  dai.descriptorSetCount = 1;
  dai.pSetLayouts = &layout;
  VkDescriptorSet set;
  check(api_.vkAllocateDescriptorSets(device_, &dai, &set), "vkAllocateDescriptorSets");
  ++s.sets_used;
  return set;
}

void VulkanContext::dispatch(Stream& s, const char* name, std::initializer_list<const Buffer*> buffers, const void* push, uint32_t push_bytes, uint32_t gx,
                             uint32_t gy, uint64_t first_offset, uint64_t first_range) {
  const Pipeline& p = pipeline(name);
  vk::Api& a = api_;
  if (buffers.size() != bindings_of(name) || push_bytes > kPushBytes) throw DeviceError(std::string("vulkan: bad dispatch of ") + name);
  if (gx == 0 || gy == 0) return;
  VkDescriptorSet set = descriptor_set(s, p.set_layout);
  VkDescriptorBufferInfo infos[5];
  VkWriteDescriptorSet writes[5];
  uint32_t i = 0;
  for (const Buffer* b : buffers) {
    if (!b || !b->buffer) throw DeviceError(std::string("vulkan: ") + name + ": a buffer is missing");
    infos[i] = VkDescriptorBufferInfo{b->buffer, 0, std::min<uint64_t>(b->size, info_.max_storage_range)};
    if (i == 0 && first_range) infos[i] = VkDescriptorBufferInfo{b->buffer, first_offset, first_range};
    writes[i] = VkWriteDescriptorSet{};
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
    ++i;
  }
  a.vkUpdateDescriptorSets(device_, i, writes, 0, nullptr);
  VkCommandBuffer cb = recording(s);
  a.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  a.vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
  uint8_t pc[kPushBytes] = {};
  std::memcpy(pc, push, push_bytes);
  a.vkCmdPushConstants(cb, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushBytes, pc);
  a.vkCmdDispatch(cb, gx, gy, 1);
  barrier_after(a, cb);
}

namespace {
uint32_t groups(int64_t n, uint32_t wg) { return static_cast<uint32_t>((n + wg - 1) / wg); }
}  // namespace

namespace {
void need_words(const char* what, uint64_t off) {
  if (off % 4) throw DeviceError(std::string("vulkan: ") + what + ": offset " + std::to_string(off) + " is not a multiple of 4 bytes");
}
uint32_t u32(int64_t v, const char* what) {
  if (v < 0 || v > 0xffffffffll) throw DeviceError(std::string("vulkan: ") + what + " " + std::to_string(v) + " does not fit 32 bits");
  return static_cast<uint32_t>(v);
}
}  // namespace

void VulkanContext::rmsnorm(Stream& s, Ref x, Ref w, Ref y, int64_t rows, int64_t width, float eps) {
  need_words("rmsnorm", x.off | w.off | y.off);
  if (rows > 65535) throw DeviceError("vulkan: rmsnorm of more than 65535 rows");
  struct { uint32_t width; float eps; uint32_t x_off, w_off, y_off; } pc{u32(width, "width"), eps, words(x.off), words(w.off), words(y.off)};
  dispatch(s, "rmsnorm", {x.buf, w.buf, y.buf}, &pc, sizeof pc, static_cast<uint32_t>(rows));
}

void VulkanContext::rope(Stream& s, Ref x, int64_t rows, int64_t heads, int64_t head_dim, int64_t n_rot, int64_t pos0, float freq_base, float freq_scale, bool neox) {
  need_words("rope", x.off);
  struct { uint32_t rows, heads, head_dim, n_rot, pos0; float base, scale; uint32_t neox, off; } pc{
      u32(rows, "rows"), u32(heads, "heads"), u32(head_dim, "head_dim"), u32(n_rot, "n_rot"), u32(pos0, "pos0"), freq_base, freq_scale, neox ? 1u : 0u, words(x.off)};
  const int64_t n = rows * heads * (n_rot / 2);
  const uint32_t g = groups(n, pipeline("rope").workgroup);
  if (g > 65535) throw DeviceError("vulkan: rope over too many rows at once");
  dispatch(s, "rope", {x.buf}, &pc, sizeof pc, g);
}

void VulkanContext::add(Stream& s, Ref y, Ref b, int64_t n, int64_t bwidth) {
  need_words("add", y.off | b.off);
  struct { uint32_t n, bwidth, y_off, b_off; } pc{u32(n, "n"), u32(bwidth, "bwidth"), words(y.off), words(b.off)};
  const uint32_t g = groups(n, pipeline("add").workgroup);
  if (g > 65535) throw DeviceError("vulkan: add over more than 65535 workgroups");
  dispatch(s, "add", {y.buf, b.buf}, &pc, sizeof pc, g);
}

void VulkanContext::swiglu(Stream& s, Ref g, Ref u, int64_t n) {
  need_words("swiglu", g.off | u.off);
  struct { uint32_t n, g_off, u_off; } pc{u32(n, "n"), words(g.off), words(u.off)};
  const uint32_t gr = groups(n, pipeline("swiglu").workgroup);
  if (gr > 65535) throw DeviceError("vulkan: swiglu over more than 65535 workgroups");
  dispatch(s, "swiglu", {g.buf, u.buf}, &pc, sizeof pc, gr);
}

void VulkanContext::layernorm(Stream& s, Ref x, Ref w, Ref b, Ref y, int64_t rows, int64_t width, float eps) {
  need_words("layernorm", x.off | w.off | b.off | y.off);
  if (rows > 65535) throw DeviceError("vulkan: layernorm of more than 65535 rows");
  struct { uint32_t width; float eps; uint32_t x_off, w_off, b_off, y_off; } pc{u32(width, "width"), eps, words(x.off), words(w.off), words(b.off), words(y.off)};
  dispatch(s, "layernorm", {x.buf, w.buf, b.buf, y.buf}, &pc, sizeof pc, static_cast<uint32_t>(rows));
}

void VulkanContext::gelu(Stream& s, Ref g, Ref u, int64_t n, bool gated) {
  need_words("gelu", g.off | u.off);
  struct { uint32_t n, g_off, u_off, gated; } pc{u32(n, "n"), words(g.off), words(u.off), gated ? 1u : 0u};
  const uint32_t gr = groups(n, pipeline("gelu").workgroup);
  if (gr > 65535) throw DeviceError("vulkan: gelu over more than 65535 workgroups");
  dispatch(s, "gelu", {g.buf, u.buf}, &pc, sizeof pc, gr);
}

void VulkanContext::move_rows(Stream& s, Ref src, Ref dst, Ref rows, Ref weights, int64_t n, int64_t width, bool scatter) {
  need_words("move_rows", src.off | dst.off | rows.off | weights.off);
  struct { uint32_t n, width, scatter, src_off, dst_off, rows_off, w_off; } pc{
      u32(n, "n"), u32(width, "width"), scatter ? 1u : 0u, words(src.off), words(dst.off), words(rows.off), words(weights.off)};
  const uint32_t gr = groups(n * width, pipeline("move_rows").workgroup);
  if (gr > 65535) throw DeviceError("vulkan: move_rows over more than 65535 workgroups");
  dispatch(s, "move_rows", {src.buf, dst.buf, rows.buf, weights.buf}, &pc, sizeof pc, gr);
}

void VulkanContext::kv_store(Stream& s, Ref src, int64_t src_stride, Ref page, int64_t n_pos, int64_t pos_in_page, int64_t n_kv_heads, int64_t head_dim,
                             int64_t page_tokens) {
  need_words("kv_store", src.off | page.off);
  if (head_dim % 2) throw DeviceError("vulkan: the KV store needs an even head size");
  struct { uint32_t src_off, src_stride, dst_off, n_pos, pos_in_page, n_kv_heads, head_dim, page_tokens; } pc{
      words(src.off), u32(src_stride, "src_stride"), words(page.off), u32(n_pos, "n_pos"), u32(pos_in_page, "pos_in_page"),
      u32(n_kv_heads, "n_kv_heads"), u32(head_dim, "head_dim"), u32(page_tokens, "page_tokens")};
  dispatch(s, "kv_store", {src.buf, page.buf}, &pc, sizeof pc, groups(n_pos * n_kv_heads * head_dim / 2, pipeline("kv_store").workgroup));
}

void VulkanContext::attention(Stream& s, Ref q, Ref k_pool, Ref v_pool, Ref pages, Ref out, int64_t rows, int64_t n_heads, int64_t n_kv_heads,
                              int64_t head_dim, int64_t page_tokens, int64_t pos0, float scale, float softcap, int64_t window) {
  if (head_dim > 256 || head_dim % 2) throw DeviceError("vulkan: attention needs an even head size of at most 256, got " + std::to_string(head_dim));
  if (n_heads % n_kv_heads) throw DeviceError("vulkan: attention: heads are not a multiple of KV heads");
  need_words("attention", q.off | out.off);
  if (k_pool.off || v_pool.off || pages.off) throw DeviceError("vulkan: attention binds whole KV pools and page tables");
  struct { uint32_t n_heads, n_kv_heads, head_dim, page_tokens, pos0; float scale; uint32_t q_off, o_off; float softcap; uint32_t window; } pc{
      u32(n_heads, "n_heads"), u32(n_kv_heads, "n_kv_heads"), u32(head_dim, "head_dim"), u32(page_tokens, "page_tokens"), u32(pos0, "pos0"),
      scale > 0 ? scale : 1.0f / std::sqrt(static_cast<float>(head_dim)), words(q.off), words(out.off), softcap, u32(window, "window")};
  dispatch(s, "attention", {q.buf, k_pool.buf, v_pool.buf, pages.buf, out.buf}, &pc, sizeof pc, u32(n_heads, "n_heads"), u32(rows, "rows"));
}

bool VulkanContext::runs(GgmlType type) {
  switch (type) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::Q8_0: case GgmlType::Q4_0: case GgmlType::Q4_K: case GgmlType::Q6_K: return true;
    default: return false;
  }
}

void VulkanContext::matvec(Stream& s, GgmlType type, Ref w, int64_t rows, int64_t cols, Ref x, Ref y, int64_t tokens, int64_t y_stride) {
  const char* name = nullptr;
  switch (type) {
    case GgmlType::F32: name = "matvec_f32"; break;
    case GgmlType::F16: name = "matvec_f16"; break;
    case GgmlType::Q8_0: name = "matvec_q8_0"; break;
    case GgmlType::Q4_0: name = "matvec_q4_0"; break;
    case GgmlType::Q4_K: name = "matvec_q4_k"; break;
    case GgmlType::Q6_K: name = "matvec_q6_k"; break;
    default:
      throw DeviceError(std::string("vulkan: no matmul kernel for ") + (type_traits(type).name ? type_traits(type).name : "this type"));
  }
  const TypeTraits& tt = type_traits(type);
  if (cols % tt.block_size != 0) throw DeviceError(std::string("vulkan: ") + tt.name + " rows must be a multiple of " + std::to_string(tt.block_size) + " values");
  need_words("matvec", x.off | y.off);
  if (tokens < 1) return;
  const int64_t tiles = (tokens + kTokenTile - 1) / kTokenTile;
  if (tiles > 65535) throw DeviceError("vulkan: matvec over too many tokens at once");
  const uint64_t row_bytes = ::fulcrum::row_bytes(type, cols);
  const uint64_t align = std::max<uint32_t>(info_.storage_offset_alignment, 4);
  // Rows per window: as many as fit in maxStorageBufferRange after the alignment skew.
  const uint64_t range = std::min<uint64_t>(info_.max_storage_range, uint64_t{1} << 31);
  if (row_bytes + align > range) throw DeviceError("vulkan: one row of " + std::to_string(row_bytes) + " bytes exceeds maxStorageBufferRange");
  // One workgroup per row: at most 65535 rows per dispatch (the smallest maxComputeWorkGroupCount).
  const int64_t per_window = std::min<int64_t>(65535, static_cast<int64_t>((range - align - 4) / row_bytes));
  if (w.off + static_cast<uint64_t>(rows) * row_bytes > w.buf->size) throw DeviceError("vulkan: matvec weights past the end of their buffer");
  // Invocations per row: enough for the row's 32-value sub-blocks, at most the workgroup, so
  // narrow rows share a workgroup instead of leaving most of it idle (matvec_body.glsl).
  const uint32_t wg = pipeline(name).workgroup;
  uint32_t tpr = 1;
  while (tpr < wg && tpr * 32 < static_cast<uint64_t>(cols)) tpr *= 2;
  const int64_t rows_per_group = wg / tpr;
  int64_t windows = 0;
  for (int64_t r0 = 0; r0 < rows; r0 += per_window) {
    const int64_t n = std::min(per_window, rows - r0);
    const uint64_t start = w.off + static_cast<uint64_t>(r0) * row_bytes;
    const uint64_t offset = start / align * align;
    const uint64_t skew = start - offset;
    const uint64_t wlen = std::min<uint64_t>(w.buf->size - offset, (skew + static_cast<uint64_t>(n) * row_bytes + 3) / 4 * 4 + 4);
    MatvecPush pp{static_cast<uint32_t>(n), u32(cols, "cols"), static_cast<uint32_t>(row_bytes), static_cast<uint32_t>(skew), static_cast<uint32_t>(r0),
                  u32(y_stride, "y_stride"), words(x.off), words(y.off), u32(tokens, "tokens"), tpr};
    dispatch(s, name, {w.buf, x.buf, y.buf}, &pp, sizeof pp, static_cast<uint32_t>((n + rows_per_group - 1) / rows_per_group), static_cast<uint32_t>(tiles), offset, wlen);
    ++windows;
  }
  last_windows_ = windows;
}

}  // namespace fulcrum
