// f16 -> f32 lookup table (see fp16_table.cc). Plain data: safe to read from any ISA file.
#pragma once
#include <cstdint>

namespace fulcrum {
namespace quant {

extern float g_f16_table[65536];
void fill_f16_table();

}  // namespace quant
}  // namespace fulcrum
