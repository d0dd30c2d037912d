// Weights repacked at load into the layout the CPU kernels read best (issue 15). GGUF stores a
// weight matrix row after row, block after block; the decode GEMV and the prefill tiles read
// several rows at once, and in that layout each row's blocks and each block's scale sit in
// different cache lines, so a kernel spends more instructions gathering bytes (four 16-byte
// inserts and four 2-byte scale loads per row and four blocks for Q4_0) than multiplying them.
//
// Q4_K on AVX-512 ("q4_kx16", 2304 bytes per super-block of 256 columns, sixteen rows' blocks'
// bytes; packed_k16_avx512.cc says why), on AVX2 "q4_kx8" (1152 bytes, eight rows; packed_k8_avx2.cc),
// G rows a group (k_rows below has the offsets):
//   [0, 2·G) [2·G, 4·G)       the G rows' d, then their dmin (f16), row r at index r
//   [4·G + 4·G·w + 4·r, +4)   row r's scale bytes [4·w, 4·w + 4) (w = 0..2: three planes of words)
//   [16·G + 32·G·c + 4·G·k + 4·r, +4)  row r's qs[32·c + 4·k, +4) (c chunk of 64 elements, k = 0..7)
// so a vector's 32-bit lane is a row: four nibble bytes of each row per 4·G-byte load (low nibbles
// elements 64·c + 4·k.., high ones 64·c + 32 + 4·k..), and one load per plane gives a scale word
// of all G rows. Q5_K is "q5_kx16" / "q5_kx8" (2816 / 1408 bytes per super-block): the same header,
// then [16·G + 4·G·k + 4·r, +4) row r's qh[4·k, +4) (k = 0..7), then the nibble vectors at 48·G.
// Their activations are Q8_K rows as they are.
// Q6_K ("q6_kx4", 840 bytes per super-block of 256 columns):
//   [0, 64)            row r's 16 int8 scales at 16·r
//   [64 + 192·q + 64·k + 16·r, +16)  quarter q = 2·hf + p (hf the 128-element half, p 0/1):
//                      with v_k' (k' = 0..3) row r's 6-bit quant of element 128·hf + 16·p +
//                      32·k' + i, byte i of piece k (k = 0..2) is v_k | (two bits of v_3) << 6:
//                      v_3's bits 0-1 in piece 0, 2-3 in piece 1, 4-5 in piece 2
//   [832, 840)         the four rows' d (f16)
// so three 64-byte loads hold four sub-blocks of 16 elements for all four rows, with Q8_K
// activations as they are: three quants are one AND each, the fourth three shifts and a merge
// (the GGUF's ql/qh split took a shift or two and an AND, OR or vpternlogd per quant).
//
// The GEMV and the tile kernel of one ISA compute every (row, token) output with the same
// integer lane sums, the same float products and fmas in the same order and the same final
// reduction, so a token's output is bit for bit the same alone (decode) or in a prefill or
// verification batch: what exact speculation needs, without giving up the tiles.
//
// Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 in groups of G rows, block after block: 16 rows on AVX-512
// ("q4_0x16" / "q4_1x16" / "q5_0x16" / "q5_1x16" / "q8_0x16", packed_x16_avx512.cc), 8 on AVX2
// ("q4_0x8" / ... / "q8_0x8", packed_x8_avx2.cc); those files say why. Per block of the group,
// exactly those G blocks' bytes (G · 18 / 20 / 22 / 24 / 34), so a repacked matrix is as large as the GGUF one and a group of rows starts
// where its first row started:
//   [0, 2·G)            the G rows' f16 scales, row r at index r
//   Q4_0: at 2·G, four vectors of 4·G bytes, k = 0..3: byte 4·r + b of vector k is byte 4·k + b
//         of row r's block (low nibble quant 4k+b, high nibble quant 16+4k+b)
//   Q5_0: at 2·G the fifth bits, 4·G bytes — G = 16: eight 64-bit masks, bit 4·r + b of mask m
//         the fifth bit of row r's quant 4·m + b (one masked add each), then the nibbles as
//         Q4_0's; G = 8: the five bits re-split so the low half's quants need one AND and the
//         high half's five operations (packed_x8_avx2.cc): with v_m row r's quant 4·m + b, byte
//         4·r + b of the plane holds v_(k+4)'s top two bits at bits 2k, 2k + 1 (k = 0..3), then
//         four vectors whose byte 4·r + b of vector k is v_k | (v_(k+4) & 7) << 5
//   Q5_1: at 2·G the rows' m (f16), then at 4·G Q5_0's fifth bits and nibbles (G · 24 bytes)
//   Q4_1: at 2·G the rows' m (f16), then at 4·G Q4_0's nibbles (G · 20 bytes)
//   Q8_0: at 2·G, eight vectors of 4·G bytes, m = 0..7: byte 4·r + b of vector m is quant
//         4·m + b of row r's block, XORed with PackedFormat::quant_xor (0x80 where the kernels
//         use vpdpbusd, which multiplies unsigned bytes: the sign bit flipped is the quant + 128)
// so a vector's 32-bit lanes are the group's rows. Their activations ("q8_0 sums", 40 bytes per
// block): the block's 32 quants, its scale as a float, then −o·Σy as an int32 (o = 8 for Q4_0,
// 16 for Q5_0, 128 for Q8_0 stored + 128: the quants' offset; plain AVX2's signed Q8_0 ignores it);
// Q5_1's and Q4_1's ("q8_1 sums", from their Q8_1 rows) hold s = dy·Σy as a float there instead,
// the term their rows' m multiply (vec_dot_q5_1's and vec_dot_q4_1's).
// Repacked bytes never leave the process, whose ISA is fixed, so the order is the kernels' business.
//
// Devices (Vulkan uploads, the loopback's row ranges) keep reading the GGUF bytes: Weight::data
// stays the file's layout and only the CPU reads the repacked copy (model.h).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/isa.h"
#include "ggml_types.h"

