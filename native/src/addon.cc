// Module entry: runs every registered part's init (see addon_registry.h).
#include "addon_registry.h"
#include "core/isa.h"

#include <vector>
#include <utility>

namespace fulcrum {
namespace {
std::vector<std::pair<const char*, AddonPartInit>>& parts() {
  static std::vector<std::pair<const char*, AddonPartInit>> list;
  return list;
}
}  // namespace

AddonPart::AddonPart(const char* name, AddonPartInit init) { parts().emplace_back(name, init); }

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  // The one ISA choice and the kernels it installs, made at load rather than at the first call.
  (void)kernel_choice();
  Napi::Array names = Napi::Array::New(env);
  uint32_t i = 0;
  for (auto& [name, init] : parts()) {
    init(env, exports);
    names.Set(i++, Napi::String::New(env, name));
  }
  exports.Set("parts", names);
  return exports;
}

}  // namespace fulcrum

// NODE_API_MODULE pastes the function name into an identifier, so it needs an unqualified name.
static Napi::Object FulcrumInit(Napi::Env env, Napi::Object exports) { return fulcrum::Init(env, exports); }
NODE_API_MODULE(fulcrum, FulcrumInit)
