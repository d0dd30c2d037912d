#include "kernels/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/fp16.h"
#include "ggml_types.h"
#include "kernels/float_fns.h"

namespace fulcrum {

void AttentionScratch::reserve(const AttentionShape& s, int64_t ctx_len, int64_t max_tokens, int n_threads) {
  ctx = ctx_len;
  q16.assign(static_cast<size_t>(max_tokens * s.n_heads * s.head_dim), 0);
  scores.assign(static_cast<size_t>(std::max<int64_t>(s.n_heads, static_cast<int64_t>(n_threads) * (s.n_heads / s.n_kv_heads)) * ctx_len), 0.f);
  partial.assign(static_cast<size_t>(s.n_heads * kMaxChunks * s.head_dim), 0.f);
  qf.assign(static_cast<size_t>(max_tokens * s.n_heads * s.head_dim), 0.f);
  chunk_max.assign(static_cast<size_t>(s.n_heads * kMaxChunks), 0.f);
  chunk_sum.assign(static_cast<size_t>(s.n_heads * kMaxChunks), 0.f);
}

void attention(ThreadPool& pool, const AttentionShape& s, const float* q, int64_t n_tokens, int64_t pos0,
               const uint16_t* kcache, const uint16_t* vcache, float* out, AttentionScratch& sc) {
  const kernels::FloatFns& fns = kernels::float_fns();
  const int64_t hd = s.head_dim, qrow = s.n_heads * hd, kvrow = s.n_kv_heads * hd;
  const int64_t group = s.n_heads / s.n_kv_heads;
  fns.f32_to_f16(q, sc.q16.data(), n_tokens * qrow);

  if (n_tokens > 1) {
    // Causal rows cost more the later the token: hand out (token, KV head) units from a shared
    // counter, latest tokens first, so threads finish together. A unit scores all the query
    // heads of its KV head at once (each K and V row read once per group).
    fns.f16_to_f32(sc.q16.data(), sc.qf.data(), n_tokens * qrow);
    const int64_t units = n_tokens * s.n_kv_heads;
    const int64_t ld = sc.ctx;
    std::atomic<int64_t> next{0};
    pool.run([&](int ith, int) {
      float* scores = sc.scores.data() + static_cast<size_t>(ith) * group * ld;
      for (int64_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < units;) {
        const int64_t u = units - 1 - k;
        const int64_t i = u / s.n_kv_heads, g = u % s.n_kv_heads;
        const int64_t n_kv = pos0 + i + 1, h0 = g * group;
        fns.kq_f16(n_kv, hd, kcache + g * hd, kvrow, sc.qf.data() + i * qrow + h0 * hd, group, s.scale, scores, ld);
        for (int64_t j = 0; j < group; ++j) {
          float* sj = scores + j * ld;
          float mx = -std::numeric_limits<float>::infinity();
          for (int64_t t = 0; t < n_kv; ++t) mx = std::max(mx, sj[t]);
          const float sum = fns.exp_sub_sum(sj, n_kv, mx);
          fns.scale_round_f16(sj, n_kv, 1.0f / sum);
        }
        float* o = out + i * qrow + h0 * hd;
        std::memset(o, 0, static_cast<size_t>(group * hd) * sizeof(float));
        fns.pv_f16(n_kv, hd, vcache + g * hd, kvrow, scores, group, ld, o);
      }
    });
    return;
  }

  // Decode: split across threads by chunks of KV positions. Within a chunk, positions are
  // walked in order and every KV head's slice of a cache row is used while the row is hot, so
  // the cache is streamed front to back (the hardware prefetcher follows that; a walk per KV
  // head would stride a whole row per step). Each group of query heads sharing a KV head is
  // scored together.
  const int64_t n_kv = pos0 + 1;
  float* qf = sc.qf.data();
  fns.f16_to_f32(sc.q16.data(), qf, qrow);  // q as rounded to f16, in f32 for the grouped kernels
  constexpr int64_t kMinChunk = 32;
  const int64_t n_chunks = std::max<int64_t>(1, std::min<int64_t>({AttentionScratch::kMaxChunks, n_kv / kMinChunk, 2 * pool.size()}));
  const int64_t chunk_len = (n_kv + n_chunks - 1) / n_chunks;
  const int64_t ld = sc.ctx;
  constexpr int64_t MC = AttentionScratch::kMaxChunks;

  pool.run([&](int ith, int nth) {
    int64_t b, e;
    ThreadPool::split(n_chunks, ith, nth, &b, &e);
    for (int64_t c = b; c < e; ++c) {
      const int64_t t0 = c * chunk_len, t1 = std::min(n_kv, t0 + chunk_len);
      for (int64_t t = t0; t < t1; ++t)
        for (int64_t g = 0; g < s.n_kv_heads; ++g)
          fns.kq_f16(1, hd, kcache + t * kvrow + g * hd, kvrow, qf + g * group * hd, group, s.scale, sc.scores.data() + g * group * ld + t, ld);
      for (int64_t h = 0; h < s.n_heads; ++h) {
        float* sh = sc.scores.data() + h * ld;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t t = t0; t < t1; ++t) mx = std::max(mx, sh[t]);
        // Scores become exp(score - chunk max); pass two rescales them to the head's max.
        sc.chunk_sum[h * MC + c] = t1 > t0 ? fns.exp_sub_sum(sh + t0, t1 - t0, mx) : 0.f;
        sc.chunk_max[h * MC + c] = mx;
      }
    }
  });

  pool.run([&](int ith, int nth) {
    int64_t b, e;
    ThreadPool::split(n_chunks, ith, nth, &b, &e);
    for (int64_t c = b; c < e; ++c) {
      const int64_t t0 = c * chunk_len, t1 = std::min(n_kv, t0 + chunk_len);
      for (int64_t h = 0; h < s.n_heads; ++h) {
        const float* cm = sc.chunk_max.data() + h * MC;
        const float* cs = sc.chunk_sum.data() + h * MC;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t k = 0; k < n_chunks; ++k) mx = std::max(mx, cm[k]);
        double total = 0;
        for (int64_t k = 0; k < n_chunks; ++k) total += static_cast<double>(cs[k]) * std::exp(cm[k] - mx);
        const float inv = static_cast<float>(1.0 / total);
        if (t1 > t0) fns.scale_round_f16(sc.scores.data() + h * ld + t0, t1 - t0, std::exp(cm[c] - mx) * inv);
      }
      float* acc = sc.partial.data() + c * s.n_heads * hd;
      std::memset(acc, 0, static_cast<size_t>(s.n_heads * hd) * sizeof(float));
      for (int64_t t = t0; t < t1; ++t)
        for (int64_t g = 0; g < s.n_kv_heads; ++g)
          fns.pv_f16(1, hd, vcache + t * kvrow + g * hd, kvrow, sc.scores.data() + g * group * ld + t, group, ld, acc + g * group * hd);
    }
  });

  for (int64_t h = 0; h < s.n_heads; ++h) {
    float* o = out + h * hd;
    std::memcpy(o, sc.partial.data() + h * hd, static_cast<size_t>(hd) * sizeof(float));
    for (int64_t c = 1; c < n_chunks; ++c) {
      const float* p = sc.partial.data() + (c * s.n_heads + h) * hd;
      for (int64_t d = 0; d < hd; ++d) o[d] += p[d];
    }
  }
}

}  // namespace fulcrum
