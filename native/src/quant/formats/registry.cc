// Fills the type-traits table with the block formats for the ISA core chose (core/isa.h
// select_kernels); and keeps the per-ISA tables so tests and benchmarks can run every path side
// by side.
#include "quant/formats/blocks.h"
#include "quant/formats/fp16_table.h"
#include "quant/formats/quant_impl.h"

namespace fulcrum {
namespace quant {

namespace {

const FormatInfo kFormats[] = {
    {GgmlType::Q4_0, "Q4_0", QK4_0, sizeof(block_q4_0), GgmlType::Q8_0, true},
    {GgmlType::Q4_1, "Q4_1", QK4_1, sizeof(block_q4_1), GgmlType::Q8_1, true},
    {GgmlType::Q5_0, "Q5_0", QK5_0, sizeof(block_q5_0), GgmlType::Q8_0, true},
    {GgmlType::Q5_1, "Q5_1", QK5_1, sizeof(block_q5_1), GgmlType::Q8_1, true},
    {GgmlType::Q8_0, "Q8_0", QK8_0, sizeof(block_q8_0), GgmlType::Q8_0, true},
    {GgmlType::Q8_1, "Q8_1", QK8_1, sizeof(block_q8_1), GgmlType::Q8_1, false},
    {GgmlType::Q4_K, "Q4_K", QK_K, sizeof(block_q4_K), GgmlType::Q8_K, true},
    {GgmlType::Q5_K, "Q5_K", QK_K, sizeof(block_q5_K), GgmlType::Q8_K, true},
    {GgmlType::Q6_K, "Q6_K", QK_K, sizeof(block_q6_K), GgmlType::Q8_K, true},
    {GgmlType::Q8_K, "Q8_K", QK_K, sizeof(block_q8_K), GgmlType::Q8_K, false},
};

struct Entry {
  GgmlType type;
  Kernels k[kIsaCount];  // per Isa; null fields filled from the lower ISA below
};

#define SCALAR(fmt) {dequantize_row_##fmt##_scalar, quantize_row_##fmt##_scalar, vec_dot_##fmt##_scalar}
// Weight formats: SIMD vec_dot; dequantize and quantize (weights, not per token) stay scalar.
#define DOT(fmt, isa) {nullptr, nullptr, vec_dot_##fmt##_##isa}
// Activation formats: SIMD quantize (runs per token).
#define ACT(fmt, isa) {nullptr, quantize_row_##fmt##_##isa, nullptr}

Entry kEntries[] = {
    {GgmlType::Q4_0, {SCALAR(q4_0), DOT(q4_0, avx2), DOT(q4_0, avxvnni), DOT(q4_0, avx512)}},
    {GgmlType::Q4_1, {SCALAR(q4_1), DOT(q4_1, avx2), DOT(q4_1, avxvnni), DOT(q4_1, avx512)}},
    {GgmlType::Q5_0, {SCALAR(q5_0), DOT(q5_0, avx2), DOT(q5_0, avxvnni), DOT(q5_0, avx512)}},
    {GgmlType::Q5_1, {SCALAR(q5_1), DOT(q5_1, avx2), DOT(q5_1, avxvnni), DOT(q5_1, avx512)}},
    {GgmlType::Q8_0, {SCALAR(q8_0),
                      {nullptr, quantize_row_q8_0_avx2, vec_dot_q8_0_avx2},
                      {nullptr, quantize_row_q8_0_avxvnni, vec_dot_q8_0_avxvnni},
                      {nullptr, quantize_row_q8_0_avx512, vec_dot_q8_0_avx512}}},
    {GgmlType::Q8_1, {{dequantize_row_q8_1_scalar, quantize_row_q8_1_scalar, nullptr}, ACT(q8_1, avx2), ACT(q8_1, avxvnni), ACT(q8_1, avx512)}},
    {GgmlType::Q4_K, {SCALAR(q4_k), DOT(q4_k, avx2), DOT(q4_k, avxvnni), DOT(q4_k, avx512)}},
    {GgmlType::Q5_K, {SCALAR(q5_k), DOT(q5_k, avx2), DOT(q5_k, avxvnni), DOT(q5_k, avx512)}},
    {GgmlType::Q6_K, {SCALAR(q6_k), DOT(q6_k, avx2), DOT(q6_k, avxvnni), DOT(q6_k, avx512)}},
    {GgmlType::Q8_K, {{dequantize_row_q8_k_scalar, quantize_row_q8_k_scalar, nullptr}, ACT(q8_k, avx2), ACT(q8_k, avxvnni), ACT(q8_k, avx512)}},
};
#undef SCALAR
#undef DOT
#undef ACT

// Missing kernels of a higher ISA inherit the next lower ISA's.
bool fill_fallbacks() {
  for (Entry& e : kEntries) {
    for (int i = 1; i < kIsaCount; ++i) {
      Kernels& k = e.k[i];
      const Kernels& lower = e.k[i - 1];
      if (!k.dequantize_row) k.dequantize_row = lower.dequantize_row;
      if (!k.quantize_row) k.quantize_row = lower.quantize_row;
      if (!k.vec_dot) k.vec_dot = lower.vec_dot;
    }
  }
  return true;
}

}  // namespace

const FormatInfo* format_info(GgmlType t) {
  for (const FormatInfo& fi : kFormats)
    if (fi.type == t) return &fi;
  return nullptr;
}

const Kernels* quant_impl(GgmlType t, Isa isa) {
  static const bool filled = fill_fallbacks();  // lazily: callers may run during static init
  (void)filled;
  const int i = static_cast<int>(isa);
  if (i < 0 || i >= kIsaCount) return nullptr;
  for (const Entry& e : kEntries)
    if (e.type == t) return &e.k[i];
  return nullptr;
}

}  // namespace quant

void register_quant_types(TypeTraits* table, const KernelChoice& c) {
  using namespace quant;
  fill_f16_table();
  const Isa best = c.isa;
  for (const FormatInfo& fi : kFormats) {
    const Kernels* k = quant_impl(fi.type, best);
    if (!k) continue;
    TypeTraits& tt = table[static_cast<int>(fi.type)];
    tt.name = fi.name;
    tt.block_size = fi.block_size;
    tt.type_size = fi.type_size;
    tt.vec_dot_type = fi.vec_dot_type;
    tt.dequantize_row = k->dequantize_row;
    tt.quantize_row = k->quantize_row;
    tt.vec_dot = fi.has_vec_dot ? k->vec_dot : nullptr;
    tt.supported = fi.has_vec_dot && tt.dequantize_row && tt.vec_dot;
  }
}

}  // namespace fulcrum
