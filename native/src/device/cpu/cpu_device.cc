// The cpu device: host memory and the host's kernels. Listed by `fulcrum devices` with its ISA
// level; the model's host buffers are this device's memory (no separate budget: the load-time
// memory check against MemAvailable covers them).
#include <thread>

#include "device/device.h"
#include "ggml_types.h"
#include "kernels/attention.h"

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
  cpu.kv_formats = cpu_kv_format_names();
  out.found.push_back(cpu);
  DeviceInfo lb;
  lb.name = "loopback";
  lb.description = "accelerator emulated on the host (own arena, worker pool and link; runs the CPU kernels); only when asked for";
  lb.emulated = true;
  lb.formats = cpu.formats;
  lb.ops = cpu.ops;
  lb.kv_formats = cpu.kv_formats;
  lb.threads = 1;
  out.found.push_back(lb);
  // Vulkan: the device is opened (the loader with dlopen) and described as the executor sees it.
  try {
    std::unique_ptr<Device> vk = make_vulkan_device(VulkanDeviceOptions{});
    out.found.push_back(vk->info());
  } catch (const std::exception& e) {
    out.unavailable.push_back(e.what());
  }
  return out;
}

}  // namespace fulcrum
