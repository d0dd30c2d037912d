// Causal attention over the paged f16 KV cache, with grouped-query heads (head h reads KV head
// h / (n_heads / n_kv_heads)).
//
// Numerics follow llama.cpp's CPU path without flash attention, which the parity tests compare
// against: K and V are stored as f16, q is rounded to f16 before the q·k dot products (the
// K·Q mul_mat converts its f32 operand to K's type), softmax runs in f32 with the max
// subtracted, and the probabilities are rounded to f16 before they weight V (the V·P mul_mat
// converts P likewise). Sums are f32.
//
// The cache is read through page tables (model/kv_cache.h): position t of KV head g is row
// g * page_tokens + t % page_tokens of page t / page_tokens. Every walk over positions goes page segment by page
// segment (runs of at most page_tokens consecutive rows), in position order: the kernels see
// the same rows in the same order as over one contiguous array, so results do not depend on
// the page size.
//
// Decode, and evaluations of a few tokens (up to AttentionScratch::page_major_tokens: a
// speculative step's verification), are split across threads by heads, never by positions (a
// row's sums keep one order): units of (KV head, part of its query-head group), whole groups
// where there are at least as many KV heads as threads. A unit scores all the query heads of its
// KV head, for all the tokens, together, so each K and V row is read once per group. A thread's
// units are consecutive KV heads, whose rows within a page are one contiguous run: the walk goes
// K (then V) page by page, each page's run of all the thread's heads in one stream.
//
// Longer prefills split (block of up to 16 tokens, KV head) units across threads. A unit computes the
// scores of all its query rows (block tokens × the KV head's query heads) a page segment at a
// time (kq_block_f16: a block of K rows transposed once, 16 positions' scores per register, no
// horizontal sums), the softmax of each row over its causal range, then the weighted V sums with
// tiles of output rows held in registers (pv_block_f16). Every score and output value is rounded
// exactly as single-chunk decode rounds it (same per-lane sums, reduction tree and FMA chains), so
// results do not depend on how a prompt is split into evaluations either.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/thread_pool.h"

namespace fulcrum {

struct AttentionShape {
  int64_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
  float scale = 1.f;  // usually 1/sqrt(head_dim)
  // Gemma 2: scores soft-capped to (-softcap, softcap) as tanh(s / softcap) · softcap (0: off).
  float softcap = 0.f;
  // Sliding-window layers (gemma2/3): a query at position p sees keys (p - window, p] (0: all).
  int64_t window = 0;
};

// Working memory sized once per model (no allocation per call).
class AttentionScratch {
 public:
  void reserve(const AttentionShape& s, int64_t ctx, int64_t max_tokens, int n_threads);
  std::vector<uint16_t> q16;     // [max_tokens][n_heads][head_dim] f16 queries
  std::vector<float> scores;     // decode: [n_heads][ctx]; prefill: [n_threads][block_tokens * group][ctx]
  std::vector<float> work;       // prefill: [n_threads][kernels::kAttnWorkFloats] kernel scratch
  std::vector<float> qf;         // [max_tokens][n_heads][head_dim] q rounded to f16, as f32
  std::vector<float> qg;         // [page_major_tokens * n_heads][head_dim] qf's rows by unit (see attention())
  int64_t ctx = 0;
  // Prefill tokens per unit: up to kMaxBlockTokens, fewer where a thread's score rows for that
  // many tokens would pass kScoreBytesPerThread (long contexts).
  int64_t block_tokens = 1;
  static constexpr int64_t kMaxBlockTokens = 16;
  static constexpr int64_t kScoreBytesPerThread = int64_t{4} << 20;
  // Evaluations of up to page_major_tokens tokens (decode: 1; a speculative step: a few) walk the
  // cache page by page, all query heads' rows of all tokens scored at once: up to
  // kMaxPageMajorTokens, fewer where those score rows would pass kPageMajorScoreBytes.
  int64_t page_major_tokens = 1;
  static constexpr int64_t kMaxPageMajorTokens = 8;
  static constexpr int64_t kPageMajorScoreBytes = int64_t{32} << 20;
};

// The element format of the KV cache. F16 is what llama.cpp keeps by default and what the
// parity tests compare with. Q8_0 (llama.cpp's `-ctk q8_0 -ctv q8_0`) stores each head's row as
// blocks of 32 values with one f16 scale: 34 bytes per 32 values instead of 64, so the cache
// takes 53 % of the memory and decode attention reads 53 % of the bytes, at the cost of rounding
// K and V to 8 bits per block (the kernels then compute with the stored values exactly).
enum class KvFormat : int8_t { F16 = 0, Q8_0 = 1 };
// "F16" / "Q8_0" (the ggml type names, as the engine and its settings spell them).
const char* kv_format_name(KvFormat f);
// Every format the CPU attention kernels read, by name (the cpu and loopback devices' kv_formats).
std::vector<std::string> cpu_kv_format_names();
// Bytes of one KV head's row of head_dim values.
int64_t kv_row_bytes(KvFormat f, int64_t head_dim);
// Why `head_dim` cannot be stored in format f, or "" when it can (Q8_0: whole blocks of 32, at
// most 256 values, what its kernels take).
std::string kv_format_refusal(KvFormat f, int64_t head_dim);

// One layer's KV cache as attention reads it: k[p] and v[p] point at page p, each
// [n_kv_heads][page_tokens] rows of kv_row_bytes(format, head_dim) (head-major: one KV head's
// positions are contiguous). The pointers are typed for F16 pages; Q8_0 pages are read as bytes.
struct KvPages {
  const uint16_t* const* k = nullptr;
  const uint16_t* const* v = nullptr;
  int64_t page_tokens = 0;
  KvFormat format = KvFormat::F16;
};

// q: [n_tokens][n_heads*head_dim] (RoPE applied). kv: pages already holding positions
// [0, pos0 + n_tokens). Token i attends to positions [0, pos0 + i] (with a window, the last
// `window` of them: the others' scores are -inf, so their probabilities are 0, as llama.cpp's
// mask makes them).
// out: [n_tokens][n_heads*head_dim].
void attention(ThreadPool& pool, const AttentionShape& s, const float* q, int64_t n_tokens, int64_t pos0,
               const KvPages& kv, float* out, AttentionScratch& scratch);

}  // namespace fulcrum
