#include "kernels/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/fp16.h"
#include "ggml_types.h"
#include "kernels/float_fns.h"
#include "quant/formats/blocks.h"

namespace fulcrum {

void AttentionScratch::reserve(const AttentionShape& s, int64_t ctx_len, int64_t max_tokens, int n_threads) {
  ctx = ctx_len;
  const int64_t group = s.n_heads / s.n_kv_heads;
  const int64_t row_bytes = std::max<int64_t>(1, group * ctx_len) * static_cast<int64_t>(sizeof(float));
  block_tokens = std::max<int64_t>(1, std::min<int64_t>({kMaxBlockTokens, max_tokens, kScoreBytesPerThread / row_bytes}));
  const int64_t head_rows_bytes = std::max<int64_t>(1, s.n_heads * ctx_len) * static_cast<int64_t>(sizeof(float));
  page_major_tokens = std::max<int64_t>(1, std::min<int64_t>({kMaxPageMajorTokens, max_tokens, kPageMajorScoreBytes / head_rows_bytes}));
  q16.assign(static_cast<size_t>(max_tokens * s.n_heads * s.head_dim), 0);
  scores.assign(static_cast<size_t>(std::max<int64_t>(s.n_heads * page_major_tokens, static_cast<int64_t>(n_threads) * block_tokens * group) * ctx_len), 0.f);
  qg.assign(static_cast<size_t>(page_major_tokens * s.n_heads * s.head_dim), 0.f);
  work.assign(static_cast<size_t>(n_threads) * kernels::kAttnWorkFloats, 0.f);
  qf.assign(static_cast<size_t>(max_tokens * s.n_heads * s.head_dim), 0.f);
}

const char* kv_format_name(KvFormat f) { return f == KvFormat::Q8_0 ? "Q8_0" : "F16"; }

std::vector<std::string> cpu_kv_format_names() { return {kv_format_name(KvFormat::F16), kv_format_name(KvFormat::Q8_0)}; }

int64_t kv_row_bytes(KvFormat f, int64_t head_dim) {
  return f == KvFormat::Q8_0 ? head_dim / quant::QK8_0 * static_cast<int64_t>(sizeof(quant::block_q8_0)) : head_dim * static_cast<int64_t>(sizeof(uint16_t));
}

std::string kv_format_refusal(KvFormat f, int64_t head_dim) {
  if (f == KvFormat::Q8_0 && (head_dim % quant::QK8_0 != 0 || head_dim > 256))
    return "a Q8_0 KV cache needs a head size that is a multiple of 32 up to 256 (whole Q8_0 blocks, what its kernels take); this model's is " +
           std::to_string(head_dim) + ": use the F16 KV cache";
  return "";
}

namespace {

// The kernels for the cache's element format (float_fns.h), on rows addressed in bytes.
struct RowKernels {
  const kernels::FloatFns& fns;
  KvFormat format;
  int64_t hd, row_bytes;
  // ahead: the kernels' prefetch distance (float_fns.h), 0 for none.
  void kq(int64_t n, const uint8_t* k, const float* q, int64_t nq, float scale, float* scores, int64_t ld, int64_t ahead = 0) const {
    if (format == KvFormat::Q8_0) return fns.kq_q8_0(n, hd, k, row_bytes, q, nq, scale, scores, ld, ahead);
    fns.kq_f16(n, hd, reinterpret_cast<const uint16_t*>(k), hd, q, nq, scale, scores, ld, ahead);
  }
  void pv(int64_t n, const uint8_t* v, const float* p, int64_t nq, int64_t ld, float* out, float* work, int64_t ahead = 0) const {
    if (format == KvFormat::Q8_0) return fns.pv_q8_0(n, hd, v, row_bytes, p, nq, ld, out, work, ahead);
    fns.pv_f16(n, hd, reinterpret_cast<const uint16_t*>(v), hd, p, nq, ld, out, ahead);
  }
  bool kq_block(int64_t n, const uint8_t* k, const float* q, int64_t rows, int64_t rpt, int64_t qstride, float scale, float* scores, int64_t ld,
                float* work) const {
    if (format == KvFormat::Q8_0) return fns.kq_block_q8_0(n, hd, k, row_bytes, q, rows, rpt, qstride, scale, scores, ld, work);
    return fns.kq_block_f16(n, hd, reinterpret_cast<const uint16_t*>(k), hd, q, rows, rpt, qstride, scale, scores, ld, work);
  }
  bool pv_block(int64_t n, const uint8_t* v, const float* p, int64_t rows, int64_t rpt, int64_t ld, int64_t n_first, float* out, int64_t ostride,
                float* work) const {
    if (format == KvFormat::Q8_0) return fns.pv_block_q8_0(n, hd, v, row_bytes, p, rows, rpt, ld, n_first, out, ostride, work);
    return fns.pv_block_f16(n, hd, reinterpret_cast<const uint16_t*>(v), hd, p, rows, rpt, ld, n_first, out, ostride, work);
  }
};

// Soft-capping and the sliding window on one row of scores over positions [0, n_row) of a query
// at position n_row - 1 (see AttentionShape).
inline void shape_scores(const AttentionShape& s, float* row, int64_t n_row) {
  if (s.softcap > 0) {
    const float inv = 1.0f / s.softcap;
    for (int64_t t = 0; t < n_row; ++t) row[t] = std::tanh(row[t] * inv) * s.softcap;
  }
  if (s.window > 0)
    for (int64_t t = 0; t < n_row - s.window; ++t) row[t] = -std::numeric_limits<float>::infinity();
}

// Calls fn(t, n, p, off) for each run [t, t + n) of positions [t0, t1) that lies in one page
// (page p, from row off of each head's rows in it), in position order.
template <class F>
inline void for_page_runs(int64_t page_tokens, int64_t t0, int64_t t1, F&& fn) {
  for (int64_t t = t0; t < t1;) {
    const int64_t p = t / page_tokens, off = t - p * page_tokens;
    const int64_t n = std::min(t1 - t, page_tokens - off);
    fn(t, n, p, off);
    t += n;
  }
}

// Calls fn(t, n, k, v) for each run of for_page_runs; k and v point at KV head g's K and V rows of
// position t (row_bytes per row, the run's rows consecutive). Prefill's walk, one KV head at a
// time: its blocked tiles do a block of tokens' work per K and V row and wait on their
// arithmetic, not on the reads (0.5B, 1536-token prompt, a throwaway build skipping one part: K
// tiles 52 % of its attention, V tiles 34 %, softmax 15 %; the AVX2 K tile alone, from L1, runs at
// the same FMA rate as in the model). Decode walks page-major instead (attention()).
template <class F>
inline void for_page_segments(const KvPages& kv, int64_t g, int64_t row_bytes, int64_t t0, int64_t t1, F&& fn) {
  for_page_runs(kv.page_tokens, t0, t1, [&](int64_t t, int64_t n, int64_t p, int64_t off) {
    const int64_t at = (g * kv.page_tokens + off) * row_bytes;
    fn(t, n, reinterpret_cast<const uint8_t*>(kv.k[p]) + at, reinterpret_cast<const uint8_t*>(kv.v[p]) + at);
  });
}

// Decode's prefetch distance on page p (float_fns.h, kq_f16's `ahead`): from a row of page p to
// the same row of page p + 1, which the walk reads next for the same heads; 0 on the last page.
// The rows one page on, not a fixed number of bytes on: a thread's heads are a run of each page
// (two threads on two KV heads: every other 8 KiB), and the next bytes of memory are another
// thread's. Without it, on a 2-vCPU Zen 5 (AMD EPYC, AVX-512) whose hardware prefetchers fall
// behind a walk this slow, decode attention read 14 GB/s from DRAM against 42 a read probe gets.
// bench.attention, 14 heads of 64 over 2 (the 0.5B), from DRAM (256 MiB ring), medians of 200,
// three alternating rounds, without -> with, µs:
//   1 thread   280 / 1024 / 2048 positions: 10.4-10.9 / 38.4-39.1 / 76.7-77.2 -> 9.8-9.9 / 28.1-28.4 / 53.9-55.1
//   2 threads  1024 / 2048: 33.2-36.4 / 62.1-67.6 -> 16.4-19.7 / 30.8-35.5
//   AVX2, 2048: 1 thread 116 -> 96, 2 threads 83 -> 49
// 16 heads of 128 over 16 (MHA, the 1.3B: a page is 256 KiB, long runs the hardware follows):
// level (1 thread, 1024 positions, 231-264 -> 224-229). In the model (0.5B Q4_0, a 2048-token
// prompt): attention 1811-1852 -> 1471-1576 µs a token at 1 thread, 1718-1978 -> 930-1071 at 2;
// decode 113-122 -> 124-129 tok/s and 135-143 -> 162-175.
inline int64_t page_ahead(const uint16_t* const* pages, int64_t p, int64_t last_page) {
  if (p >= last_page) return 0;
  return static_cast<int64_t>(reinterpret_cast<uintptr_t>(pages[p + 1]) - reinterpret_cast<uintptr_t>(pages[p]));
}

// Where a thread's rows in a page are one long run (its KV heads are consecutive, so their rows
// are adjacent in a head-major page), the walk's next bytes are the run's own, and the
// prefetch looks kNearAhead bytes on in it instead of one page on. Runs of kNearRunBytes or more:
// the 1.3B's 16 heads of 128 over 16 (a 256 KiB page), 1 thread: bench.attention from DRAM, medians
// of 200, alternating builds, one page on -> 4 KiB on: 74-79 -> 67-73 µs at 281 positions, 224-266
// -> 208-213 at 1024 (2 KiB: 69-70 / 227-233; 6 KiB 70-72 / 206-213; 8 and 16 KiB no better than 4).
// The 0.5B's 14 heads of 64 over 2 (runs of 8 or 16 KiB) keep one page on: 4 KiB on there was
// 1 thread 51-54 -> 56 µs at 2048 positions, 2 threads 38 -> 44.
constexpr int64_t kNearAhead = 4096, kNearRunBytes = 64 << 10;

// Where a thread's run in a page is that long and holds two or more of its units, decode reads it
// as two streams side by side: the units split in two halves, each half walked in its own order
// in chunks of kStreamChunkRows positions, a chunk of one half then one of the other, and each
// row prefetched kStreamAheadRows rows on in its own stream. On Intel one stream's prefetches keep
// too few lines in flight (gemv's k_gemv_two_streams, for the same reason): a second stream in
// another part of the page gives the L2 streamer a second page to run ahead on. Every head still
// sees its positions in increasing order and its scores in whole kq blocks (16 positions), so the
// bits do not change. bench.attention from DRAM (256 MiB ring), medians of 200, 2-vCPU Intel Xeon
// (AVX-512, AMX), three alternating rounds, 1 / 2 threads, GB/s: 16 heads of 128 over 16 (MHA,
// the 1.3B), 576 positions 13.2-13.5 / 25.9-26.9 -> 15.6-15.8 / 28.0-29.3, 1024 positions
// 12.5-12.9 / 25.8-26.5 -> 14.4-14.9 / 27.7-29.2; 16 over 8 (Qwen3's shape) 9.4-11.1 / 19.7-20.0
// -> 12.9-13.3 / 21.4-22.1. The prefetch distance is the half chunk: a chunk or more ahead
// (4 KiB, the one-stream distance) measured no better than one stream (13.0-13.4 / 25.8-26.3 at
// 576), chunks of 8 rows with 4 rows ahead like these, 32 or 64 rows below them. Shorter runs
// (the 0.5B's 14 heads over 2: 8 or 16 KiB) keep one stream: two measured 0-6 % slower there.
constexpr int64_t kStreamChunkRows = 16, kStreamAheadRows = 8;

}  // namespace

void attention(ThreadPool& pool, const AttentionShape& s, const float* q, int64_t n_tokens, int64_t pos0,
               const KvPages& kv, float* out, AttentionScratch& sc) {
  const kernels::FloatFns& fns = kernels::float_fns();
  const int64_t hd = s.head_dim, qrow = s.n_heads * hd;
  const RowKernels rk{fns, kv.format, hd, kv_row_bytes(kv.format, hd)};
  const int64_t rb = rk.row_bytes;
  const int64_t group = s.n_heads / s.n_kv_heads;
  fns.f32_to_f16(q, sc.q16.data(), n_tokens * qrow);

  if (n_tokens > sc.page_major_tokens) {
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
        for_page_segments(kv, g, rb, 0, n_kv, [&](int64_t t, int64_t n, const uint8_t* kr, const uint8_t*) {
          if (rk.kq_block(n, kr, qb, rows, group, qrow, s.scale, scores + t, ld, work)) return;
          for (int64_t ii = 0; ii < nt; ++ii) rk.kq(n, kr, qb + ii * qrow, group, s.scale, scores + ii * group * ld + t, ld);
        });
        for (int64_t ii = 0; ii < nt; ++ii) {
          const int64_t n_row = pos0 + i0 + ii + 1;
          for (int64_t j = 0; j < group; ++j) {
            float* sj = scores + (ii * group + j) * ld;
            shape_scores(s, sj, n_row);
            const float mx = fns.max_f32(sj, n_row);
            const float sum = fns.exp_sub_sum(sj, n_row, mx);
            fns.scale_round_f16(sj, n_row, 1.0f / sum);
          }
          std::memset(ob + ii * qrow, 0, static_cast<size_t>(group * hd) * sizeof(float));
        }
        for_page_segments(kv, g, rb, 0, n_kv, [&](int64_t t, int64_t n, const uint8_t*, const uint8_t* vr) {
          const int64_t n_first = pos0 + i0 + 1 - t;  // positions of this run the block's first token sees
          if (rk.pv_block(n, vr, scores + t, rows, group, ld, n_first, ob, qrow, work)) return;
          for (int64_t ii = 0; ii < nt; ++ii) {
            const int64_t m = std::min(n, n_first + ii);
            if (m > 0) rk.pv(m, vr, scores + ii * group * ld + t, group, ld, ob + ii * qrow, work);
          }
        });
      }
    });
    return;
  }

  // A token or a few (decode; a speculative step's verification): the same computation per row
  // as the blocked path above (scores, a softmax over the row's causal range, probabilities
  // rounded to f16, values summed in position order), so a token's output has the same bits
  // whether it is decoded alone or verified in a multi-token step, whatever the thread count.
  // Parallel over heads, never over positions: splitting a row's positions would change its sums'
  // order. Units are (KV head, part of its query-head group): whole groups where there are at
  // least as many KV heads as threads (each K and V row is then read once, for all the group's
  // query heads and tokens), groups split between threads only where there are fewer (measured on
  // the 0.5B shape, 14 heads over 2 KV heads at 2048 positions, 2 threads: 42 µs with one KV head
  // per thread against 49-71 µs with each group in two parts). A unit's rows are (token, query
  // head of its part), token-major, and its scores rows follow the units' heads: unit rows start
  // at row h0 · n_tokens.
  const int64_t nt = n_tokens;
  const int64_t n_kv = pos0 + nt;  // positions the last token sees
  float* qf = sc.qf.data();
  fns.f16_to_f32(sc.q16.data(), qf, nt * qrow);  // q as rounded to f16, in f32 for the grouped kernels
  const int64_t want = static_cast<int64_t>(pool.size());
  const int64_t parts = std::min<int64_t>(group, std::max<int64_t>(1, (want + s.n_kv_heads - 1) / s.n_kv_heads));
  const int64_t per_part = (group + parts - 1) / parts;
  const int64_t units = s.n_kv_heads * parts;
  const int64_t ld = sc.ctx;
  pool.run([&](int ith, int nth) {
    int64_t b, e;
    ThreadPool::split(units, ith, nth, &b, &e);
    // The thread's units, in order, are consecutive KV heads (or parts of one): within a page
    // their rows are one contiguous run (head-major pages), so each pass walks page by page and,
    // within a page, over all of the thread's heads. Every head still sees its positions in
    // increasing order (the same scores, sums and bits as a head-by-head walk), and the reads are
    // page-long streams the hardware prefetchers follow, instead of one head's page_tokens rows
    // at a time with software prefetches ahead within and across runs. 2-vCPU Zen 4,
    // bench.attention from DRAM (256 MiB ring), medians of 400, 16 heads of 128 over 16 KV heads
    // (MHA, deepseek-coder 1.3B): 1 thread 195 -> 112 µs at 280 positions, 697 -> 354 at 1024
    // (AVX2 236 -> 118, 855 -> 390); 2 threads 109 -> 92, 390 -> 308. 14 heads of 64 over 2 (the
    // 0.5B): level (1 thread 25 -> 24 and 86 -> 83; 2 threads 14.3 -> 14.5 and 46 -> 48). Keeping
    // a prefetch of the next page's first rows (1-4 KiB) measured no better; prefetching each
    // row's counterpart one page on while the row is read (page_ahead, above) does better.
    auto unit_heads = [&](int64_t u, int64_t* g, int64_t* h0, int64_t* nq) {
      const int64_t part = u % parts, j0 = part * per_part;
      *g = u / parts;
      *nq = std::min(group, j0 + per_part) - j0;
      *h0 = *g * group + j0;
    };
    const int64_t P = kv.page_tokens;
    float* work = sc.work.data() + static_cast<size_t>(ith) * kernels::kAttnWorkFloats;
    // Every unit's rows go through kq and pv_f16, which convert each K or V row to f32 once for
    // all the rows they take (no transposed blocks): the blocked kernels (kq_block, pv_block)
    // measured slower at every size this path takes. bench.attention from DRAM, 900 positions,
    // 1 thread, 2-vCPU Zen 4, medians of 400, blocked -> these: 14 heads of 64 over 2, 1 token
    // 72.5 -> 60 µs (AVX2 73-77 -> 63-64; 280 positions 25 -> 20.7), 2 tokens 140 -> 103, 5 243 ->
    // 223, 8 368 -> 342; 16 heads of 128 over 16, 2 tokens 1165 -> 564, 5 1379 -> 954 (AVX2 1052 ->
    // 480, 1557 -> 758). The kernels' rows of several tokens are gathered contiguously (qg).
    if (nt > 1)
      for (int64_t u = b; u < e; ++u) {
        int64_t g, h0, nq;
        unit_heads(u, &g, &h0, &nq);
        for (int64_t i = 0; i < nt; ++i)
          std::memcpy(sc.qg.data() + (h0 * nt + i * nq) * hd, qf + i * qrow + h0 * hd, static_cast<size_t>(nq * hd) * sizeof(float));
      }
    const float* qrows = nt > 1 ? sc.qg.data() : qf;
    const int64_t last_page = (n_kv - 1) / P;
    const int64_t run_heads = b < e ? (e - 1) / parts - b / parts + 1 : 0;  // the KV heads of units [b, e) (unit_heads)
    const bool near = run_heads * P * rb >= kNearRunBytes;
    const int64_t streams = near && e - b >= 2 ? 2 : 1;
    const auto ahead_of = [&](const uint16_t* const* pages, int64_t p) {
      if (!near) return page_ahead(pages, p, last_page);
      return streams == 2 ? kStreamAheadRows * rb : kNearAhead;
    };
    // Calls fn(u, c0, cn) for each unit u of [b, e) and chunk [c0, c0 + cn) of a run of n
    // positions, in the walk's order: one stream, each unit's run whole, unit after unit; two
    // streams (kStreamChunkRows), stream st's units [b + st·(e-b)/2, b + (st+1)·(e-b)/2) a chunk
    // at a time, the two streams' chunks alternating.
    const auto walk_units = [&](int64_t n, auto&& fn) {
      if (streams == 1) {
        for (int64_t u = b; u < e; ++u) fn(u, int64_t{0}, n);
        return;
      }
      const int64_t chunks = (n + kStreamChunkRows - 1) / kStreamChunkRows;
      const int64_t mid = b + (e - b) / 2;
      const int64_t steps = std::max(mid - b, e - mid) * chunks;
      for (int64_t k = 0; k < steps; ++k)
        for (const int64_t u0 : {b, mid}) {
          const int64_t u = u0 + k / chunks;
          if (u >= (u0 == b ? mid : e)) continue;
          const int64_t c0 = (k % chunks) * kStreamChunkRows;
          fn(u, c0, std::min(kStreamChunkRows, n - c0));
        }
    };
    for_page_runs(P, 0, n_kv, [&](int64_t t, int64_t n, int64_t p, int64_t off) {
      const int64_t ahead = ahead_of(kv.k, p);
      walk_units(n, [&](int64_t u, int64_t c0, int64_t cn) {
        int64_t g, h0, nq;
        unit_heads(u, &g, &h0, &nq);
        if (nq <= 0) return;
        const uint8_t* kr = reinterpret_cast<const uint8_t*>(kv.k[p]) + (g * P + off + c0) * rb;
        rk.kq(cn, kr, qrows + h0 * nt * hd, nt * nq, s.scale, sc.scores.data() + h0 * nt * ld + t + c0, ld, ahead);
      });
    });
    for (int64_t u = b; u < e; ++u) {
      int64_t g, h0, nq;
      unit_heads(u, &g, &h0, &nq);
      for (int64_t i = 0; i < nt; ++i) {
        const int64_t n_row = pos0 + i + 1;
        for (int64_t j = 0; j < nq; ++j) {
          float* sj = sc.scores.data() + (h0 * nt + i * nq + j) * ld;
          shape_scores(s, sj, n_row);
          const float mx = fns.max_f32(sj, n_row);
          const float sum = fns.exp_sub_sum(sj, n_row, mx);
          fns.scale_round_f16(sj, n_row, 1.0f / sum);
        }
        if (nq > 0) std::memset(out + i * qrow + h0 * hd, 0, static_cast<size_t>(nq * hd) * sizeof(float));
      }
    }
    for_page_runs(P, 0, n_kv, [&](int64_t t, int64_t n, int64_t p, int64_t off) {
      const int64_t n_first = pos0 + 1 - t;  // positions of this run the first token sees
      const int64_t ahead = ahead_of(kv.v, p);
      walk_units(n, [&](int64_t u, int64_t c0, int64_t cn) {
        int64_t g, h0, nq;
        unit_heads(u, &g, &h0, &nq);
        if (nq <= 0) return;
        const uint8_t* vr = reinterpret_cast<const uint8_t*>(kv.v[p]) + (g * P + off + c0) * rb;
        const float* su = sc.scores.data() + h0 * nt * ld + t + c0;
        float* ou = out + h0 * hd;
        for (int64_t i = 0; i < nt; ++i) {
          const int64_t m = std::min(cn, n_first + i - c0);  // the chunk's positions token i sees
          if (m > 0) rk.pv(m, vr, su + i * nq * ld, nq, ld, ou + i * qrow, work, ahead);
        }
      });
    });
  });
}

}  // namespace fulcrum
