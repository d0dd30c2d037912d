// The Vulkan API, loaded at run time: the loader library is opened with dlopen, so the addon
// builds and runs where there is none (then `fulcrum devices` says why Vulkan is unavailable).
// Function pointers are fetched through vkGetInstanceProcAddr / vkGetDeviceProcAddr.
#pragma once
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <string>

namespace fulcrum::vk {

#define FULCRUM_VK_GLOBAL(X) X(vkCreateInstance) X(vkEnumerateInstanceExtensionProperties) X(vkEnumerateInstanceLayerProperties)
#define FULCRUM_VK_INSTANCE(X)                                                                                              \
  X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties) X(vkGetPhysicalDeviceProperties2)     \
  X(vkGetPhysicalDeviceMemoryProperties) X(vkGetPhysicalDeviceMemoryProperties2) X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkEnumerateDeviceExtensionProperties) X(vkCreateDevice) X(vkGetDeviceProcAddr) X(vkGetPhysicalDeviceFeatures2)          \
  X(vkCreateDebugUtilsMessengerEXT) X(vkDestroyDebugUtilsMessengerEXT)
#define FULCRUM_VK_DEVICE(X)                                                                                                  \
  X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkDestroyBuffer) X(vkGetBufferMemoryRequirements)              \
  X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory) X(vkMapMemory) X(vkUnmapMemory) X(vkCreateCommandPool)            \
  X(vkDestroyCommandPool) X(vkAllocateCommandBuffers) X(vkFreeCommandBuffers) X(vkBeginCommandBuffer) X(vkEndCommandBuffer)   \
  X(vkCmdCopyBuffer) X(vkCmdBindPipeline) X(vkCmdBindDescriptorSets) X(vkCmdPushConstants) X(vkCmdDispatch)                   \
  X(vkCmdPipelineBarrier) X(vkQueueSubmit) X(vkQueueWaitIdle) X(vkCreateFence) X(vkDestroyFence) X(vkWaitForFences)           \
  X(vkResetFences) X(vkResetCommandBuffer) X(vkCreateShaderModule) X(vkDestroyShaderModule) X(vkCreateDescriptorSetLayout)    \
  X(vkDestroyDescriptorSetLayout) X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout) X(vkCreateComputePipelines)            \
  X(vkDestroyPipeline) X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool) X(vkAllocateDescriptorSets)                       \
  X(vkUpdateDescriptorSets) X(vkResetDescriptorPool) X(vkDeviceWaitIdle)

struct Api {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
#define FULCRUM_VK_MEMBER(name) PFN_##name name = nullptr;
  FULCRUM_VK_GLOBAL(FULCRUM_VK_MEMBER)
  FULCRUM_VK_INSTANCE(FULCRUM_VK_MEMBER)
  FULCRUM_VK_DEVICE(FULCRUM_VK_MEMBER)
#undef FULCRUM_VK_MEMBER
};

// Opens the loader once per process. Returns nullptr and sets *why when it cannot.
const Api* load_api(std::string* why);
void load_instance_api(Api* api, VkInstance instance);
void load_device_api(Api* api, VkDevice device);

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" etc.
const char* result_name(VkResult r);

}  // namespace fulcrum::vk