namespace fulcrum {

enum class WeightLayout : uint8_t {
  Gguf = 0,
  Q6_Kx4 = 5,
  Q4_0x16 = 6,
  Q5_0x16 = 7,
  Q8_0x16 = 8,
  Q4_0x8 = 9,
  Q5_0x8 = 10,
  Q8_0x8 = 11,
  Q5_1x16 = 13,
  Q5_1x8 = 14,
  Q4_Kx16 = 15,
  Q5_Kx16 = 16,
  Q4_Kx8 = 17,
  Q5_Kx8 = 18,
  Q4_1x16 = 19,
  Q4_1x8 = 20,
};
const char* weight_layout_name(WeightLayout l);

namespace quant {

// q4_kx16 / q5_kx16 (G = 16) and q4_kx8 / q5_kx8 (G = 8) byte offsets within a super-block of G
// rows (the layouts above), for the repacking and the kernels (packed_k16_avx512.cc,
// packed_k8_avx2.cc): the rows' d, their dmin, three planes of scale words (plane w at
// scale_words_at + 4·G·w), the fifth-bit vectors (Q5_K), then per chunk c of 64 elements eight
// nibble vectors of 4·G bytes (vector k at qs_at + 32·G·c + 4·G·k).
namespace k_rows {
constexpr size_t d_at(int) { return 0; }
constexpr size_t dmin_at(int g) { return 2 * static_cast<size_t>(g); }
constexpr size_t scale_words_at(int g) { return 4 * static_cast<size_t>(g); }
constexpr size_t qh_at(int g) { return 16 * static_cast<size_t>(g); }
constexpr size_t qs_at(int g, bool fifth_bit) { return (fifth_bit ? 48 : 16) * static_cast<size_t>(g); }
}  // namespace k_rows

// The CPU kernels of one repacked layout on the ISA this process runs.
struct PackedFormat {
  WeightLayout layout = WeightLayout::Gguf;
  GgmlType type = GgmlType::F32;
  int group_rows = 0;          // rows interleaved together (a matrix's rows must be a multiple)
  int64_t chunk_cols = 0;      // columns per chunk (a matrix's columns must be a multiple)
  size_t act_chunk_bytes = 0;  // arranged activation bytes per chunk per token
  // One token's activation row (n columns) -> its arranged row (n / chunk_cols · act_chunk_bytes);
  // nullptr: the kernels read the converted rows as they are (act_chunk_bytes is their size).
  void (*arrange_act)(const void* q8, void* dst, int64_t n) = nullptr;
  // out[g·group_rows + r] for `groups` consecutive row groups starting at w, one token.
  void (*gemv)(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act) = nullptr;
  // out[c·out_stride + r] for one row group × `cols` (1..tile_cols) tokens act + c·act_stride.
  void (*tile)(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols) = nullptr;
  int tile_cols = 0;
  // Calls of fewer than few_tokens tokens run few_tile (few_tile_cols tokens a call) instead of
  // tile; 0: tile for every count. The AMX tiles' set-up (tile loads and stores, a float step of
  // all 16 token rows per block) is the same for 2 tokens as for 16, so below that the register
  // tiles they displaced are faster (repack.cc has the measurement); both give the same bits.
  void (*few_tile)(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols) = nullptr;
  int few_tile_cols = 0;
  int few_tokens = 0;
  size_t few_claim_bytes = 0;  // claim_bytes for few_tile
  // Prefill (more tokens than one token block): weight bytes per claim of row groups, which every
  // token block's tiles read in turn (kernels/matmul.cc). 32 KiB keeps them in L1 for the
  // register tiles; the AMX tiles take 256 KiB from L2, so that a token block's activations,
  // which every group's tile loads again, come from L1 for more groups. 2-vCPU Intel Xeon (AMX),
  // bench.matmul 512 tokens, 1 / 2 threads, 32 -> 256 KiB: Q8_0 4864 x 896 296-303 -> 467-468 /
  // 531-537 -> 831-843 GFLOP/s, Q4_K 4864 x 1024 275-295 -> 346-357 / 529-536 -> 629-650, Q4_K
  // 1024 x 4864 284-290 -> 323-342 / 461-554 -> 602-616 (512 KiB level with 256).
  size_t claim_bytes = 32 << 10;
  // The row-group layouts' Q8_0: the byte each quant is XORed with when repacked (0x80: stored
  // + 128, unsigned for vpdpbusd; 0: as stored, signed).
  uint8_t quant_xor = 0;
};

// register_packed_formats (declared in core/isa.h, called by select_kernels) chooses the packed
// kernels for the ISA `c` runs.
// The packed format `t` gets on this CPU, or nullptr (kept in the GGUF layout).
const PackedFormat* packed_format(GgmlType t);
// Whether a rows × cols matrix of `t` is repacked (its format has a packed layout here and the
// shape is a whole number of groups and chunks).
bool packs(GgmlType t, int64_t rows, int64_t cols);
// Rewrites `bytes` GGUF-layout bytes of whole row groups (rows × cols of `t`) in place into the
// packed layout; `scratch` holds one group (group_rows rows). Load time only.
void repack_rows(const PackedFormat& pf, uint8_t* data, int64_t rows, int64_t cols, uint8_t* scratch);

// The kernels (packed_<isa>.cc).
void gemv_q4_kx16_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void gemv_q4_kx16_hwpf_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void gemv_q4_kx16_streams2_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void tile_q4_kx16_avx512(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols);
void gemv_q5_kx16_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void gemv_q5_kx16_hwpf_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void gemv_q5_kx16_streams2_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void tile_q5_kx16_avx512(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols);
void gemv_q6_kx4_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void gemv_q6_kx4_ahead3k_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void gemv_q6_kx4_l1_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void gemv_q6_kx4_streams2_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void gemv_q6_kx4_hwpf_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void tile_q6_kx4_avx512(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols);
// The AVX2 kernels, once per AVX2-level copy (core/isa.h: avx2, and avxvnni built with AVX-VNNI).
#define FULCRUM_PACKED_AVX2_DECL(isa)                                                                                      \
  void gemv_q4_kx8_##isa(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);                        \
  void gemv_q4_kx8_hwpf_##isa(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);                   \
  void gemv_q4_kx8_streams2_##isa(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);               \
  void tile_q4_kx8_##isa(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, \
                         int cols);                                                                                       \
  void gemv_q5_kx8_##isa(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);                        \
  void gemv_q5_kx8_hwpf_##isa(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);                   \
  void gemv_q5_kx8_streams2_##isa(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);               \
  void tile_q5_kx8_##isa(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, \
                         int cols);                                                                                       \
  void gemv_q6_kx4_##isa(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);                        \
  void gemv_q6_kx4_streams2_##isa(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);               \
  void gemv_q6_kx4_hwpf_##isa(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);                   \
  void tile_q6_kx4_##isa(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, \
                         int cols);                                                                                       \
  void arrange_q8_0_sums8_##isa(const void* q8, void* dst, int64_t n);                                                    \
  void arrange_q8_0_sums16_##isa(const void* q8, void* dst, int64_t n);                                                   \
  void arrange_q8_0_sums128_##isa(const void* q8, void* dst, int64_t n);                                                  \
  void arrange_q8_1_sums_##isa(const void* q8, void* dst, int64_t n);                                                     \
  void gemv_q4_1x8_##isa(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);                        \
  void gemv_q4_1x8_streams4_##isa(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);              \
  void gemv_q4_1x8_hwpf_##isa(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);                   \
  void tile_q4_1x8_##isa(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, \
                         int cols);                                                                                       \
  void gemv_q5_1x8_##isa(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);                        \
  void gemv_q5_1x8_streams4_##isa(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);              \
  void gemv_q5_1x8_hwpf_##isa(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);                   \
  void tile_q5_1x8_##isa(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, \
                         int cols);                                                                                       \
  void gemv_q4_0x8_##isa(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);                        \
  void gemv_q4_0x8_streams4_##isa(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);              \
  void gemv_q4_0x8_hwpf_##isa(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);                   \
  void tile_q4_0x8_##isa(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, \
                         int cols);                                                                                       \
  void gemv_q5_0x8_##isa(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);                        \
  void gemv_q5_0x8_streams4_##isa(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);              \
  void gemv_q5_0x8_hwpf_##isa(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);                   \
  void gemv_q8_0x8_##isa(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);                        \
  void gemv_q8_0x8_streams4_##isa(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);              \
  void gemv_q8_0x8_hwpf_##isa(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);                   \
  void tile_q8_0x8_##isa(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, \
                         int cols);                                                                                       \
  void tile_q5_0x8_##isa(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, \
                         int cols);
