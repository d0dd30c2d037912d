#include "device/vulkan/vk_api.h"

#include <dlfcn.h>

#include <mutex>

namespace fulcrum::vk {

const Api* load_api(std::string* why) {
  static Api api;
  static std::string error;
  static bool ok = false;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = ::dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = ::dlopen("libvulkan.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = ::dlerror();
      error = std::string("the Vulkan loader (libvulkan.so.1) is not installed: ") + (e ? e : "dlopen failed") +
              " (Debian/Ubuntu: apt-get install libvulkan1 and your GPU's driver, or mesa-vulkan-drivers)";
      return;
    }
    api.vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(::dlsym(lib, "vkGetInstanceProcAddr"));
    if (!api.vkGetInstanceProcAddr) {
      error = "libvulkan.so.1 has no vkGetInstanceProcAddr";
      return;
    }
#define FULCRUM_VK_LOAD(name) api.name = reinterpret_cast<PFN_##name>(api.vkGetInstanceProcAddr(nullptr, #name));
    FULCRUM_VK_GLOBAL(FULCRUM_VK_LOAD)
#undef FULCRUM_VK_LOAD
    if (!api.vkCreateInstance) {
      error = "the Vulkan loader does not provide vkCreateInstance";
      return;
    }
    ok = true;
  });
  if (!ok) {
    if (why) *why = error;
    return nullptr;
  }
  return &api;
}

void load_instance_api(Api* api, VkInstance instance) {
#define FULCRUM_VK_LOAD(name) api->name = reinterpret_cast<PFN_##name>(api->vkGetInstanceProcAddr(instance, #name));
  FULCRUM_VK_INSTANCE(FULCRUM_VK_LOAD)
#undef FULCRUM_VK_LOAD
}

void load_device_api(Api* api, VkDevice device) {
#define FULCRUM_VK_LOAD(name) api->name = reinterpret_cast<PFN_##name>(api->vkGetDeviceProcAddr(device, #name));
  FULCRUM_VK_DEVICE(FULCRUM_VK_LOAD)
#undef FULCRUM_VK_LOAD
}

const char* result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    default: return "VkResult error";
  }
}

}  // namespace fulcrum::vk
