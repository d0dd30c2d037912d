// AMX tile configuration shared by the AMX prefill tiles (gemm_amx_avx512.cc,
// gemm_q4_k_amx_avx512.cc). Include only after `#pragma GCC target("amx-tile,...")`; everything
// here has internal linkage (ODR rule: no shared inline ISA code).
#pragma once
#include <immintrin.h>

#include <cstdint>

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

// Loads `cfg` for the scope of one kernel call and then puts back what the thread had: other
// AMX users on this thread (llama.cpp's ggml configures its tiles once per thread, and node's
// worker threads run both) must find their configuration as they left it.
class TileConfigScope {
 public:
  explicit TileConfigScope(const TileConfig& cfg) {
    _tile_storeconfig(&saved_);
    _tile_loadconfig(&cfg);
  }
  ~TileConfigScope() {
    if (saved_.palette != 0) _tile_loadconfig(&saved_);
    else _tile_release();
  }
  TileConfigScope(const TileConfigScope&) = delete;
  TileConfigScope& operator=(const TileConfigScope&) = delete;

 private:
  TileConfig saved_;
};

}  // namespace
}  // namespace quant
}  // namespace fulcrum
