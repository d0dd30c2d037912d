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

namespace {

// Calls fn(t, n, k, v) for each run [t, t + n) of positions [t0, t1) that lies in one page, in
// position order; k and v point at KV head g's K and V rows of position t (head_dim values per
// row, the run's rows consecutive).
template <class F>
inline void for_page_segments(const KvPages& kv, int64_t g, int64_t hd, int64_t t0, int64_t t1, F&& fn) {
  const int64_t P = kv.page_tokens;
  for (int64_t t = t0; t < t1;) {
    const int64_t p = t / P, off = t - p * P;
    const int64_t n = std::min(t1 - t, P - off);
    const int64_t at = (g * P + off) * hd;
    fn(t, n, kv.k[p] + at, kv.v[p] + at);
    t += n;
  }
}

}  // namespace

void attention(ThreadPool& pool, const AttentionShape& s, const float* q, int64_t n_tokens, int64_t pos0,
               const KvPages& kv, float* out, AttentionScratch& sc) {
  const kernels::FloatFns& fns = kernels::float_fns();
  const int64_t hd = s.head_dim, qrow = s.n_heads * hd;
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
        const float* qg = sc.qf.data() + i * qrow + h0 * hd;
        for_page_segments(kv, g, hd, 0, n_kv, [&](int64_t t, int64_t n, const uint16_t* kr, const uint16_t*) {
          fns.kq_f16(n, hd, kr, hd, qg, group, s.scale, scores + t, ld);
        });
        for (int64_t j = 0; j < group; ++j) {
          float* sj = scores + j * ld;
          float mx = -std::numeric_limits<float>::infinity();
          for (int64_t t = 0; t < n_kv; ++t) mx = std::max(mx, sj[t]);
          const float sum = fns.exp_sub_sum(sj, n_kv, mx);
          fns.scale_round_f16(sj, n_kv, 1.0f / sum);
        }
        float* o = out + i * qrow + h0 * hd;
        std::memset(o, 0, static_cast<size_t>(group * hd) * sizeof(float));
        for_page_segments(kv, g, hd, 0, n_kv, [&](int64_t t, int64_t n, const uint16_t*, const uint16_t* vr) {
          fns.pv_f16(n, hd, vr, hd, scores + t, group, ld, o);
        });
      }
    });
    return;
  }

  // Decode: units of (chunk of positions, KV head), about two per thread. Chunks are balanced
  // rather than page-aligned: a chunk that starts inside a page costs one more kernel call,
  // while page-aligned chunks would differ by up to a page of work. Units of one chunk are
  // adjacent, so a thread's range walks neighbouring runs of the same pages.
  const int64_t n_kv = pos0 + 1;
  float* qf = sc.qf.data();
  fns.f16_to_f32(sc.q16.data(), qf, qrow);  // q as rounded to f16, in f32 for the grouped kernels
  constexpr int64_t kMinChunk = 32;
  constexpr int64_t MC = AttentionScratch::kMaxChunks;
  const int64_t want_chunks = (2 * static_cast<int64_t>(pool.size()) + s.n_kv_heads - 1) / s.n_kv_heads;
  const int64_t n_chunks = std::max<int64_t>(1, std::min<int64_t>({MC, n_kv / kMinChunk, want_chunks}));
  const int64_t chunk_len = (n_kv + n_chunks - 1) / n_chunks;
  const int64_t units = n_chunks * s.n_kv_heads;
  const int64_t ld = sc.ctx;

  pool.run([&](int ith, int nth) {
    int64_t b, e;
    ThreadPool::split(units, ith, nth, &b, &e);
    for (int64_t u = b; u < e; ++u) {
      const int64_t c = u / s.n_kv_heads, g = u % s.n_kv_heads;
      const int64_t t0 = c * chunk_len, t1 = std::min(n_kv, t0 + chunk_len);
      float* sg = sc.scores.data() + g * group * ld;
      for_page_segments(kv, g, hd, t0, t1, [&](int64_t t, int64_t n, const uint16_t* kr, const uint16_t*) {
        fns.kq_f16(n, hd, kr, hd, qf + g * group * hd, group, s.scale, sg + t, ld);
      });
      for (int64_t j = 0; j < group; ++j) {
        const int64_t h = g * group + j;
        float* sh = sg + j * ld;
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
    ThreadPool::split(units, ith, nth, &b, &e);
    for (int64_t u = b; u < e; ++u) {
      const int64_t c = u / s.n_kv_heads, g = u % s.n_kv_heads;
      const int64_t t0 = c * chunk_len, t1 = std::min(n_kv, t0 + chunk_len);
      float* sg = sc.scores.data() + g * group * ld;
      for (int64_t j = 0; j < group; ++j) {
        const int64_t h = g * group + j;
        const float* cm = sc.chunk_max.data() + h * MC;
        const float* cs = sc.chunk_sum.data() + h * MC;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t k = 0; k < n_chunks; ++k) mx = std::max(mx, cm[k]);
        double total = 0;
        for (int64_t k = 0; k < n_chunks; ++k) total += static_cast<double>(cs[k]) * std::exp(cm[k] - mx);
        const float inv = static_cast<float>(1.0 / total);
        if (t1 > t0) fns.scale_round_f16(sg + j * ld + t0, t1 - t0, std::exp(cm[c] - mx) * inv);
      }
      float* acc = sc.partial.data() + (c * s.n_heads + g * group) * hd;
      std::memset(acc, 0, static_cast<size_t>(group * hd) * sizeof(float));
      for_page_segments(kv, g, hd, t0, t1, [&](int64_t t, int64_t n, const uint16_t*, const uint16_t* vr) {
        fns.pv_f16(n, hd, vr, hd, sg + t, group, ld, acc);
      });
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