FULCRUM_PACKED_AVX2_DECL(avx2)
FULCRUM_PACKED_AVX2_DECL(avxvnni)
#undef FULCRUM_PACKED_AVX2_DECL
// The gemv_*_hwpf variants (every packed format's GEMV has one) are the same walk without
// software prefetch (KernelChoice::gemv_prefetch says which one a CPU runs; for the AVX-512 Q6_K
// GEMVs, KernelChoice::q6_k_gemv_prefetch_bytes).
// With software prefetch, the GEMVs that walk their row groups as one stream (the AVX-512
// formats, the AVX2-level K-quants, Q6_K and Q8_0) prefetch this far ahead of it: 4.5 KiB (the
// kernel files have the sweeps; the AVX-512 Q6_K's distance is the CPU's, core/isa.h).
constexpr size_t kOneStreamPrefetchBytes = 4608;
// The gemv_*_streams4 variants of the 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) read
// four segments of the walk side by side, each prefetched into L1 (prefetcht0) this far ahead
// (KernelChoice::gemv_four_streams says which walk a CPU runs; gemm_tile_dispatch.h has why).
constexpr size_t kFourStreamsPrefetchBytes = 2048;
// Q4_0, Q5_0 and Q8_0 on AVX-512 in 16-row groups (packed_x16_avx512.cc), over "q8_0 sums"
// activations whose seeds are −8·Σy (Q4_0), −16·Σy (Q5_0) or −128·Σy (Q8_0), arranged by the
// AVX2 code (arrange_q8_0_sums*_avx2, which every AVX-512 CPU runs).
void gemv_q4_0x16_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void gemv_q4_0x16_streams4_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void gemv_q4_0x16_hwpf_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void tile_q4_0x16_avx512(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride,
                         int cols);
