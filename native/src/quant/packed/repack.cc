// The packed layouts' registry and the load-time repacking (baseline code: it runs once per
// weight during the load copy, memory-bound, and must work on every CPU).
#include "quant/packed/repack.h"

#include <cstdlib>
#include <initializer_list>
#include <cstring>
#include <strings.h>

#include "quant/formats/blocks.h"
#include "quant/formats/quant_impl.h"

namespace fulcrum {

const char* weight_layout_name(WeightLayout l) {
  switch (l) {
    case WeightLayout::Gguf: return "gguf";
    case WeightLayout::Q4_0x4: return "q4_0x4";
    case WeightLayout::Q5_0x4: return "q5_0x4";
    case WeightLayout::Q8_0x4: return "q8_0x4";
    case WeightLayout::Q4_Kx4: return "q4_kx4";
    case WeightLayout::Q6_Kx4: return "q6_kx4";
    case WeightLayout::Q4_0x16: return "q4_0x16";
    case WeightLayout::Q5_0x16: return "q5_0x16";
    case WeightLayout::Q8_0x16: return "q8_0x16";
  }
  return "?";
}

namespace quant {
namespace {

PackedFormat g_q4_0, g_q5_0, g_q8_0, g_q4_k, g_q6_k;  // layout Gguf until register_packed_formats finds kernels for this CPU

// Whether the comma-separated list names type `t` (case-insensitive).
bool names_type(const char* list, GgmlType t) {
  const char* type = format_info(t)->name;
  for (const char* p = list; *p;) {
    const char* end = std::strchr(p, ',');
    const size_t len = end ? static_cast<size_t>(end - p) : std::strlen(p);
    if (len == std::strlen(type) && strncasecmp(p, type, len) == 0) return true;
    if (!end) break;
    p = end + 1;
  }
  return false;
}

// A format's packed format on this ISA: its layout's geometry plus the kernels.
PackedFormat packed(WeightLayout layout, GgmlType type, void (*arrange_act)(const void*, void*, int64_t),
                    void (*gemv)(int64_t, float*, const uint8_t*, int, const uint8_t*),
                    void (*tile)(int64_t, float*, int64_t, const uint8_t*, const uint8_t*, size_t, int), int tile_cols) {
  const bool k_quant = type == GgmlType::Q4_K || type == GgmlType::Q6_K;
  PackedFormat p;
  p.layout = layout;
  p.type = type;
  p.group_rows = 4;
  // The 32-element formats by chunks of four blocks over arranged activations, the K-quants by
  // super-blocks over the Q8_K rows as they are.
  p.chunk_cols = k_quant ? QK_K : 4 * QK4_0;
  p.act_chunk_bytes = k_quant ? sizeof(block_q8_K) : 256;
  p.arrange_act = arrange_act;
  p.gemv = gemv;
  p.tile = tile;
  p.tile_cols = tile_cols;
  return p;
}

// A 32-element format in piece order (repack.h) reads the broadcast-piece activations
// (arrange_q8_0_bcast_*, two block pairs a chunk).
void use_piece_order(PackedFormat* p) {
  p->act_chunk_bytes = 2 * kQ8BcastPairBytes;
  p->piece_order = true;
}

// A 32-element format in 16-row groups (repack.h) reads its activations block by block
// ("q8_0 sums").
void use_x16(PackedFormat* p) {
  p->group_rows = 16;
  p->chunk_cols = QK8_0;
  p->act_chunk_bytes = kQ8SumsBlockBytes;
}

}  // namespace

void register_packed_formats(const KernelChoice& c) {
  g_q4_0 = g_q5_0 = g_q8_0 = g_q4_k = g_q6_k = PackedFormat{};
  // FULCRUM_NO_REPACK=1 keeps every weight in the GGUF layout (to compare the two);
  // FULCRUM_NO_REPACK=q4_k,q8_0 (type names, any case) only those types.
  const char* no_repack = std::getenv("FULCRUM_NO_REPACK");
  if (no_repack && no_repack[0] == '1') return;
  if (c.isa == Isa::Avx512) {
    // With AMX-INT8, the prefill of these formats runs on AMX tiles that read the GGUF layout
    // (the AVX-512 GEMV alone would not pay for a second copy): leave them unpacked.
    if (c.amx_int8) return;
    // The 32-element formats in 16-row groups, one block a chunk (packed_x16_avx512.cc).
    g_q4_0 = packed(WeightLayout::Q4_0x16, GgmlType::Q4_0, arrange_q8_0_sums8_avx512, gemv_q4_0x16_avx512, tile_q4_0x16_avx512,
                    kPackedTileColsX16Avx512);
    g_q8_0 = packed(WeightLayout::Q8_0x16, GgmlType::Q8_0, arrange_q8_0_sums128_avx512, gemv_q8_0x16_avx512, tile_q8_0x16_avx512,
                    kPackedTileColsX16Avx512);
    g_q5_0 = packed(WeightLayout::Q5_0x16, GgmlType::Q5_0, arrange_q8_0_sums16_avx512, gemv_q5_0x16_avx512, tile_q5_0x16_avx512,
                    kPackedTileColsX16Avx512);
    for (PackedFormat* q : {&g_q4_0, &g_q5_0, &g_q8_0}) use_x16(q);
    g_q4_k = packed(WeightLayout::Q4_Kx4, GgmlType::Q4_K, nullptr, gemv_q4_kx4_avx512, tile_q4_kx4_avx512, kPackedTileColsAvx512);
    g_q6_k = packed(WeightLayout::Q6_Kx4, GgmlType::Q6_K, nullptr, gemv_q6_kx4_avx512, tile_q6_kx4_avx512, kPackedTileColsAvx512);
  } else if (c.isa == Isa::Avx2 || c.isa == Isa::AvxVnni) {
    // The two AVX2-level copies (core/isa.h) have the same kernels under their own names.
#define FULCRUM_PACKED_AVX2(isa)                                                                                                 \
  do {                                                                                                                         \
    g_q4_0 = packed(WeightLayout::Q4_0x4, GgmlType::Q4_0, arrange_q8_0_bcast_##isa, gemv_q4_0x4_pieces_##isa,                   \
                    tile_q4_0x4_pieces_##isa, kPackedTileColsPiecesAvx2);                                                       \
    g_q5_0 = packed(WeightLayout::Q5_0x4, GgmlType::Q5_0, arrange_q8_0_bcast_##isa, gemv_q5_0x4_pieces_##isa,                   \
                    tile_q5_0x4_pieces_##isa, kPackedTileColsPiecesAvx2);                                                       \
    g_q8_0 = packed(WeightLayout::Q8_0x4, GgmlType::Q8_0, arrange_q8_0_bcast_##isa, gemv_q8_0x4_pieces_##isa,                   \
                    tile_q8_0x4_pieces_##isa, kPackedTileColsPiecesAvx2);                                                       \
    g_q4_k = packed(WeightLayout::Q4_Kx4, GgmlType::Q4_K, nullptr, gemv_q4_kx4_##isa, tile_q4_kx4_##isa, kPackedTileColsQ4_kAvx2); \
    g_q6_k = packed(WeightLayout::Q6_Kx4, GgmlType::Q6_K, nullptr, gemv_q6_kx4_##isa, tile_q6_kx4_##isa, kPackedTileColsAvx2);    \
  } while (0)
    if (c.isa == Isa::AvxVnni) FULCRUM_PACKED_AVX2(avxvnni);
    else FULCRUM_PACKED_AVX2(avx2);
#undef FULCRUM_PACKED_AVX2
    for (PackedFormat* q : {&g_q4_0, &g_q5_0, &g_q8_0}) use_piece_order(q);
  }
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

// The K-quant layouts (repack.h): per group of four rows, super-block after super-block, each
// row's block placed by `place(super_block_dst, block, row)`.
template <class Block, class Place>
void repack_super_blocks(uint8_t* data, int64_t rows, int64_t cols, uint8_t* scratch, Place place) {
  const int64_t nsb = cols / QK_K;
  const size_t rb = static_cast<size_t>(nsb) * sizeof(Block);
  for (int64_t g = 0; g < rows / 4; ++g) {
    uint8_t* dst = data + static_cast<size_t>(g) * rb * 4;
    std::memcpy(scratch, dst, rb * 4);
    for (int64_t i = 0; i < nsb; ++i)
      for (int r = 0; r < 4; ++r) place(dst + static_cast<size_t>(i) * 4 * sizeof(Block), reinterpret_cast<const Block*>(scratch + r * rb) + i, r);
  }
}

// q4_kx4: header (scale bytes, d, dmin), then the nibbles by 16-byte pieces.
void place_q4_k(uint8_t* s, const block_q4_K* b, int r) {
  static constexpr size_t kScaleAt[4] = {0, 12, 32, 44};
  std::memcpy(s + kScaleAt[r], b->scales, K_SCALE_SIZE);
  std::memcpy(s + 24 + 2 * r, &b->d, 2);
  std::memcpy(s + 56 + 2 * r, &b->dmin, 2);
  for (int c = 0; c < 4; ++c)
    for (int h = 0; h < 2; ++h) std::memcpy(s + 64 + 128 * c + 64 * h + 16 * r, b->qs + 32 * c + 16 * h, 16);
}

// q6_kx4: the scales, per quarter the ql and qh pieces, then d.
void place_q6_k(uint8_t* s, const block_q6_K* b, int r) {
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

// q4_0x4 / q5_0x4 in piece order (repack.h): per chunk of four blocks, the pairs' scales, Q5_0's
// fifth-bit masks, then 4-byte pieces of the four rows' blocks side by side.
void repack_pieces(GgmlType type, uint8_t* data, int64_t rows, int64_t nb, uint8_t* scratch) {
  const bool q5 = type == GgmlType::Q5_0, q8 = type == GgmlType::Q8_0;
  const size_t bb = q5 ? sizeof(block_q5_0) : q8 ? sizeof(block_q8_0) : sizeof(block_q4_0), rb = static_cast<size_t>(nb) * bb;
  const size_t qs_at = q5 ? 96 : 32;
  for (int64_t g = 0; g < rows / 4; ++g) {
    uint8_t* dst = data + static_cast<size_t>(g) * rb * 4;
    std::memcpy(scratch, dst, rb * 4);
    for (int64_t j = 0; j < nb / 4; ++j) {
      uint8_t* c = dst + static_cast<size_t>(j) * 16 * bb;
      for (int p = 0; p < 2; ++p) {
        uint8_t plane[32] = {};
        for (int h = 0; h < 2; ++h)
          for (int r = 0; r < 4; ++r) {
            const uint8_t* b = scratch + r * rb + static_cast<size_t>(4 * j + 2 * p + h) * bb;
            std::memcpy(c + 2 * (8 * p + 4 * h + r), b, 2);  // d: the formats start with it
            if (q8) {
              const int8_t* qs = reinterpret_cast<const block_q8_0*>(b)->qs;
              for (int m = 0; m < 8; ++m) std::memcpy(c + qs_at + 256 * p + 32 * m + 16 * h + 4 * r, qs + 4 * m, 4);
              continue;
            }
            const uint8_t* qs = q5 ? reinterpret_cast<const block_q5_0*>(b)->qs : reinterpret_cast<const block_q4_0*>(b)->qs;
            for (int m = 0; m < 4; ++m) std::memcpy(c + qs_at + 128 * p + 32 * m + 16 * h + 4 * r, qs + 4 * m, 4);
            if (q5) {
              uint32_t qh;
              std::memcpy(&qh, reinterpret_cast<const block_q5_0*>(b)->qh, 4);
              for (int s = 0; s < 8; ++s)
                for (int b4 = 0; b4 < 4; ++b4) plane[16 * h + 4 * r + b4] |= static_cast<uint8_t>(((qh >> (4 * s + b4)) & 1u) << s);
            }
          }
        if (q5) std::memcpy(c + 32 + 32 * p, plane, sizeof(plane));
      }
    }
  }
}

// q4_0x16 / q5_0x16 / q8_0x16 (repack.h): per group of 16 rows and block, the rows' scales, Q5_0's
// fifth-bit masks, then 4-byte pieces of the rows' quant bytes side by side (Q8_0's with their
// sign bits flipped).
void repack_x16(GgmlType type, uint8_t* data, int64_t rows, int64_t nb, uint8_t* scratch) {
  const bool q8 = type == GgmlType::Q8_0, q5 = type == GgmlType::Q5_0;
  const size_t bb = q8 ? sizeof(block_q8_0) : q5 ? sizeof(block_q5_0) : sizeof(block_q4_0), rb = static_cast<size_t>(nb) * bb;
  const int pieces = q8 ? 8 : 4;
  const size_t qs_in = q5 ? 6 : 2, qs_out = q5 ? 96 : 32;  // Q5_0: d, qh[4], qs
  for (int64_t g = 0; g < rows / 16; ++g) {
    uint8_t* dst = data + static_cast<size_t>(g) * rb * 16;
    std::memcpy(scratch, dst, rb * 16);
    for (int64_t j = 0; j < nb; ++j) {
      uint8_t* c = dst + static_cast<size_t>(j) * 16 * bb;
      uint64_t masks[8] = {};
      for (int r = 0; r < 16; ++r) {
        const uint8_t* b = scratch + r * rb + static_cast<size_t>(j) * bb;
        std::memcpy(c + 2 * r, b, 2);  // d: the formats start with it
        const uint8_t* qs = b + qs_in;
        for (int k = 0; k < pieces; ++k)
          for (int i = 0; i < 4; ++i) c[qs_out + 64 * k + 4 * r + i] = static_cast<uint8_t>(qs[4 * k + i] ^ (q8 ? 0x80 : 0));
        if (q5) {
          uint32_t qh;
          std::memcpy(&qh, b + 2, 4);
          for (int m = 0; m < 8; ++m)
            for (int i = 0; i < 4; ++i) masks[m] |= static_cast<uint64_t>((qh >> (4 * m + i)) & 1u) << (4 * r + i);
        }
      }
      if (q5) std::memcpy(c + 32, masks, sizeof(masks));
    }
  }
}

}  // namespace

void repack_rows(const PackedFormat& pf, uint8_t* data, int64_t rows, int64_t cols, uint8_t* scratch) {
  if (pf.layout == WeightLayout::Q4_Kx4) return repack_super_blocks<block_q4_K>(data, rows, cols, scratch, place_q4_k);
  if (pf.layout == WeightLayout::Q6_Kx4) return repack_super_blocks<block_q6_K>(data, rows, cols, scratch, place_q6_k);
  const int64_t nb = cols / QK4_0;
  if (pf.layout == WeightLayout::Q4_0x16 || pf.layout == WeightLayout::Q5_0x16 || pf.layout == WeightLayout::Q8_0x16) return repack_x16(pf.type, data, rows, nb, scratch);
  return repack_pieces(pf.type, data, rows, nb, scratch);
}

}  // namespace quant
}  // namespace fulcrum
