// The packed layouts' registry and the load-time repacking (baseline code: it runs once per
// weight during the load copy, memory-bound, and must work on every CPU).
#include "quant/packed/repack.h"

#include <cstdlib>
#include <type_traits>
#include <initializer_list>
#include <cstring>
#include <strings.h>
#include <utility>

#include "quant/formats/blocks.h"
#include "quant/formats/quant_impl.h"

namespace fulcrum {

const char* weight_layout_name(WeightLayout l) {
  switch (l) {
    case WeightLayout::Gguf: return "gguf";
    case WeightLayout::Q4_Kx16: return "q4_kx16";
    case WeightLayout::Q5_Kx16: return "q5_kx16";
    case WeightLayout::Q4_Kx8: return "q4_kx8";
    case WeightLayout::Q5_Kx8: return "q5_kx8";
    case WeightLayout::Q6_Kx4: return "q6_kx4";
    case WeightLayout::Q4_0x16: return "q4_0x16";
    case WeightLayout::Q5_0x16: return "q5_0x16";
    case WeightLayout::Q8_0x16: return "q8_0x16";
    case WeightLayout::Q4_0x8: return "q4_0x8";
    case WeightLayout::Q5_0x8: return "q5_0x8";
    case WeightLayout::Q8_0x8: return "q8_0x8";
    case WeightLayout::Q5_1x16: return "q5_1x16";
    case WeightLayout::Q5_1x8: return "q5_1x8";
    case WeightLayout::Q4_1x16: return "q4_1x16";
    case WeightLayout::Q4_1x8: return "q4_1x8";
  }
  return "?";
}

namespace quant {
namespace {

PackedFormat g_q4_0, g_q4_1, g_q5_0, g_q5_1, g_q8_0, g_q4_k, g_q5_k, g_q6_k;  // layout Gguf until register_packed_formats finds kernels for this CPU

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
PackedFormat packed(WeightLayout layout, GgmlType type, int group_rows, void (*arrange_act)(const void*, void*, int64_t),
                    void (*gemv)(int64_t, float*, const uint8_t*, int, const uint8_t*),
                    void (*tile)(int64_t, float*, int64_t, const uint8_t*, const uint8_t*, size_t, int), int tile_cols) {
  const bool k_quant = type == GgmlType::Q4_K || type == GgmlType::Q5_K || type == GgmlType::Q6_K;
  PackedFormat p;
  p.layout = layout;
  p.type = type;
  p.group_rows = group_rows;
  // The 32-element formats block by block over their "q8_0 sums" activations, the K-quants by
  // super-blocks over the Q8_K rows as they are.
  p.chunk_cols = k_quant ? QK_K : QK8_0;
  p.act_chunk_bytes = k_quant ? sizeof(block_q8_K) : kQ8SumsBlockBytes;
  p.arrange_act = arrange_act;
  p.gemv = gemv;
  p.tile = tile;
  p.tile_cols = tile_cols;
  return p;
}

}  // namespace

void register_packed_formats(const KernelChoice& c) {
  g_q4_0 = g_q4_1 = g_q5_0 = g_q5_1 = g_q8_0 = g_q4_k = g_q5_k = g_q6_k = PackedFormat{};
  // FULCRUM_NO_REPACK=1 keeps every weight in the GGUF layout (to compare the two);
  // FULCRUM_NO_REPACK=q4_k,q8_0 (type names, any case) only those types.
  const char* no_repack = std::getenv("FULCRUM_NO_REPACK");
  if (no_repack && no_repack[0] == '1') return;
  const bool sw = c.gemv_prefetch;  // the GEMV walks' software prefetch, or none (core/isa.h)
  // A 32-element format's GEMV walk: with software prefetch (`prefetch`), four streams or its own
  // count (KernelChoice::gemv_four_streams); without, the hardware prefetchers alone. (The
  // K-quants keep their own walk: core/isa.h says why.)
#define FULCRUM_GEMV_WALK(name, isa, prefetch) \
  ((prefetch) ? (c.gemv_four_streams ? gemv_##name##_streams4_##isa : gemv_##name##_##isa) : gemv_##name##_hwpf_##isa)
  // A K-quant's (Q4_K, Q5_K): with software prefetch its own one stream, or two
  // (KernelChoice::k_gemv_two_streams); without, the hardware prefetchers alone.
#define FULCRUM_K_GEMV_WALK(name, isa) \
  (sw ? (c.k_gemv_two_streams ? gemv_##name##_streams2_##isa : gemv_##name##_##isa) : gemv_##name##_hwpf_##isa)
  if (c.isa == Isa::Avx512) {
    g_q4_1 = packed(WeightLayout::Q4_1x16, GgmlType::Q4_1, 16, arrange_q8_1_sums_avx2, FULCRUM_GEMV_WALK(q4_1x16, avx512, sw), tile_q4_1x16_avx512,
                    kPackedTileColsX16Avx512);
    g_q5_1 = packed(WeightLayout::Q5_1x16, GgmlType::Q5_1, 16, arrange_q8_1_sums_avx2, FULCRUM_GEMV_WALK(q5_1x16, avx512, sw), tile_q5_1x16_avx512,
                    kPackedTileColsX16Avx512);
    g_q5_k = packed(WeightLayout::Q5_Kx16, GgmlType::Q5_K, 16, nullptr, FULCRUM_K_GEMV_WALK(q5_kx16, avx512), tile_q5_kx16_avx512,
                    kPackedTileColsX16Avx512);
    // The 32-element formats in 16-row groups, one block a chunk (packed_x16_avx512.cc).
    g_q4_0 = packed(WeightLayout::Q4_0x16, GgmlType::Q4_0, 16, arrange_q8_0_sums8_avx2, FULCRUM_GEMV_WALK(q4_0x16, avx512, sw), tile_q4_0x16_avx512,
                    kPackedTileColsX16Avx512);
    g_q8_0 = packed(WeightLayout::Q8_0x16, GgmlType::Q8_0, 16, arrange_q8_0_sums128_avx2, FULCRUM_GEMV_WALK(q8_0x16, avx512, sw), tile_q8_0x16_avx512,
                    kPackedTileColsX16Avx512);
    g_q5_0 = packed(WeightLayout::Q5_0x16, GgmlType::Q5_0, 16, arrange_q8_0_sums16_avx2, FULCRUM_GEMV_WALK(q5_0x16, avx512, c.q5_0_gemv_prefetch), tile_q5_0x16_avx512,
                    kPackedTileColsX16Avx512);
    g_q8_0.quant_xor = 0x80;
    g_q4_k = packed(WeightLayout::Q4_Kx16, GgmlType::Q4_K, 16, nullptr, FULCRUM_K_GEMV_WALK(q4_kx16, avx512), tile_q4_kx16_avx512,
                    kPackedTileColsX16Avx512);
    g_q6_k = packed(WeightLayout::Q6_Kx4, GgmlType::Q6_K, 4, nullptr, q6_k_gemv_two_streams(c, true) ? gemv_q6_kx4_streams2_avx512
                                                                    : c.q6_k_gemv_prefetch_bytes > 0 && c.q6_k_gemv_prefetch_l1 ? gemv_q6_kx4_l1_avx512
                                                                    : c.q6_k_gemv_prefetch_bytes >= 3072 ? gemv_q6_kx4_ahead3k_avx512
                                                                    : c.q6_k_gemv_prefetch_bytes > 0 ? gemv_q6_kx4_avx512 : gemv_q6_kx4_hwpf_avx512,
                    tile_q6_kx4_avx512, kPackedTileColsQ6_kAvx512);
    // With AMX-INT8 the 16-row groups' prefill runs on AMX tiles over the same layouts
    // (packed_x16_amx_avx512.cc, packed_k16_amx_avx512.cc), with the same bits; the decode GEMVs
    // stay. (Q6_K's 4-row groups have no AMX tile.) Calls of fewer than kAmxMinTokens tokens (a
    // speculative step's drafts, a few decoding sequences) keep the register tiles: 2-vCPU Intel
    // Xeon (AMX), bench.matmul from DRAM (256 MiB ring), 2 threads, AMX / register tiles, µs:
    //   Q4_0 4864 x 896   2 tokens 212 / 129, 4 220 / 162, 8 248 / 193, 12 261 / 228, 16 289 / 283, 24 335 / 434
    //   Q5_0 4864 x 896   2 249 / 151, 4 236 / 159, 8 319 / 199, 12 276 / 284, 16 291 / 299, 24 396 / 450
    //   Q8_0 4864 x 896   4 216 / 210, 8 236 / 241, 12 263 / 305, 16 322 / 337, 32 445 / 583
    //   Q4_K 4864 x 1024  4 224 / 149, 8 253 / 211, 12 293 / 295, 16 391 / 358, 32 672 / 659
    // (1 thread, Q4_0 2 tokens: 367 / 199, the one-token GEMV 143.)
    constexpr int kAmxMinTokens = 16;
    if (c.amx_int8) {
      for (auto [pf, tile] : {std::pair{&g_q4_0, tile_q4_0x16_amx}, std::pair{&g_q4_1, tile_q4_1x16_amx}, std::pair{&g_q5_0, tile_q5_0x16_amx},
                              std::pair{&g_q5_1, tile_q5_1x16_amx}, std::pair{&g_q8_0, tile_q8_0x16_amx}, std::pair{&g_q4_k, tile_q4_kx16_amx},
                              std::pair{&g_q5_k, tile_q5_kx16_amx}}) {
        pf->few_tile = pf->tile;
        pf->few_tile_cols = pf->tile_cols;
        pf->few_tokens = kAmxMinTokens;
        pf->few_claim_bytes = pf->claim_bytes;
        pf->tile = tile;
        pf->tile_cols = kPackedTileColsX16Amx;
        pf->claim_bytes = 256 << 10;
      }
    }
  } else if (c.isa == Isa::Avx2 || c.isa == Isa::AvxVnni) {
    // The two AVX2-level copies (core/isa.h) have the same kernels under their own names.
#define FULCRUM_PACKED_AVX2(isa)                                                                                                 \
  do {                                                                                                                         \
    g_q4_0 = packed(WeightLayout::Q4_0x8, GgmlType::Q4_0, 8, arrange_q8_0_sums8_##isa, FULCRUM_GEMV_WALK(q4_0x8, isa, sw), tile_q4_0x8_##isa,        \
                    kPackedTileColsX8Avx2);                                                                                     \
    g_q5_0 = packed(WeightLayout::Q5_0x8, GgmlType::Q5_0, 8, arrange_q8_0_sums16_##isa, FULCRUM_GEMV_WALK(q5_0x8, isa, c.q5_0_gemv_prefetch), tile_q5_0x8_##isa,       \
                    kPackedTileColsX8Avx2);                                                                                     \
    g_q4_1 = packed(WeightLayout::Q4_1x8, GgmlType::Q4_1, 8, arrange_q8_1_sums_##isa, FULCRUM_GEMV_WALK(q4_1x8, isa, sw), tile_q4_1x8_##isa,        \
                    kPackedTileColsX8Avx2);                                                                                     \
    g_q5_1 = packed(WeightLayout::Q5_1x8, GgmlType::Q5_1, 8, arrange_q8_1_sums_##isa, FULCRUM_GEMV_WALK(q5_1x8, isa, sw), tile_q5_1x8_##isa,        \
                    kPackedTileColsX8Avx2);                                                                                     \
    g_q8_0 = packed(WeightLayout::Q8_0x8, GgmlType::Q8_0, 8, arrange_q8_0_sums128_##isa, FULCRUM_GEMV_WALK(q8_0x8, isa, sw), tile_q8_0x8_##isa,     \
                    kPackedTileColsX8Avx2);                                                                                     \
    g_q4_k = packed(WeightLayout::Q4_Kx8, GgmlType::Q4_K, 8, nullptr, FULCRUM_K_GEMV_WALK(q4_kx8, isa), tile_q4_kx8_##isa, \
                    kPackedTileColsQ4_kx8Avx2);                                                                                   \
    g_q5_k = packed(WeightLayout::Q5_Kx8, GgmlType::Q5_K, 8, nullptr, FULCRUM_K_GEMV_WALK(q5_kx8, isa), tile_q5_kx8_##isa, \
                    kPackedTileColsQ5_kx8Avx2);                                                                                   \
    g_q6_k = packed(WeightLayout::Q6_Kx4, GgmlType::Q6_K, 4, nullptr, q6_k_gemv_two_streams(c, false) ? gemv_q6_kx4_streams2_##isa : c.q6_k_avx2_gemv_prefetch ? gemv_q6_kx4_##isa : gemv_q6_kx4_hwpf_##isa, tile_q6_kx4_##isa, \
                    kPackedTileColsQ6_kAvx2);                                                                                       \
  } while (0)
    if (c.isa == Isa::AvxVnni) FULCRUM_PACKED_AVX2(avxvnni);
    else FULCRUM_PACKED_AVX2(avx2);
#undef FULCRUM_PACKED_AVX2
#undef FULCRUM_GEMV_WALK
#undef FULCRUM_K_GEMV_WALK
    // vpdpbusd's unsigned operand where the CPU has AVX-VNNI (packed_x8_avx2.cc).
    if (c.isa == Isa::AvxVnni) g_q8_0.quant_xor = 0x80;
  }
  if (no_repack) {
    for (PackedFormat* q : {&g_q4_0, &g_q4_1, &g_q5_0, &g_q5_1, &g_q8_0, &g_q4_k, &g_q5_k, &g_q6_k})
      if (q->gemv && names_type(no_repack, q->type)) *q = PackedFormat{};
  }
}

const PackedFormat* packed_format(GgmlType t) {
  (void)type_traits(t);  // the table's one-time registration chooses the packed kernels too
  if (t == GgmlType::Q4_0 && g_q4_0.gemv) return &g_q4_0;
  if (t == GgmlType::Q5_0 && g_q5_0.gemv) return &g_q5_0;
  if (t == GgmlType::Q4_1 && g_q4_1.gemv) return &g_q4_1;
  if (t == GgmlType::Q5_1 && g_q5_1.gemv) return &g_q5_1;
  if (t == GgmlType::Q8_0 && g_q8_0.gemv) return &g_q8_0;
  if (t == GgmlType::Q4_K && g_q4_k.gemv) return &g_q4_k;
  if (t == GgmlType::Q5_K && g_q5_k.gemv) return &g_q5_k;
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

// q4_kx16 / q4_kx8 (repack.h): per super-block of G rows their d, their dmin, the three planes of
// their scale words, then per chunk of 64 elements eight vectors of 4-byte pieces of their nibbles.
// q5_kx16 / q5_kx8: the same with the rows' qh in eight vectors of 4-byte pieces between the
// planes and the nibbles.
template <class Block>
void repack_k_rows(int G, uint8_t* data, int64_t rows, int64_t cols, uint8_t* scratch) {
  using namespace k_rows;
  constexpr bool kFifthBit = std::is_same_v<Block, block_q5_K>;
  const size_t g4 = 4 * static_cast<size_t>(G);  // bytes of one vector (a plane, a qh or nibble vector)
  const size_t qs = qs_at(G, kFifthBit);
  const int64_t nsb = cols / QK_K;
  const size_t rb = static_cast<size_t>(nsb) * sizeof(Block);
  for (int64_t g = 0; g < rows / G; ++g) {
    uint8_t* dst = data + static_cast<size_t>(g) * rb * G;
    std::memcpy(scratch, dst, rb * G);
    for (int64_t i = 0; i < nsb; ++i) {
      uint8_t* s = dst + static_cast<size_t>(i) * G * sizeof(Block);
      for (int r = 0; r < G; ++r) {
        const Block* b = reinterpret_cast<const Block*>(scratch + r * rb) + i;
        std::memcpy(s + d_at(G) + 2 * r, &b->d, 2);
        std::memcpy(s + dmin_at(G) + 2 * r, &b->dmin, 2);
        for (int w = 0; w < 3; ++w) std::memcpy(s + scale_words_at(G) + g4 * w + 4 * r, b->scales + 4 * w, 4);
        if constexpr (kFifthBit)
          for (int k = 0; k < 8; ++k) std::memcpy(s + qh_at(G) + g4 * k + 4 * r, b->qh + 4 * k, 4);
        for (int c = 0; c < 4; ++c)
          for (int k = 0; k < 8; ++k) std::memcpy(s + qs + 8 * g4 * c + g4 * k + 4 * r, b->qs + 32 * c + 4 * k, 4);
      }
    }
  }
}

// q6_kx4: the scales, per quarter the ql and qh pieces, then d.
void place_q6_k(uint8_t* s, const block_q6_K* b, int r) {
  std::memcpy(s + 16 * r, b->scales, QK_K / 16);
  std::memcpy(s + 832 + 2 * r, &b->d, 2);
  for (int q = 0; q < 4; ++q) {
    const int hf = q / 2, p = q % 2;
    uint8_t* piece = s + 64 + 192 * q + 16 * r;
    for (int i = 0; i < 16; ++i) {
      // The quarter's four 6-bit quants of element i (vec_dot_q6_K's q1..q4, k = 0..3).
      const unsigned a = b->ql[64 * hf + 16 * p + i], c = b->ql[64 * hf + 32 + 16 * p + i], h = b->qh[32 * hf + 16 * p + i];
      const unsigned v0 = (a & 0x0Fu) | (h & 3u) << 4, v1 = (c & 0x0Fu) | ((h >> 2) & 3u) << 4;
      const unsigned v2 = (a >> 4) | ((h >> 4) & 3u) << 4, v3 = (c >> 4) | ((h >> 6) & 3u) << 4;
      piece[i] = static_cast<uint8_t>(v0 | (v3 & 3u) << 6);
      piece[64 + i] = static_cast<uint8_t>(v1 | ((v3 >> 2) & 3u) << 6);
      piece[128 + i] = static_cast<uint8_t>(v2 | (v3 >> 4) << 6);
    }
  }
}

// The row-group layouts (repack.h: q4_0x16 / q4_1x16 / q5_0x16 / q5_1x16 / q8_0x16 and their x8
// forms): per group of G rows and block, the rows' scales (Q4_1, Q5_1: then their m), the fifth bits
// (Q5_0, Q5_1; G = 16: eight 64-bit masks; G = 8: a 32-byte plane of top bits), then 4-byte pieces
// of the rows' quant bytes side by side (XORed with PackedFormat::quant_xor: Q8_0's sign bits
// flipped for vpdpbusd; G = 8's five-bit formats re-split: repack.h).
void repack_row_groups(GgmlType type, int G, uint8_t quant_xor, uint8_t* data, int64_t rows, int64_t nb, uint8_t* scratch) {
  const bool q8 = type == GgmlType::Q8_0, q51 = type == GgmlType::Q5_1, q5 = type == GgmlType::Q5_0 || q51;
  const bool with_m = q51 || type == GgmlType::Q4_1;  // d, m, then the rest
  const size_t bb = format_info(type)->type_size, rb = static_cast<size_t>(nb) * bb;
  const int pieces = q8 ? 8 : 4;
  const size_t scales = (with_m ? 4 : 2) * static_cast<size_t>(G), qh_bytes = q5 ? 4 * static_cast<size_t>(G) : 0;
  const size_t qh_in = with_m ? 4 : 2;  // Q5_0: d, qh[4], qs; Q5_1: d, m, qh[4], qs; Q4_1: d, m, qs
  const size_t qs_in = q5 ? qh_in + 4 : qh_in, qs_out = scales + qh_bytes;
  const size_t piece_stride = 4 * static_cast<size_t>(G);
  for (int64_t g = 0; g < rows / G; ++g) {
    uint8_t* dst = data + static_cast<size_t>(g) * rb * G;
    std::memcpy(scratch, dst, rb * G);
    for (int64_t j = 0; j < nb; ++j) {
      uint8_t* c = dst + static_cast<size_t>(j) * G * bb;
      std::memset(c + scales, 0, qh_bytes);
      for (int r = 0; r < G; ++r) {
        const uint8_t* b = scratch + r * rb + static_cast<size_t>(j) * bb;
        std::memcpy(c + 2 * r, b, 2);  // d: the formats start with it
        if (with_m) std::memcpy(c + 2 * static_cast<size_t>(G) + 2 * r, b + 2, 2);  // m
        const uint8_t* qs = b + qs_in;
        uint32_t qh = 0;
        if (q5) std::memcpy(&qh, b + qh_in, 4);
        if (q5 && G == 8) {
          // The five-bit x8 form: vector k's byte 4r + i is quant v_k (bits 0-4) and the low three
          // bits of v_(k+4) (bits 5-7); the plane's byte 4r + i holds v_(k+4)'s top two bits at
          // bits 2k, 2k + 1 (v_m: row r's quant 4m + i, five bits).
          for (int i = 0; i < 4; ++i) {
            uint8_t top = 0;
            for (int k = 0; k < 4; ++k) {
              const unsigned lo = (qs[4 * k + i] & 0x0Fu) | (((qh >> (4 * k + i)) & 1u) << 4);
              const unsigned hi = (qs[4 * k + i] >> 4) | (((qh >> (16 + 4 * k + i)) & 1u) << 4);
              c[qs_out + piece_stride * k + 4 * r + i] = static_cast<uint8_t>(lo | (hi & 7u) << 5);
              top = static_cast<uint8_t>(top | (hi >> 3) << (2 * k));
            }
            c[scales + 4 * r + i] = top;
          }
          continue;
        }
        for (int k = 0; k < pieces; ++k)
          for (int i = 0; i < 4; ++i) c[qs_out + piece_stride * k + 4 * r + i] = static_cast<uint8_t>(qs[4 * k + i] ^ quant_xor);
        if (!q5) continue;
        for (int m = 0; m < 8; ++m)
          for (int i = 0; i < 4; ++i) {
            const unsigned bit = (qh >> (4 * m + i)) & 1u;
            c[scales + 8 * m + (4 * r + i) / 8] |= static_cast<uint8_t>(bit << ((4 * r + i) % 8));  // mask m, bit 4r + i
          }
      }
    }
  }
}

}  // namespace

void repack_rows(const PackedFormat& pf, uint8_t* data, int64_t rows, int64_t cols, uint8_t* scratch) {
  if (pf.layout == WeightLayout::Q4_Kx16 || pf.layout == WeightLayout::Q4_Kx8) return repack_k_rows<block_q4_K>(pf.group_rows, data, rows, cols, scratch);
  if (pf.layout == WeightLayout::Q5_Kx16 || pf.layout == WeightLayout::Q5_Kx8) return repack_k_rows<block_q5_K>(pf.group_rows, data, rows, cols, scratch);
  if (pf.layout == WeightLayout::Q6_Kx4) return repack_super_blocks<block_q6_K>(data, rows, cols, scratch, place_q6_k);
  const int64_t nb = cols / QK4_0;
  repack_row_groups(pf.type, pf.group_rows, pf.quant_xor, data, rows, nb, scratch);
}

}  // namespace quant
}  // namespace fulcrum
