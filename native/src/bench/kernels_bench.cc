#include "bench/kernels_bench.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "bench/buffer.h"
#include "bench/clock.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "model/kv_cache.h"

namespace fulcrum {
namespace bench {
namespace {

// Deterministic values in [-1, 1): benchmark inputs only need to be ordinary numbers.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed | 1) {}
  float next() {
    s_ ^= s_ << 13;
    s_ ^= s_ >> 7;
    s_ ^= s_ << 17;
    return static_cast<float>(static_cast<double>(s_ >> 40) / static_cast<double>(1ull << 23)) - 1.0f;
  }

 private:
  uint64_t s_;
};

constexpr size_t kAlign = 4096;
size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// How many copies of `one` bytes fill `ring_bytes` (at least one).
int copies_for(size_t one, size_t ring_bytes) {
  if (ring_bytes <= one) return 1;
  const size_t c = ring_bytes / one;
  return static_cast<int>(std::min<size_t>(c, 1u << 20));
}

// Fills copies [1, n) of the ring with copy 0.
void replicate(BigBuffer& ring, size_t stride, int n, size_t bytes) {
  for (int c = 1; c < n; ++c) std::memcpy(ring.data() + static_cast<size_t>(c) * stride, ring.data(), bytes);
}

// Runs warm-ups + timed runs of step(copy index) for each thread count on the engine's pool.
// Always: the disturber runs through all of them. Interleaved: after the warm-ups, blocks of
// kBlock runs alternate without and with the transfer until each side has plan.runs.
template <typename Step>
void time_kernel(const std::vector<int>& thread_counts, const RunPlan& plan, Disturber* disturber, DisturbMode mode,
                 const CancelToken& cancel, int copies, KernelBenchResult* out, Step step) {
  constexpr int kBlock = 3;
  if (!disturber) mode = DisturbMode::None;
  if (mode != DisturbMode::None) {
    out->disturbed = true;
    out->transfer_kind = disturber->kind();
  }
  bool running = false;
  auto start = [&] {
    disturber->start();
    running = true;
  };
  auto stop = [&] {
    const TransferTotals t = disturber->stop();
    running = false;
    out->transfer.bytes += t.bytes;
    out->transfer.ns += t.ns;
  };
  try {
    if (mode == DisturbMode::Always) start();
    int copy = 0;
    // One run; records wall and calling-thread CPU time into `into` (or nowhere for warm-ups).
    auto timed = [&](ThreadPool& pool, ThreadSamples* into) {
      const int64_t c0 = thread_cpu_ns();
      const int64_t t0 = now_ns();
      step(pool, copy);
      const int64_t t1 = now_ns();
      const int64_t c1 = thread_cpu_ns();
      copy = copy + 1 == copies ? 0 : copy + 1;
      if (into) {
        into->ns.push_back(t1 - t0);
        into->cpu_ns.push_back(c1 - c0);
      }
    };
    for (int threads : thread_counts) {
      ThreadPool pool(threads);
      ThreadSamples alone, busy;
      alone.threads = busy.threads = threads;
      for (ThreadSamples* t : {&alone, &busy}) {
        t->ns.reserve(static_cast<size_t>(plan.runs));
        t->cpu_ns.reserve(static_cast<size_t>(plan.runs));
      }
      for (int r = 0; r < plan.warmups && !cancel.cancelled(); ++r) timed(pool, nullptr);
      if (mode != DisturbMode::Interleaved) {
        for (int r = 0; r < plan.runs && !cancel.cancelled(); ++r) timed(pool, &alone);
      } else {
        bool with = false;
        while ((static_cast<int>(alone.ns.size()) < plan.runs || static_cast<int>(busy.ns.size()) < plan.runs) &&
               !cancel.cancelled()) {
          ThreadSamples& into = with ? busy : alone;
          if (static_cast<int>(into.ns.size()) < plan.runs) {
            if (with) {
              start();
              timed(pool, nullptr);  // one untimed run while the transfer ramps up
            }
            for (int k = 0; k < kBlock && static_cast<int>(into.ns.size()) < plan.runs; ++k) timed(pool, &into);
            if (with) stop();
          }
          with = !with;
        }
        out->contended_by_threads.push_back(std::move(busy));
      }
      out->by_threads.push_back(std::move(alone));
    }
  } catch (...) {
    if (running) disturber->stop();
    throw;
  }
  if (running) stop();
}

void check_threads(const std::vector<int>& thread_counts) {
  if (thread_counts.empty()) throw std::runtime_error("kernel bench: no thread counts");
  for (int t : thread_counts)
    if (t < 1 || t > 1024) throw std::runtime_error("kernel bench: thread count out of range");
}

}  // namespace

KernelBenchResult bench_matmul(const MatmulBenchSpec& spec, const std::vector<int>& thread_counts,
                               const RunPlan& plan, Disturber* disturber, DisturbMode mode,
                               const CancelToken& cancel) {
  check_threads(thread_counts);
  const TypeTraits& tt = type_traits(spec.type);
  const std::string name = tt.name ? tt.name : "type " + std::to_string(static_cast<int>(spec.type));
  if (!tt.supported || !tt.vec_dot || !tt.quantize_row) throw std::runtime_error(name + ": no CPU matmul kernel in this build");
  if (spec.rows < 1 || spec.cols < 1 || spec.tokens < 1) throw std::runtime_error("matmul bench: rows, cols and tokens must be positive");
  if (spec.cols % tt.block_size != 0) {
    throw std::runtime_error("matmul bench: cols " + std::to_string(spec.cols) + " is not a multiple of " + name +
                             "'s block size " + std::to_string(tt.block_size));
  }
  const size_t row_b = row_bytes(spec.type, spec.cols);
  const size_t matrix_b = row_b * static_cast<size_t>(spec.rows);
  const size_t stride = round_up(matrix_b, kAlign);
  const int copies = copies_for(stride, spec.ring_bytes);
  BigBuffer ring(stride * static_cast<size_t>(copies));
  const quant::PackedFormat* packed = quant::packs(spec.type, spec.rows, spec.cols) ? quant::packed_format(spec.type) : nullptr;

  // A few distinct random rows, quantized once and tiled down the matrix: kernel speed does not
  // depend on the values, and quantizing a whole large matrix would dominate the profile's time.
  const int64_t distinct = std::min<int64_t>(spec.rows, 16);
  {
    Rng rng(0x9e3779b97f4a7c15ull);
    std::vector<float> row(static_cast<size_t>(spec.cols));
    for (int64_t r = 0; r < distinct; ++r) {
      for (float& v : row) v = rng.next();
      tt.quantize_row(row.data(), ring.data() + static_cast<size_t>(r) * row_b, spec.cols);
    }
    for (int64_t r = distinct; r < spec.rows; ++r)
      std::memcpy(ring.data() + static_cast<size_t>(r) * row_b, ring.data() + static_cast<size_t>(r % distinct) * row_b, row_b);
    // The layout the model's load copy gives such a matrix (quant/packed/repack.h), so the profile times
    // the kernels the model runs.
    if (packed) {
      std::vector<uint8_t> group(row_b * static_cast<size_t>(packed->group_rows));
      quant::repack_rows(*packed, ring.data(), spec.rows, spec.cols, group.data());
    }
    replicate(ring, stride, copies, matrix_b);
  }
  std::vector<float> x(static_cast<size_t>(spec.cols * spec.tokens));
  {
    Rng rng(12345);
    for (float& v : x) v = rng.next();
  }
  std::vector<float> y(static_cast<size_t>(spec.rows * spec.tokens));
  Scratch scratch;
  scratch.reserve(converted_bytes(tt.vec_dot_type, spec.cols, spec.tokens));

  KernelBenchResult out;
  out.bytes_per_run = matrix_b;
  out.flops_per_run = 2.0 * static_cast<double>(spec.rows) * static_cast<double>(spec.cols) * static_cast<double>(spec.tokens);
  out.copies = copies;
  time_kernel(thread_counts, plan, disturber, mode, cancel, copies, &out, [&](ThreadPool& pool, int copy) {
    const uint8_t* w = ring.data() + static_cast<size_t>(copy) * stride;
    if (packed) {
      convert_rows(pool, tt.vec_dot_type, x.data(), spec.tokens, spec.cols, scratch.act.data());
      matmul_packed(pool, *packed, w, spec.rows, spec.cols, scratch.act.data(), spec.tokens, y.data(), spec.rows);
    } else {
      matmul(pool, spec.type, w, spec.rows, spec.cols, x.data(), spec.tokens, y.data(), scratch);
    }
  });
  keep(y[0]);
  return out;
}

double attention_cache_bytes(double kv_len, double kv_heads, double head_dim, KvFormat format) {
  const double page = static_cast<double>(KvCache::kPageTokens);
  // kv_row_bytes per value (every format stores whole rows of 32), in doubles so no size overflows here.
  const double row_bytes = head_dim * (static_cast<double>(kv_row_bytes(format, 32)) / 32.0);
  return 2.0 * std::ceil(kv_len / page) * page * kv_heads * row_bytes;
}

KernelBenchResult bench_attention(const AttentionBenchSpec& spec, const std::vector<int>& thread_counts,
                                  const RunPlan& plan, Disturber* disturber, DisturbMode mode,
                                  const CancelToken& cancel) {
  check_threads(thread_counts);
  if (spec.kv_len < 1 || spec.heads < 1 || spec.kv_heads < 1 || spec.head_dim < 1)
    throw std::runtime_error("attention bench: kvLen, heads, kvHeads and headDim must be positive");
  if (spec.heads % spec.kv_heads != 0)
    throw std::runtime_error("attention bench: heads must be a multiple of kvHeads");
  const std::string refusal = kv_format_refusal(spec.format, spec.head_dim);
  if (!refusal.empty()) throw std::runtime_error("attention bench: " + refusal);
  AttentionShape shape;
  shape.n_heads = spec.heads;
  shape.n_kv_heads = spec.kv_heads;
  shape.head_dim = spec.head_dim;
  shape.scale = 1.0f / std::sqrt(static_cast<float>(spec.head_dim));

  // One copy = one layer's cache as the model lays it out (KvCache): whole pages of
  // kPageTokens positions, each page [kv_heads][page][head_dim], the K pages then the V pages.
  // The kernel addresses every page, the last one too, as a whole page (head g at g · page rows),
  // so a copy holds whole pages even where kv_len ends inside one: sized by positions instead,
  // the last page's upper heads were read past the copy's end (a crash at the ring's end).
  const int64_t page = KvCache::kPageTokens;
  const int64_t row_bytes = kv_row_bytes(spec.format, spec.head_dim);
  const int64_t n_pages = (spec.kv_len + page - 1) / page;
  const size_t cache_b = static_cast<size_t>(attention_cache_bytes(static_cast<double>(spec.kv_len), static_cast<double>(spec.kv_heads),
                                                                   static_cast<double>(spec.head_dim), spec.format)) / 2;  // K's pages (V's the same)
  const size_t one = round_up(2 * cache_b, kAlign);
  const int copies = copies_for(one, spec.ring_bytes);
  BigBuffer ring(one * static_cast<size_t>(copies));
  {
    // A tile of up to 256 random rows in the cache's format, repeated: softmax then sees
    // ordinary, varied scores.
    Rng rng(777);
    const size_t rows = 2 * cache_b / static_cast<size_t>(row_bytes), tile_rows = std::min<size_t>(256, rows);
    std::vector<float> x(static_cast<size_t>(spec.head_dim));
    for (size_t r = 0; r < tile_rows; ++r) {
      for (float& e : x) e = rng.next();
      uint8_t* dst = ring.data() + r * static_cast<size_t>(row_bytes);
      if (spec.format == KvFormat::Q8_0) type_traits(GgmlType::Q8_0).quantize_row(x.data(), dst, spec.head_dim);
      else for (int64_t d = 0; d < spec.head_dim; ++d) reinterpret_cast<uint16_t*>(dst)[d] = fp32_to_fp16(x[static_cast<size_t>(d)]);
    }
    const size_t tile = tile_rows * static_cast<size_t>(row_bytes);
    for (size_t off = tile; off < 2 * cache_b; off += tile) std::memcpy(ring.data() + off, ring.data(), std::min(tile, 2 * cache_b - off));
    replicate(ring, one, copies, 2 * cache_b);
  }
  std::vector<float> q(static_cast<size_t>(spec.tokens * spec.heads * spec.head_dim));
  {
    Rng rng(99);
    for (float& v : q) v = rng.next();
  }
  std::vector<float> o(q.size());
  int max_threads = 1;
  for (int t : thread_counts) max_threads = std::max(max_threads, t);
  AttentionScratch scratch;
  scratch.reserve(shape, spec.kv_len, spec.tokens, max_threads);
  std::vector<const uint16_t*> k_pages(static_cast<size_t>(copies * n_pages)), v_pages(k_pages.size());
  const size_t page_b = static_cast<size_t>(page * spec.kv_heads * row_bytes);
  for (int c = 0; c < copies; ++c) {
    const uint8_t* k = ring.data() + static_cast<size_t>(c) * one;
    const uint8_t* v = k + cache_b;
    for (int64_t p = 0; p < n_pages; ++p) {
      k_pages[static_cast<size_t>(c * n_pages + p)] = reinterpret_cast<const uint16_t*>(k + static_cast<size_t>(p) * page_b);
      v_pages[static_cast<size_t>(c * n_pages + p)] = reinterpret_cast<const uint16_t*>(v + static_cast<size_t>(p) * page_b);
    }
  }

  KernelBenchResult out;
  // What a run reads: kv_len positions of K and of V (not the last page's unused tail).
  out.bytes_per_run = 2 * static_cast<size_t>(spec.kv_len * spec.kv_heads * row_bytes);
  // q·k and p·v: 2 FLOPs per element each, per query head and token (each token's causal range).
  const double positions = static_cast<double>(spec.tokens) * static_cast<double>(spec.kv_len) -
                           static_cast<double>(spec.tokens) * static_cast<double>(spec.tokens - 1) / 2.0;
  out.flops_per_run = 4.0 * static_cast<double>(spec.heads) * positions * static_cast<double>(spec.head_dim);
  out.copies = copies;
  time_kernel(thread_counts, plan, disturber, mode, cancel, copies, &out, [&](ThreadPool& pool, int copy) {
    const KvPages kv{k_pages.data() + copy * n_pages, v_pages.data() + copy * n_pages, page, spec.format};
    attention(pool, shape, q.data(), spec.tokens, spec.kv_len - spec.tokens, kv, o.data(), scratch);
  });
  keep(o[0]);
  return out;
}

}  // namespace bench
}  // namespace fulcrum
