// Puts the prefill tile kernels (gemm_<fmt>_<isa>.cc) into the type-traits table for the ISA
// core chose (the one choice register_quant_types uses for vec_dot, so a format's tile kernel
// and its vec_dot always come from one ISA). Formats without a tile kernel for that ISA
// keep gemm_tile = nullptr and matmul uses vec_dot for them.
#include "quant/tiles/gemm_tiles.h"
#include "quant/formats/quant_impl.h"

namespace fulcrum {
namespace quant {

void register_gemm_tiles(TypeTraits* table, const KernelChoice& c) {
  struct Tile {
    GgmlType type;
    GemmTileFn fn;
    int rows, cols;
    // The tile's outputs are bit for bit what the format's decode kernel (GEMV, else vec_dot)
    // gives each token alone — measured per kernel (test/parity/step-exactness.test.ts at both
    // ISA levels); where not, speculative verification steps skip the tile (matmul_prepared).
    bool matches_decode = false;
  };
  const Tile avx512[] = {
      {GgmlType::Q8_0, gemm_tile_q8_0_avx512, kTileRowsAvx512, kTileColsAvx512, true},
      // Equal to vec_dot, but decode uses gemv_q4_0_avx512, whose float sums are grouped by block.
      {GgmlType::Q4_0, gemm_tile_q4_0_avx512, kTileRowsAvx512, kTileColsAvx512, false},
      {GgmlType::Q5_0, gemm_tile_q5_0_avx512, kTileRowsAvx512, kTileColsAvx512, true},
      // The K-quants decode with their tiles at one token (gemv_q4_k/q6_k_avx512): same bits.
      {GgmlType::Q4_K, gemm_tile_q4_k_avx512, kTileRowsQ4kAvx512, kTileColsQ4kAvx512, true},
      {GgmlType::Q6_K, gemm_tile_q6_k_avx512, kTileRowsQ6kAvx512, kTileColsQ6kAvx512, true},
  };
  // The two AVX2-level copies (core/isa.h) have the same kernels under their own names.
#define FULCRUM_AVX2_TILES(isa)                                                       \
  {                                                                                   \
    {GgmlType::Q8_0, gemm_tile_q8_0_##isa, kTileRowsQ8Avx2, kTileColsQ8Avx2},         \
    {GgmlType::Q4_0, gemm_tile_q4_0_##isa, kTileRowsAvx2, kTileColsAvx2},             \
    {GgmlType::Q5_0, gemm_tile_q5_0_##isa, kTileRowsAvx2, kTileColsAvx2},             \
    /* Equal to vec_dot, which is what AVX2 decodes the K-quants with. */             \
    {GgmlType::Q4_K, gemm_tile_q4_k_##isa, kTileRowsQ4kAvx2, kTileColsQ4kAvx2, true}, \
    {GgmlType::Q6_K, gemm_tile_q6_k_##isa, kTileRowsQ6kAvx2, kTileColsQ6kAvx2, true}, \
  }
  const Tile avx2[] = FULCRUM_AVX2_TILES(avx2);
  const Tile avxvnni[] = FULCRUM_AVX2_TILES(avxvnni);
#undef FULCRUM_AVX2_TILES
  struct Gemv {
    GgmlType type;
    GemvFn fn;
    int rows;
  };
  const Gemv gemv_avx512[] = {{GgmlType::Q4_0, gemv_q4_0_avx512, kGemvRowsAvx512}, {GgmlType::Q8_0, gemv_q8_0_avx512, kGemvRowsAvx512},
                              {GgmlType::Q4_K, gemv_q4_k_avx512, kGemvRowsK}, {GgmlType::Q6_K, gemv_q6_k_avx512, kGemvRowsK}};
  const Gemv gemv_avx2[] = {{GgmlType::Q4_0, gemv_q4_0_avx2, kGemvRowsAvx2}, {GgmlType::Q8_0, gemv_q8_0_avx2, kGemvRowsAvx2}};
  const Gemv gemv_avxvnni[] = {{GgmlType::Q4_0, gemv_q4_0_avxvnni, kGemvRowsAvx2}, {GgmlType::Q8_0, gemv_q8_0_avxvnni, kGemvRowsAvx2}};
  auto install_gemv = [&](const Gemv* begin, const Gemv* end) {
    for (const Gemv* g = begin; g != end; ++g) {
      TypeTraits& tt = table[static_cast<int>(g->type)];
      if (!tt.supported) continue;
      tt.gemv = g->fn;
      tt.gemv_rows = g->rows;
    }
  };
  auto install = [&](const Tile* begin, const Tile* end) {
    for (const Tile* t = begin; t != end; ++t) {
      TypeTraits& tt = table[static_cast<int>(t->type)];
      if (!tt.supported) continue;
      tt.gemm_tile = t->fn;
      tt.tile_rows = t->rows;
      tt.tile_cols = t->cols;
      tt.tile_matches_decode = t->matches_decode;
    }
  };
  if (c.isa == Isa::Avx512) {
    install(avx512, avx512 + sizeof(avx512) / sizeof(avx512[0]));
    install_gemv(gemv_avx512, gemv_avx512 + sizeof(gemv_avx512) / sizeof(gemv_avx512[0]));
    // AMX-INT8 (only chosen with the full AVX-512 level, so FULCRUM_ISA=avx2 turns it off, and
    // only once the process holds the tile state: core/kernel_select.cc).
    if (c.amx_int8) {
      const Tile amx[] = {
          {GgmlType::Q8_0, gemm_tile_q8_0_amx, kTileRowsAmx, kTileColsAmx},
          {GgmlType::Q4_0, gemm_tile_q4_0_amx, kTileRowsAmx, kTileColsAmx},
          {GgmlType::Q5_0, gemm_tile_q5_0_amx, kTileRowsAmx, kTileColsAmx},
          {GgmlType::Q4_K, gemm_tile_q4_k_amx, kTileRowsAmx, kTileColsAmx},
      };
      install(amx, amx + sizeof(amx) / sizeof(amx[0]));
    }
  }
  else if (c.isa == Isa::AvxVnni) {
    install(avxvnni, avxvnni + sizeof(avxvnni) / sizeof(avxvnni[0]));
    install_gemv(gemv_avxvnni, gemv_avxvnni + sizeof(gemv_avxvnni) / sizeof(gemv_avxvnni[0]));
  }
  else if (c.isa == Isa::Avx2) {
    install(avx2, avx2 + sizeof(avx2) / sizeof(avx2[0]));
    install_gemv(gemv_avx2, gemv_avx2 + sizeof(gemv_avx2) / sizeof(gemv_avx2[0]));
  }
}

}  // namespace quant
}  // namespace fulcrum
