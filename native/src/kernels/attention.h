// Causal attention over the f16 KV cache, with grouped-query heads (head h reads KV head
// h / (n_heads / n_kv_heads)).
//
// Numerics follow llama.cpp's CPU path without flash attention, which the parity tests compare
// against: K and V are stored as f16, q is rounded to f16 before the q·k dot products (the
// K·Q mul_mat converts its f32 operand to K's type), softmax runs in f32 with the max
// subtracted, and the probabilities are rounded to f16 before they weight V (the V·P mul_mat
// converts P likewise). Sums are f32.
//
// Decode (one query token) is split across threads by KV head and by chunks of KV positions
// (flash-decoding): scores and per-chunk maxima first, then every chunk's weighted V sum with
// the head's global max and normaliser, then a merge of the chunks' partial outputs. The query
// heads of one KV head are processed together, so each K and V row is read once per group.
// Prefill splits (query token, KV head) pairs across threads.
#pragma once
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"

namespace fulcrum {

struct AttentionShape {
  int64_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
  float scale = 1.f;  // usually 1/sqrt(head_dim)
};

// Working memory sized once per model (no allocation per call).
class AttentionScratch {
 public:
  void reserve(const AttentionShape& s, int64_t ctx, int64_t max_tokens, int n_threads);
  std::vector<uint16_t> q16;     // [max_tokens][n_heads][head_dim] f16 queries
  std::vector<float> scores;     // decode: [n_heads][ctx]; prefill: [n_threads][group][ctx]
  std::vector<float> qf;         // [max_tokens][n_heads][head_dim] q rounded to f16, as f32
  std::vector<float> partial;    // decode: [kMaxChunks][n_heads][head_dim]
  std::vector<float> chunk_max;  // decode: [n_heads][kMaxChunks]
  std::vector<float> chunk_sum;  // decode: [n_heads][kMaxChunks]
  int64_t ctx = 0;
  static constexpr int64_t kMaxChunks = 16;
};

// q: [n_tokens][n_heads*head_dim] (RoPE applied). kcache/vcache: [ctx][n_kv_heads*head_dim] f16,
// already holding positions [0, pos0 + n_tokens). Token i attends to positions [0, pos0 + i].
// out: [n_tokens][n_heads*head_dim].
void attention(ThreadPool& pool, const AttentionShape& s, const float* q, int64_t n_tokens, int64_t pos0,
               const uint16_t* kcache, const uint16_t* vcache, float* out, AttentionScratch& scratch);

}  // namespace fulcrum
