// AMX tile configuration shared by the AMX prefill tiles (gemm_amx_avx512.cc,
// gemm_q4_k_amx_avx512.cc). Include only after `#pragma GCC target("amx-tile,...")`; everything
// here has internal linkage (ODR rule: no shared inline ISA code).
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace fulcrum {
namespace quant {
namespace {

// The 64-byte LDTILECFG operand (palette 1): bytes per row and rows of each of the 8 tiles.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// The row groups' AMX prefill tiles (packed/packed_x16_amx_avx512.cc, packed_k16_amx_avx512.cc),
// one 16-row group × up to 32 tokens, 32 elements (a block, or a K-quant's sub-block) a step:
// tmm0 / tmm1 the sums of tokens 0..15 / 16..31 (a row a token, 16 int32 = the group's rows);
// tmm2 / tmm3 those tokens' 32 quants (a row a token); tmm4 the group's 32 quants (8 rows of the
// 16 rows' 4-byte groups, AMX's B layout).
constexpr int kRowGroupHalf = 16;  // tokens of one A / C tile
inline TileConfig row_group_tiles(int cols) {
  TileConfig cfg;
  const int lo = cols < kRowGroupHalf ? cols : kRowGroupHalf, hi = cols - lo;
  cfg.rows[0] = cfg.rows[2] = static_cast<uint8_t>(lo);
  cfg.colsb[0] = 64;
  cfg.colsb[2] = 32;
  if (hi > 0) {
    cfg.rows[1] = cfg.rows[3] = static_cast<uint8_t>(hi);
    cfg.colsb[1] = 64;
    cfg.colsb[3] = 32;
  }
  cfg.rows[4] = 32 / 4;
  cfg.colsb[4] = 64;
  return cfg;
}

// Makes `cfg` the thread's tile configuration for the scope of one kernel call, and leaves the
// thread as another AMX user needs it: llama.cpp's ggml configures its tiles once per thread and
// never again, and node's worker threads may run both, so a configuration someone else left is
// put back on exit. A thread that already holds `cfg` (this kernel's previous call on it) or
// held none keeps `cfg` loaded: nothing depends on an unconfigured thread, and LDTILECFG (which
// also zeroes the tiles) costs too much to pay per call. 2-vCPU Intel Xeon with AMX, bench.matmul
// Q8_0 896 x 896 × 512 tokens, 1 thread, q8_0x16's AMX tiles (32 tokens × 16 rows a call): a
// load and a restore per call 2078-2309 µs, one load per thread 1857-1903.
class TileConfigScope {
 public:
  explicit TileConfigScope(const TileConfig& cfg) {
    _tile_storeconfig(&saved_);
    if (std::memcmp(&saved_, &cfg, sizeof cfg) == 0) {
      restore_ = false;
      return;
    }
    restore_ = saved_.palette != 0;
    _tile_loadconfig(&cfg);
  }
  ~TileConfigScope() {
    if (restore_) _tile_loadconfig(&saved_);
  }
  TileConfigScope(const TileConfigScope&) = delete;
  TileConfigScope& operator=(const TileConfigScope&) = delete;

 private:
  TileConfig saved_;
  bool restore_ = false;
};

}  // namespace
}  // namespace quant
}  // namespace fulcrum
