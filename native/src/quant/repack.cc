// The packed layouts' registry and the load-time repacking (baseline code: it runs once per
// weight during the load copy, memory-bound, and must work on every CPU).
#include "quant/repack.h"

#include <cstdlib>
#include <initializer_list>
#include <cstring>
#include <strings.h>

#include "quant/blocks.h"
#include "quant/quant_impl.h"

namespace fulcrum {

const char* weight_layout_name(WeightLayout l) {
  switch (l) {
    case WeightLayout::Gguf: return "gguf";
    case WeightLayout::Q4_0x4: return "q4_0x4";
    case WeightLayout::Q5_0x4: return "q5_0x4";
    case WeightLayout::Q8_0x4: return "q8_0x4";
    case WeightLayout::Q4_Kx4: return "q4_kx4";
    case WeightLayout::Q6_Kx4: return "q6_kx4";
  }
  return "?";
}

namespace quant {
namespace {

PackedFormat g_q4_0, g_q5_0, g_q8_0, g_q4_k, g_q6_k;  // layout Gguf until register_packed_formats finds kernels for this CPU

// Whether the comma-separated list names `t` (case-insensitive). Not type_traits(t).name: this
// runs while the type table registers itself.
bool names_type(const char* list, GgmlType t) {
  const char* type = t == GgmlType::Q4_0 ? "q4_0" : t == GgmlType::Q5_0 ? "q5_0" : t == GgmlType::Q8_0 ? "q8_0" : t == GgmlType::Q4_K ? "q4_k" : t == GgmlType::Q6_K ? "q6_k" : "";
  for (const char* p = list; *p;) {
    const char* end = std::strchr(p, ',');
    const size_t len = end ? static_cast<size_t>(end - p) : std::strlen(p);
    if (len == std::strlen(type) && strncasecmp(p, type, len) == 0) return true;
    if (!end) break;
    p = end + 1;
  }
  return false;
}

}  // namespace

void register_packed_formats(const CpuFeatures& f) {
  g_q4_0 = g_q5_0 = g_q8_0 = g_q4_k = g_q6_k = PackedFormat{};
  // FULCRUM_NO_REPACK=1 keeps every weight in the GGUF layout (to compare the two);
  // FULCRUM_NO_REPACK=q4_k,q8_0 (type names, any case) only those types.
  const char* no_repack = std::getenv("FULCRUM_NO_REPACK");
  if (no_repack && no_repack[0] == '1') return;
  PackedFormat q4, q5, q8, q4k, q6k;
  q4k.layout = WeightLayout::Q4_Kx4;
  q4k.type = GgmlType::Q4_K;
  q6k.layout = WeightLayout::Q6_Kx4;
  q6k.type = GgmlType::Q6_K;
  for (PackedFormat* q : {&q4k, &q6k}) {
    q->group_rows = 4;
    q->chunk_cols = QK_K;
    q->act_chunk_bytes = sizeof(block_q8_K);
  }
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
    q4k.gemv = gemv_q4_kx4_avx512;
    q4k.tile = tile_q4_kx4_avx512;
    q4k.tile_cols = kPackedTileColsAvx512;
    g_q4_k = q4k;
    q6k.gemv = gemv_q6_kx4_avx512;
    q6k.tile = tile_q6_kx4_avx512;
    q6k.tile_cols = kPackedTileColsAvx512;
    g_q6_k = q6k;
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
    q4k.gemv = gemv_q4_kx4_avx2;
    q4k.tile = tile_q4_kx4_avx2;
    q4k.tile_cols = kPackedTileColsAvx2;
    g_q4_k = q4k;
    q6k.gemv = gemv_q6_kx4_avx2;
    q6k.tile = tile_q6_kx4_avx2;
    q6k.tile_cols = kPackedTileColsAvx2;
    g_q6_k = q6k;
  } else {
    return;
  }
  g_q4_0 = q4;
  g_q5_0 = q5;
  if (no_repack) {
    for (PackedFormat* q : {&g_q4_0, &g_q5_0, &g_q8_0, &g_q4_k, &g_q6_k})
      if (q->gemv && names_type(no_repack, q->type)) *q = PackedFormat{};
  }
}

const PackedFormat* packed_format(GgmlType t) {
  (void)type_traits(t);  // the table's one-time registration chooses the packed kernels too
  if (t == GgmlType::Q4_0 && g_q4_0.gemv) return &g_q4_0;
  if (t == GgmlType::Q5_0 && g_q5_0.gemv) return &g_q5_0;
  if (t == GgmlType::Q8_0 && g_q8_0.gemv) return &g_q8_0;
  if (t == GgmlType::Q4_K && g_q4_k.gemv) return &g_q4_k;
  if (t == GgmlType::Q6_K && g_q6_k.gemv) return &g_q6_k;
  return nullptr;
}

bool packs(GgmlType t, int64_t rows, int64_t cols) {
  const PackedFormat* pf = packed_format(t);
  return pf && rows > 0 && cols > 0 && rows % pf->group_rows == 0 && cols % pf->chunk_cols == 0;
}

namespace {

// q4_kx4 (repack.h): per group of four rows, super-block after super-block.
void repack_q4_k(uint8_t* data, int64_t rows, int64_t cols, uint8_t* scratch) {
  const int64_t nsb = cols / QK_K;
  const size_t rb = static_cast<size_t>(nsb) * sizeof(block_q4_K);
  static constexpr size_t kScaleAt[4] = {0, 12, 32, 44};
  for (int64_t g = 0; g < rows / 4; ++g) {
    uint8_t* dst = data + static_cast<size_t>(g) * rb * 4;
    std::memcpy(scratch, dst, rb * 4);
    for (int64_t i = 0; i < nsb; ++i) {
      uint8_t* s = dst + static_cast<size_t>(i) * 4 * sizeof(block_q4_K);
      for (int r = 0; r < 4; ++r) {
        const block_q4_K* b = reinterpret_cast<const block_q4_K*>(scratch + r * rb) + i;
        std::memcpy(s + kScaleAt[r], b->scales, K_SCALE_SIZE);
        std::memcpy(s + 24 + 2 * r, &b->d, 2);
        std::memcpy(s + 56 + 2 * r, &b->dmin, 2);
        for (int c = 0; c < 4; ++c)
          for (int h = 0; h < 2; ++h) std::memcpy(s + 64 + 128 * c + 64 * h + 16 * r, b->qs + 32 * c + 16 * h, 16);
      }
    }
  }
}

// q6_kx4 (repack.h): per group of four rows, super-block after super-block.
void repack_q6_k(uint8_t* data, int64_t rows, int64_t cols, uint8_t* scratch) {
  const int64_t nsb = cols / QK_K;
  const size_t rb = static_cast<size_t>(nsb) * sizeof(block_q6_K);
  for (int64_t g = 0; g < rows / 4; ++g) {
    uint8_t* dst = data + static_cast<size_t>(g) * rb * 4;
    std::memcpy(scratch, dst, rb * 4);
    for (int64_t i = 0; i < nsb; ++i) {
      uint8_t* s = dst + static_cast<size_t>(i) * 4 * sizeof(block_q6_K);
      for (int r = 0; r < 4; ++r) {
        const block_q6_K* b = reinterpret_cast<const block_q6_K*>(scratch + r * rb) + i;
        std::memcpy(s + 16 * r, b->scales, QK_K / 16);
        std::memcpy(s + 832 + 2 * r, &b->d, 2);
        for (int q = 0; q < 4; ++q) {
          const int hf = q / 2, p = q % 2;
          uint8_t* piece = s + 64 + 192 * q + 16 * r;
          std::memcpy(piece, b->ql + 64 * hf + 16 * p, 16);
          std::memcpy(piece + 64, b->ql + 64 * hf + 32 + 16 * p, 16);
          std::memcpy(piece + 128, b->qh + 32 * hf + 16 * p, 16);
        }
      }
    }
  }
}

}  // namespace

void repack_rows(const PackedFormat& pf, uint8_t* data, int64_t rows, int64_t cols, uint8_t* scratch) {
  if (pf.layout == WeightLayout::Q4_Kx4) return repack_q4_k(data, rows, cols, scratch);
  if (pf.layout == WeightLayout::Q6_Kx4) return repack_q6_k(data, rows, cols, scratch);
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
