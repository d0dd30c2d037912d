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
  const int64_t group = s.n_heads / s.n_kv_heads;
  const int64_t row_bytes = std::max<int64_t>(1, group * ctx_len) * static_cast<int64_t>(sizeof(float));
  block_tokens = std::max<int64_t>(1, std::min<int64_t>({kMaxBlockTokens, max_tokens, kScoreBytesPerThread / row_bytes}));
  q16.assign(static_cast<size_t>(max_tokens * s.n_heads * s.head_dim), 0);
  scores.assign(static_cast<size_t>(std::max<int64_t>(s.n_heads, static_cast<int64_t>(n_threads) * block_tokens * group) * ctx_len), 0.f);
  work.assign(static_cast<size_t>(n_threads) * kernels::kAttnWorkFloats, 0.f);
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
    // Units of (block of BT tokens, KV head), rows ordered (token, query head of the group).
    // Causal rows cost more the later the token: units are handed out from a shared counter,
    // latest blocks first, so threads finish together.
    fns.f16_to_f32(sc.q16.data(), sc.qf.data(), n_tokens * qrow);
    const int64_t BT = std::min(sc.block_tokens, n_tokens);
    const int64_t n_blocks = (n_tokens + BT - 1) / BT;
    const int64_t units = n_blocks * s.n_kv_heads;
    const int64_t ld = sc.ctx;
    std::atomic<int64_t> next{0};
    pool.run([&](int ith, int) {
      float* scores = sc.scores.data() + static_cast<size_t>(ith) * BT * group * ld;
      float* work = sc.work.data() + static_cast<size_t>(ith) * kernels::kAttnWorkFloats;
      for (int64_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < units;) {
        const int64_t u = units - 1 - k;
        const int64_t b = u / s.n_kv_heads, g = u % s.n_kv_heads;
        const int64_t i0 = b * BT, nt = std::min(BT, n_tokens - i0), rows = nt * group;
        const int64_t h0 = g * group;
        const int64_t n_kv = pos0 + i0 + nt;  // positions the block's last token sees
        const float* qb = sc.qf.data() + i0 * qrow + h0 * hd;
        float* ob = out + i0 * qrow + h0 * hd;
        // Scores of every row over [0, n_kv); a row's positions past its own token are computed
        // but never read.
        for_page_segments(kv, g, hd, 0, n_kv, [&](int64_t t, int64_t n, const uint16_t* kr, const uint16_t*) {
          if (fns.kq_block_f16(n, hd, kr, hd, qb, rows, group, qrow, s.scale, scores + t, ld, work)) return;
          for (int64_t ii = 0; ii < nt; ++ii) fns.kq_f16(n, hd, kr, hd, qb + ii * qrow, group, s.scale, scores + ii * group * ld + t, ld);
        });
        for (int64_t ii = 0; ii < nt; ++ii) {
          const int64_t n_row = pos0 + i0 + ii + 1;
          for (int64_t j = 0; j < group; ++j) {
            float* sj = scores + (ii * group + j) * ld;
            const float mx = fns.max_f32(sj, n_row);
            const float sum = fns.exp_sub_sum(sj, n_row, mx);
            fns.scale_round_f16(sj, n_row, 1.0f / sum);
          }
          std::memset(ob + ii * qrow, 0, static_cast<size_t>(group * hd) * sizeof(float));
        }
        for_page_segments(kv, g, hd, 0, n_kv, [&](int64_t t, int64_t n, const uint16_t*, const uint16_t* vr) {
          const int64_t n_first = pos0 + i0 + 1 - t;  // positions of this run the block's first token sees
          if (fns.pv_block_f16(n, hd, vr, hd, scores + t, rows, group, ld, n_first, ob, qrow, work)) return;
          for (int64_t ii = 0; ii < nt; ++ii) {
            const int64_t m = std::min(n, n_first + ii);
            if (m > 0) fns.pv_f16(m, hd, vr, hd, scores + ii * group * ld + t, group, ld, ob + ii * qrow);
          }
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
        const float mx = fns.max_f32(sh + t0, t1 - t0);
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
