// Each part of the addon (model, kernels, quant, bench…) registers its exports here with
// FULCRUM_ADDON_PART, so adding a part never edits a central file.
#pragma once
#include <napi.h>

namespace fulcrum {

using AddonPartInit = void (*)(Napi::Env env, Napi::Object exports);

struct AddonPart {
  AddonPart(const char* name, AddonPartInit init);
};

}  // namespace fulcrum

#define FULCRUM_ADDON_PART(id, fn) static ::fulcrum::AddonPart fulcrum_addon_part_##id(#id, fn)
