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

constexpr uint64_t kStagingBytes = uint64_t{16} << 20;

struct PushParams {
  uint32_t rows, cols, row_bytes, skew, row0, y_stride;
};
constexpr uint32_t kPushBytes = 64;

// Storage buffers each shader binds (0..n-1).
uint32_t bindings_of(const char* name) {
  if (std::strcmp(name, "rope") == 0) return 1;
  if (std::strcmp(name, "add") == 0 || std::strcmp(name, "swiglu") == 0) return 2;
  if (std::strcmp(name, "attention") == 0) return 5;
  return 3;
}

}  // namespace

void VulkanContext::check(VkResult r, const char* what) const {
  if (r != VK_SUCCESS) throw DeviceError(std::string("vulkan: ") + what + " failed: " + vk::result_name(r) + " (" + std::to_string(r) + ")");
}

VKAPI_ATTR VkBool32 VKAPI_CALL VulkanContext::on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT,
                                                         const VkDebugUtilsMessengerCallbackDataEXT* data, void* self) {
  if (severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
    auto* ctx = static_cast<VulkanContext*>(self);
    ctx->validation_messages_.fetch_add(1);
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
    VkCommandPoolCreateInfo pci{};
    pci.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
    pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pci.queueFamilyIndex = c->queue_family_;
    c->check(a.vkCreateCommandPool(c->device_, &pci, nullptr, &c->pool_), "vkCreateCommandPool");
    VkCommandBufferAllocateInfo cai{};
    cai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    cai.commandPool = c->pool_;
    cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cai.commandBufferCount = 1;
    c->check(a.vkAllocateCommandBuffers(c->device_, &cai, &c->cmd_), "vkAllocateCommandBuffers");
    VkFenceCreateInfo fci{};
    fci.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
    c->check(a.vkCreateFence(c->device_, &fci, nullptr, &c->fence_), "vkCreateFence");
    VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 3 * 256};
    VkDescriptorPoolCreateInfo dpi{};
    dpi.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
    dpi.maxSets = 256;
    dpi.poolSizeCount = 1;
    dpi.pPoolSizes = &ps;
    c->check(a.vkCreateDescriptorPool(c->device_, &dpi, nullptr, &c->descriptors_), "vkCreateDescriptorPool");
    c->staging_ = c->alloc_buffer(kStagingBytes, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT, false);
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
    free(staging_);
    if (descriptors_) a.vkDestroyDescriptorPool(device_, descriptors_, nullptr);
    if (fence_) a.vkDestroyFence(device_, fence_, nullptr);
    if (pool_) a.vkDestroyCommandPool(device_, pool_, nullptr);
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
  Buffer b = alloc_buffer(std::max<uint64_t>((bytes + 15) / 16 * 16, 16), VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT, true);
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

VkCommandBuffer VulkanContext::begin() {
  api_.vkResetCommandBuffer(cmd_, 0);
  VkCommandBufferBeginInfo bi{};
    bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(api_.vkBeginCommandBuffer(cmd_, &bi), "vkBeginCommandBuffer");
  return cmd_;
}

void VulkanContext::submit_and_wait(VkCommandBuffer cb) {
  check(api_.vkEndCommandBuffer(cb), "vkEndCommandBuffer");
  VkSubmitInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  check(api_.vkResetFences(device_, 1, &fence_), "vkResetFences");
  check(api_.vkQueueSubmit(queue_, 1, &si, fence_), "vkQueueSubmit");
  check(api_.vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences");
}

void VulkanContext::upload(Buffer& dst, uint64_t dst_offset, const void* src, uint64_t bytes) {
  if (dst_offset + bytes > dst.size) throw DeviceError("vulkan: upload of " + std::to_string(bytes) + " bytes at " + std::to_string(dst_offset) + " past a buffer of " + std::to_string(dst.size));
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = std::min(kStagingBytes, bytes - done);
    std::memcpy(staging_.mapped, static_cast<const uint8_t*>(src) + done, n);
    VkCommandBuffer cb = begin();
    VkBufferCopy region{0, dst_offset + done, n};
    api_.vkCmdCopyBuffer(cb, staging_.buffer, dst.buffer, 1, &region);
    submit_and_wait(cb);
    done += n;
  }
}

void VulkanContext::download(void* dst, const Buffer& src, uint64_t src_offset, uint64_t bytes) {
  if (src_offset + bytes > src.size) throw DeviceError("vulkan: download past the end of a buffer");
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = std::min(kStagingBytes, bytes - done);
    VkCommandBuffer cb = begin();
    VkBufferCopy region{src_offset + done, 0, n};
    api_.vkCmdCopyBuffer(cb, src.buffer, staging_.buffer, 1, &region);
    submit_and_wait(cb);
    std::memcpy(static_cast<uint8_t*>(dst) + done, staging_.mapped, n);
    done += n;
  }
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

void VulkanContext::dispatch(const char* name, std::initializer_list<const Buffer*> buffers, const void* push, uint32_t push_bytes, uint32_t gx, uint32_t gy) {
  const Pipeline& p = pipeline(name);
  vk::Api& a = api_;
  if (buffers.size() != bindings_of(name) || push_bytes > kPushBytes) throw DeviceError(std::string("vulkan: bad dispatch of ") + name);
  a.vkResetDescriptorPool(device_, descriptors_, 0);
  VkDescriptorSetAllocateInfo dai{};
  dai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  dai.descriptorPool = descriptors_;
  dai.descriptorSetCount = 1;
  dai.pSetLayouts = &p.set_layout;
  VkDescriptorSet set;
  check(a.vkAllocateDescriptorSets(device_, &dai, &set), "vkAllocateDescriptorSets");
  VkDescriptorBufferInfo infos[5];
  VkWriteDescriptorSet writes[5];
  uint32_t i = 0;
  for (const Buffer* b : buffers) {
    infos[i] = VkDescriptorBufferInfo{b->buffer, 0, std::min<uint64_t>(b->size, info_.max_storage_range)};
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
  VkCommandBuffer cb = begin();
  a.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  a.vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
  uint8_t pc[kPushBytes] = {};
  std::memcpy(pc, push, push_bytes);
  a.vkCmdPushConstants(cb, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushBytes, pc);
  a.vkCmdDispatch(cb, gx, gy, 1);
  submit_and_wait(cb);
}

namespace {
uint32_t groups(int64_t n, uint32_t wg) { return static_cast<uint32_t>((n + wg - 1) / wg); }
}  // namespace

void VulkanContext::rmsnorm(const Buffer& x, const Buffer& w, Buffer& y, int64_t rows, int64_t width, float eps) {
  struct { uint32_t width; float eps; } pc{static_cast<uint32_t>(width), eps};
  dispatch("rmsnorm", {&x, &w, &y}, &pc, sizeof pc, static_cast<uint32_t>(rows));
}

void VulkanContext::rope(Buffer& x, int64_t rows, int64_t heads, int64_t head_dim, int64_t n_rot, int64_t pos0, float freq_base, float freq_scale, bool neox) {
  struct { uint32_t rows, heads, head_dim, n_rot, pos0; float base, scale; uint32_t neox; } pc{
      static_cast<uint32_t>(rows), static_cast<uint32_t>(heads), static_cast<uint32_t>(head_dim), static_cast<uint32_t>(n_rot),
      static_cast<uint32_t>(pos0), freq_base, freq_scale, neox ? 1u : 0u};
  dispatch("rope", {&x}, &pc, sizeof pc, groups(rows * heads * (n_rot / 2), pipeline("rope").workgroup));
}

void VulkanContext::add(Buffer& y, const Buffer& b, int64_t n, int64_t bwidth) {
  struct { uint32_t n, bwidth; } pc{static_cast<uint32_t>(n), static_cast<uint32_t>(bwidth)};
  dispatch("add", {&y, &b}, &pc, sizeof pc, groups(n, pipeline("add").workgroup));
}

void VulkanContext::attention(const Buffer& q, const Buffer& k_pool, const Buffer& v_pool, const Buffer& pages, Buffer& out, int64_t rows,
                              int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, int64_t page_tokens, int64_t pos0) {
  if (head_dim > 256 || head_dim % 2) throw DeviceError("vulkan: attention needs an even head size of at most 256, got " + std::to_string(head_dim));
  if (n_heads % n_kv_heads) throw DeviceError("vulkan: attention: heads are not a multiple of KV heads");
  struct { uint32_t n_heads, n_kv_heads, head_dim, page_tokens, pos0; float scale; } pc{
      static_cast<uint32_t>(n_heads), static_cast<uint32_t>(n_kv_heads), static_cast<uint32_t>(head_dim), static_cast<uint32_t>(page_tokens),
      static_cast<uint32_t>(pos0), 1.0f / std::sqrt(static_cast<float>(head_dim))};
  dispatch("attention", {&q, &k_pool, &v_pool, &pages, &out}, &pc, sizeof pc, static_cast<uint32_t>(n_heads), static_cast<uint32_t>(rows));
}

void VulkanContext::swiglu(Buffer& g, const Buffer& u, int64_t n) {
  struct { uint32_t n; } pc{static_cast<uint32_t>(n)};
  dispatch("swiglu", {&g, &u}, &pc, sizeof pc, groups(n, pipeline("swiglu").workgroup));
}

void VulkanContext::matvec(GgmlType type, const Buffer& w, int64_t rows, int64_t cols, const Buffer& x, Buffer& y, int64_t tokens) {
  const char* name = type == GgmlType::F32 ? "matvec_f32" : type == GgmlType::Q8_0 ? "matvec_q8_0" : nullptr;
  if (!name) throw DeviceError(std::string("vulkan: no matvec kernel for ") + (type_traits(type).name ? type_traits(type).name : "this type") + " yet");
  if (type == GgmlType::Q8_0 && cols % 32 != 0) throw DeviceError("vulkan: Q8_0 rows must be a multiple of 32 values");
  const Pipeline& p = pipeline(name);
  vk::Api& a = api_;
  const uint64_t row_bytes = ::fulcrum::row_bytes(type, cols);
  const uint64_t align = std::max<uint32_t>(info_.storage_offset_alignment, 4);
  // Rows per window: as many as fit in maxStorageBufferRange after the alignment skew.
  const uint64_t range = std::min<uint64_t>(info_.max_storage_range, uint64_t{1} << 31);
  // One workgroup per row: at most 65535 rows per dispatch (the smallest maxComputeWorkGroupCount).
  const int64_t per_window = std::min<int64_t>(65535, static_cast<int64_t>(std::max<uint64_t>(1, (range - align) / row_bytes)));
  if (row_bytes + align > range) throw DeviceError("vulkan: one row of " + std::to_string(row_bytes) + " bytes exceeds maxStorageBufferRange");
  a.vkResetDescriptorPool(device_, descriptors_, 0);
  VkCommandBuffer cb = begin();
  a.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  int64_t windows = 0;
  for (int64_t r0 = 0; r0 < rows; r0 += per_window) {
    const int64_t n = std::min(per_window, rows - r0);
    const uint64_t start = static_cast<uint64_t>(r0) * row_bytes;
    const uint64_t offset = start / align * align;
    const uint64_t skew = start - offset;
    VkDescriptorSetAllocateInfo dai{};
    dai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
    dai.descriptorPool = descriptors_;
    dai.descriptorSetCount = 1;
    dai.pSetLayouts = &p.set_layout;
    VkDescriptorSet set;
    check(a.vkAllocateDescriptorSets(device_, &dai, &set), "vkAllocateDescriptorSets (more than 256 windows?)");
    const uint64_t wlen = std::min<uint64_t>(w.size - offset, (skew + static_cast<uint64_t>(n) * row_bytes + 3) / 4 * 4);
    VkDescriptorBufferInfo infos[3] = {{w.buffer, offset, wlen}, {x.buffer, 0, x.size}, {y.buffer, 0, y.size}};
    VkWriteDescriptorSet writes[3];
    for (uint32_t i = 0; i < 3; ++i) {
      writes[i] = VkWriteDescriptorSet{};
      writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
      writes[i].dstSet = set;
      writes[i].dstBinding = i;
      writes[i].descriptorCount = 1;
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &infos[i];
    }
    a.vkUpdateDescriptorSets(device_, 3, writes, 0, nullptr);
    a.vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
    uint8_t pc[kPushBytes] = {};
    PushParams pp{static_cast<uint32_t>(n), static_cast<uint32_t>(cols), static_cast<uint32_t>(row_bytes), static_cast<uint32_t>(skew), static_cast<uint32_t>(r0), static_cast<uint32_t>(rows)};
    std::memcpy(pc, &pp, sizeof pp);
    a.vkCmdPushConstants(cb, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushBytes, pc);
    a.vkCmdDispatch(cb, static_cast<uint32_t>(n), static_cast<uint32_t>(tokens), 1);
    ++windows;
  }
  submit_and_wait(cb);
  last_windows_ = windows;
}

}  // namespace fulcrum