void gemv_q5_0x16_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void gemv_q5_0x16_streams4_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void gemv_q5_0x16_hwpf_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void tile_q5_0x16_avx512(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride,
                         int cols);
void gemv_q4_1x16_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void gemv_q4_1x16_streams4_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void gemv_q4_1x16_hwpf_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void tile_q4_1x16_avx512(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride,
                         int cols);
void gemv_q5_1x16_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void gemv_q5_1x16_streams4_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void gemv_q5_1x16_hwpf_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void tile_q5_1x16_avx512(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride,
                         int cols);
void gemv_q8_0x16_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void gemv_q8_0x16_streams4_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void gemv_q8_0x16_hwpf_avx512(int64_t n, float* out, const uint8_t* w, int groups, const uint8_t* act);
void tile_q8_0x16_avx512(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride,
                         int cols);
constexpr size_t kQ8SumsBlockBytes = 40;
// The 16-row groups' prefill tiles on AMX-INT8 (packed_x16_amx_avx512.cc, Q4_K and Q5_K
// packed_k16_amx_avx512.cc): the same layouts and activations, up to kPackedTileColsX16Amx tokens
// a call, the same bits as the AVX-512 GEMVs.
void tile_q4_0x16_amx(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols);
void tile_q4_1x16_amx(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols);
void tile_q5_0x16_amx(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols);
void tile_q5_1x16_amx(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols);
void tile_q8_0x16_amx(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols);
void tile_q4_kx16_amx(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols);
void tile_q5_kx16_amx(int64_t n, float* out, int64_t out_stride, const uint8_t* w, const uint8_t* act, size_t act_stride, int cols);
constexpr int kPackedTileColsX16Amx = 32;
// AVX-512 Q6_K (q6_kx4): 8 tokens a tile. It was 4; bench.matmul 5632 x 2048 from L3, 1 thread,
// Zen 4, alternating builds, 4 -> 8: 8 tokens 1211-1212 -> 1097-1107 µs, 32 4959-5000 -> 4438-4441
// (6 tokens a tile 142 µs a token, 8 137, 4 148).
constexpr int kPackedTileColsQ6_kAvx512 = 8;
// AVX2 Q6_K (q6_kx4): 8 tokens a tile. It was 2, for the 16 ymm registers; more spill and still
// win: bench.matmul 5632 x 2048 from L3, 1 thread, Zen 4 at FULCRUM_ISA=avx2, alternating builds,
// 2 -> 4: 8 tokens 1952-2015 -> 1557-1631 µs, 32 7822-8132 -> 6501-6882; 4 -> 8: 8 tokens
// 1583-1624 -> 1489-1515, 32 6646-6770 -> 6283-6459.
constexpr int kPackedTileColsQ6_kAvx2 = 8;
// AVX-512 16-row groups: 8 tokens a tile (12 measured no faster: bench.matmul 5632 x 2048 from L3,
// 1 thread, 32 tokens Q4_0 2144 -> 2225 µs, Q4_K 2361 -> 2431-2472).
constexpr int kPackedTileColsX16Avx512 = 8;
// AVX2 8-row groups of the 32-element formats: 8 tokens a tile. It was 4, to keep the eight weight
// vectors and the accumulators in the 16 ymm registers; 8 spills some and still wins. bench.matmul
// 5632 x 2048 from L3, 1 thread, Zen 4 at FULCRUM_ISA=avx2, alternating builds, 4 -> 8 tokens a
// tile: 32 tokens Q4_0 3836-3892 -> 3565-3593 µs, Q5_0 4586-4773 -> 4081-4157, Q8_0 6205-6304 ->
// 5609-5639; 8 tokens Q4_0 965 -> 888-933, Q5_0 1138-1192 -> 1025-1029 (6 a tile lay between).
constexpr int kPackedTileColsX8Avx2 = 8;
// AVX2 Q4_K and Q5_K in 8-row groups: Q4_K 8 tokens a tile, Q5_K (whose fifth bits take registers
// and instructions to unpack) 6. bench.matmul 5632 x 2048 from L3, 1 thread, Zen 4 at
// FULCRUM_ISA=avx2: Q4_K 32 tokens 3631-3827 µs at 4 a tile, 3345-3390 at 8 (8 tokens 897 -> 847-861);
// Q5_K 32 tokens 5030-5220 at 4, 4511-4680 at 6, 4686-4707 at 8 (16 tokens 2270 at 6, 2339-2352 at 8).
constexpr int kPackedTileColsQ4_kx8Avx2 = 8, kPackedTileColsQ5_kx8Avx2 = 6;

}  // namespace quant
}  // namespace fulcrum
