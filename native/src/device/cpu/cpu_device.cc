// The cpu device: host memory and the host's kernels. Listed by `fulcrum devices` with its ISA
// level; the model's host buffers are this device's memory (no separate budget: the load-time
// memory check against MemAvailable covers them).
#include <thread>

#include "device/device.h"
#include "device/vulkan/vulkan_context.h"
#include "ggml_types.h"

namespace fulcrum {

DeviceListing list_devices() {
  DeviceListing out;
  DeviceInfo cpu;
  cpu.name = "cpu";
  cpu.description = std::string("host CPU, ") + isa_level() + " kernels, " + std::to_string(physical_cores()) + " physical cores";
  cpu.threads = physical_cores();
  for (int t = 0; t < static_cast<int>(GgmlType::COUNT); ++t) {
    const TypeTraits& tt = type_traits(static_cast<GgmlType>(t));
    if (tt.name && tt.supported && tt.vec_dot) cpu.formats.push_back(tt.name);
  }
  cpu.ops = {"embed", "rmsnorm", "matmul", "add_bias", "rope", "store_kv", "attention", "add_residual", "swiglu"};
  out.found.push_back(cpu);
  DeviceInfo lb;
  lb.name = "loopback";
  lb.description = "accelerator emulated on the host (own arena, worker pool and link; runs the CPU kernels); only when asked for";
  lb.emulated = true;
  lb.formats = cpu.formats;
  lb.ops = cpu.ops;
  lb.threads = 1;
  out.found.push_back(lb);
  // Vulkan: the device is probed (the loader opened with dlopen); its executor lanes are not
  // wired yet, so it is listed with what it is and what it cannot do yet.
  std::string why;
  const VulkanContext* vk = VulkanContext::shared(&why);
  if (!vk) {
    out.unavailable.push_back("vulkan: " + why);
  } else {
    const VulkanInfo& v = vk->info();
    out.unavailable.push_back("vulkan: " + v.name + " (" + v.type + ", " + std::to_string(v.budget_bytes >> 20) + " MiB budget, subgroup " +
                              std::to_string(v.subgroup_size) + ") found; its kernels so far are matvec/matmul F32 and Q8_0, RMSNorm, RoPE, add, SwiGLU and paged attention, but the executor does not dispatch to it yet");
  }
  return out;
}

}  // namespace fulcrum
