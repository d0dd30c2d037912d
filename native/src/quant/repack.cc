// The packed layouts' registry and the load-time repacking (baseline code: it runs once per
// weight during the load copy, memory-bound, and must work on every CPU).
#include "quant/repack.h"

#include <cstdlib>
#include <initializer_list>
#include <cstring>

#include "quant/blocks.h"
#include "quant/quant_impl.h"

namespace fulcrum {

const char* weight_layout_name(WeightLayout l) {
  switch (l) {
    case WeightLayout::Gguf: return "gguf";
    case WeightLayout::Q4_0x4: return "q4_0x4";
    case WeightLayout::Q5_0x4: return "q5_0x4";
    case WeightLayout::Q8_0x4: return "q8_0x4";
  }
  return "?";
}

namespace quant {
namespace {

PackedFormat g_q4_0, g_q5_0, g_q8_0;  // layout Gguf until register_packed_formats finds kernels for this CPU

}  // namespace

void register_packed_formats(const CpuFeatures& f) {
  g_q4_0 = g_q5_0 = g_q8_0 = PackedFormat{};
  // FULCRUM_NO_REPACK=1 keeps every weight in the GGUF layout (to compare the two).
  if (const char* e = std::getenv("FULCRUM_NO_REPACK"); e && e[0] == '1') return;
  PackedFormat q4, q5, q8;
  q4.layout = WeightLayout::Q4_0x4;
  q4.type = GgmlType::Q4_0;
  q5.layout = WeightLayout::Q5_0x4;
  q5.type = GgmlType::Q5_0;
  q8.layout = WeightLayout::Q8_0x4;
  q8.type = GgmlType::Q8_0;
  for (PackedFormat* q : {&q4, &q5, &q8}) {
    q->group_rows = 4;
    q->chunk_cols = 4 * QK4_0;
    q->act_chunk_bytes = 256;
  }
  if (isa_runs_on(Isa::Avx512, f)) {
    // With AMX-INT8, the prefill of these formats runs on AMX tiles that read the GGUF layout
    // (the AVX-512 GEMV alone would not pay for a second copy): leave them unpacked.
    if (f.amx_int8) return;
    q4.arrange_act = q5.arrange_act = arrange_q8_0_split_avx512;
    q4.gemv = gemv_q4_0x4_avx512;
    q4.tile = tile_q4_0x4_avx512;
    q5.gemv = gemv_q5_0x4_avx512;
    q5.tile = tile_q5_0x4_avx512;
    q4.tile_cols = q5.tile_cols = kPackedTileColsAvx512;
    q8.arrange_act = arrange_q8_0_split_avx512;
    q8.gemv = gemv_q8_0x4_avx512;
    q8.tile = tile_q8_0x4_avx512;
    q8.tile_cols = kPackedTileColsAvx512;
    g_q8_0 = q8;
  } else if (isa_runs_on(Isa::Avx2, f)) {
    q4.arrange_act = q5.arrange_act = arrange_q8_0_split_avx2;
    q4.gemv = gemv_q4_0x4_avx2;
    q4.tile = tile_q4_0x4_avx2;
    q5.gemv = gemv_q5_0x4_avx2;
    q5.tile = tile_q5_0x4_avx2;
    q4.tile_cols = q5.tile_cols = kPackedTileColsAvx2;
    q8.arrange_act = arrange_q8_0_split_avx2;
    q8.gemv = gemv_q8_0x4_avx2;
    q8.tile = tile_q8_0x4_avx2;
    q8.tile_cols = kPackedTileColsAvx2;
    g_q8_0 = q8;
  } else {
    return;
  }
  g_q4_0 = q4;
  g_q5_0 = q5;
}

const PackedFormat* packed_format(GgmlType t) {
  (void)type_traits(t);  // the table's one-time registration chooses the packed kernels too
  if (t == GgmlType::Q4_0 && g_q4_0.gemv) return &g_q4_0;
  if (t == GgmlType::Q5_0 && g_q5_0.gemv) return &g_q5_0;
  if (t == GgmlType::Q8_0 && g_q8_0.gemv) return &g_q8_0;
  return nullptr;
}

bool packs(GgmlType t, int64_t rows, int64_t cols) {
  const PackedFormat* pf = packed_format(t);
  return pf && rows > 0 && cols > 0 && rows % pf->group_rows == 0 && cols % pf->chunk_cols == 0;
}

void repack_rows(const PackedFormat& pf, uint8_t* data, int64_t rows, int64_t cols, uint8_t* scratch) {
  const int64_t nb = cols / QK4_0, chunks = cols / pf.chunk_cols;
  const TypeTraits& tt = type_traits(pf.type);
  const size_t bb = tt.type_size, rb = static_cast<size_t>(nb) * bb, chunk_bytes = 16 * bb;
  const size_t qs_off = pf.layout == WeightLayout::Q5_0x4 ? 96 : 32;
  const size_t row_qs = pf.layout == WeightLayout::Q8_0x4 ? 128 : 64;
  for (int64_t g = 0; g < rows / 4; ++g) {
    uint8_t* dst = data + static_cast<size_t>(g) * rb * 4;
    std::memcpy(scratch, dst, rb * 4);
    for (int64_t j = 0; j < chunks; ++j) {
      uint8_t* c = dst + static_cast<size_t>(j) * chunk_bytes;
      for (int r = 0; r < 4; ++r) {
        uint64_t mlo = 0, mhi = 0;
        for (int k = 0; k < 4; ++k) {
          const uint8_t* b = scratch + r * rb + static_cast<size_t>(4 * j + k) * bb;
          std::memcpy(c + 2 * (4 * r + k), b, 2);  // d: both formats start with it
          if (pf.layout == WeightLayout::Q5_0x4) {
            const block_q5_0* q5 = reinterpret_cast<const block_q5_0*>(b);
            uint32_t qh;
            std::memcpy(&qh, q5->qh, 4);
            mlo |= static_cast<uint64_t>(qh & 0xFFFF) << (16 * k);
            mhi |= static_cast<uint64_t>(qh >> 16) << (16 * k);
            std::memcpy(c + qs_off + 64 * r + 16 * k, q5->qs, 16);
          } else if (pf.layout == WeightLayout::Q8_0x4) {
            const block_q8_0* q8b = reinterpret_cast<const block_q8_0*>(b);
            std::memcpy(c + qs_off + row_qs * r + 16 * k, q8b->qs, 16);
            std::memcpy(c + qs_off + row_qs * r + 64 + 16 * k, q8b->qs + 16, 16);
          } else {
            std::memcpy(c + qs_off + 64 * r + 16 * k, reinterpret_cast<const block_q4_0*>(b)->qs, 16);
          }
        }
        if (pf.layout == WeightLayout::Q5_0x4) {
          std::memcpy(c + 32 + 16 * r, &mlo, 8);
          std::memcpy(c + 32 + 16 * r + 8, &mhi, 8);
        }
      }
    }
  }
}

}  // namespace quant
}  // namespace fulcrum
