// The packed layouts' registry and the load-time repacking (baseline code: it runs once per
// weight during the load copy, memory-bound, and must work on every CPU).
#include "quant/repack.h"

#include <cstdlib>
#include <cstring>

#include "quant/blocks.h"
#include "quant/quant_impl.h"

namespace fulcrum {

const char* weight_layout_name(WeightLayout l) {
  switch (l) {
    case WeightLayout::Gguf: return "gguf";
    case WeightLayout::Q4_0x4: return "q4_0x4";
  }
  return "?";
}

namespace quant {
namespace {

PackedFormat g_q4_0;  // layout Gguf until register_packed_formats finds kernels for this CPU

}  // namespace

void register_packed_formats(const CpuFeatures& f) {
  g_q4_0 = PackedFormat{};
  PackedFormat q;
  q.layout = WeightLayout::Q4_0x4;
  q.type = GgmlType::Q4_0;
  q.group_rows = 4;
  q.chunk_cols = 4 * QK4_0;
  q.act_chunk_bytes = 256;
  // FULCRUM_NO_REPACK=1 keeps every weight in the GGUF layout (to compare the two).
  if (const char* e = std::getenv("FULCRUM_NO_REPACK"); e && e[0] == '1') return;
  if (isa_runs_on(Isa::Avx512, f)) {
    // With AMX-INT8, Q4_0's prefill runs on AMX tiles that read the GGUF layout (the AVX-512
    // GEMV alone would not pay for a second copy): leave it unpacked.
    if (f.amx_int8) return;
    q.arrange_act = arrange_q8_0_split_avx512;
    q.gemv = gemv_q4_0x4_avx512;
    q.tile = tile_q4_0x4_avx512;
    q.tile_cols = kPackedTileColsAvx512;
  } else if (isa_runs_on(Isa::Avx2, f)) {
    q.arrange_act = arrange_q8_0_split_avx2;
    q.gemv = gemv_q4_0x4_avx2;
    q.tile = tile_q4_0x4_avx2;
    q.tile_cols = kPackedTileColsAvx2;
  } else {
    return;
  }
  g_q4_0 = q;
}

const PackedFormat* packed_format(GgmlType t) {
  (void)type_traits(t);  // the table's one-time registration chooses the packed kernels too
  if (t == GgmlType::Q4_0 && g_q4_0.gemv) return &g_q4_0;
  return nullptr;
}

bool packs(GgmlType t, int64_t rows, int64_t cols) {
  const PackedFormat* pf = packed_format(t);
  return pf && rows > 0 && cols > 0 && rows % pf->group_rows == 0 && cols % pf->chunk_cols == 0;
}

void repack_rows(const PackedFormat& pf, uint8_t* data, int64_t rows, int64_t cols, uint8_t* scratch) {
  // Q4_0x4 (the only layout so far): see repack.h.
  const int64_t nb = cols / QK4_0, chunks = cols / pf.chunk_cols;
  const size_t rb = static_cast<size_t>(nb) * sizeof(block_q4_0);
  const size_t group_bytes = rb * 4;
  for (int64_t g = 0; g < rows / 4; ++g) {
    uint8_t* dst = data + static_cast<size_t>(g) * group_bytes;
    std::memcpy(scratch, dst, group_bytes);
    for (int64_t j = 0; j < chunks; ++j) {
      uint8_t* c = dst + static_cast<size_t>(j) * 288;
      for (int r = 0; r < 4; ++r)
        for (int k = 0; k < 4; ++k) {
          const block_q4_0* b = reinterpret_cast<const block_q4_0*>(scratch + r * rb) + 4 * j + k;
          std::memcpy(c + 2 * (4 * r + k), &b->d, 2);
          std::memcpy(c + 32 + 64 * r + 16 * k, b->qs, 16);
        }
    }
  }
}

}  // namespace quant
}  // namespace fulcrum
