#include "kernels/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace fulcrum {
namespace {

// A decode matmul (or group of them, gemv_packed_group) whose weights are smaller than this runs
// on the calling thread alone (the 0.5B shape's K and V projections, when not grouped with Q:
// 64 KiB in Q4_0, 122 KiB in Q8_0). One thread reads it in ~15 µs;
// split over two it saves a few µs on a quiet machine, but the caller then waits for the other
// thread, and on a busy two-vCPU host that thread is often descheduled mid-chunk: measured there
// (0.5B Q4_0, 2 threads, load 2.8-6), attn_k 2897 -> 335 µs and attn_v 1883 -> 251 µs a token.
// It is one claim of the whole matrix: cut in decode_chunk's pieces for the pool's thread count
// (eight 16-row pieces at 2 threads), each GEMV call restarted its streams and prefetch, and the
// 0.5B K projection took 11-17 µs against 5-6 µs in one piece (bench.matmul, 128 x 896 Q4_0).
constexpr size_t kInlineDecodeBytes = 192 << 10;

// A decode GEMV group smaller than this is cut once, into one contiguous run of row groups per
// thread, rather than handed out in tapering claims: every claim starts its two weight streams
// and their prefetch over again at a new address, and a small matrix is over before they run at
// DRAM speed. bench.matmul, 2 threads, cold (256 MiB ring), medians of 8 alternating rounds on the
// 2-vCPU Zen 3: 896 x 896 Q4_0 39.4 -> 30.9 µs, 1152 x 896 (the 0.5B shape's Q, K and V) 39.8 ->
// 28.2 µs. Same-process A/B of the model at 2 threads, both load orders (the first model loaded
// runs a few % faster, so one order alone misleads): 0.5B Q4_0 +9.7 / +7.5 % (cut below 1 MiB),
// Q8_0 +10.0 / +1.4 %, Q4_K_M +11.4 / +16.1 % (cut below 2 MiB). Cutting the 1.3B shape's
// 2.36 MB matrices too measured no gain either way (0.94 / 1.06), so the bigger ones keep the
// claims, which also let a thread that starts late take less.
constexpr size_t kOneCutDecodeBytes = 2 << 20;

// Decode's chunk of [0, n) rows for nth threads in the GGUF-layout path (matmul_prepared): about
// 8 chunks a thread, a multiple of `unit`; one chunk at one thread.
int64_t decode_chunk(int64_t n, int64_t unit, int nth) {
  if (nth == 1) return n;
  const int64_t per = n / (nth * 8);
  return std::max(unit, (per + unit - 1) / unit * unit);
}

// The packed walks' claims of [0, n) row groups when a token's (or a few tokens') reads of every
// weight are what they wait on: gemv_packed_group's groups of kOneCutDecodeBytes or more, and a
// few tokens' tiles (matmul_packed). At one thread one claim; at nth a first claim of 3/4 of a
// thread's even share, then 1/nth of what is left a claim (half at 2 threads), down to `unit`: a
// thread streams long runs, and the last claims are small enough for both threads to end
// together. They were claims of n / (8·nth) at most, tapering by 1/(2·nth) of what was left (~20
// claims a matrix at 2 threads, chosen on a Zen 3 where claims shrinking from a full share
// measured no faster); every claim starts a walk's streams and its prefetch over, and on the
// 2-vCPU Intel Xeon (AMX) that cost ~10 % of the read rate. There, bench.matmul from a 256 MiB
// ring, 2 threads, medians of 201, three alternating rounds, GB/s: Q4_0 4864 x 896 28.2-29.2 ->
// 32.3-32.6, 896 x 4864 28.4-30.9 -> 31.8-32.4; Q5_0 4864 x 896 28.3-28.4 -> 31.0-33.2; Q4_K
// 4864 x 1024 25.5-25.9 -> 28.7-28.8, 2048 x 5632 26.1-28.1 -> 28.6-28.8; Q6_K 4864 x 1024
// 25.1-28.0 -> 29.3-30.1; Q8_0 level (29.3-31.8 -> 29.6-31.9). First claims of 1/4 or 7/16 of the
// matrix (2 threads) measured like 3/8, one cut per thread 0-10 % below. In the model (one-token
// steps after a 512-token prompt, medians of 100, alternating processes): 0.5B Q4_0 9.11 / 9.19 /
// 9.37 -> 8.76 / 8.59 / 9.24 ms, Q4_K_M 12.45 / 12.12 / 12.68 -> 12.38 / 11.99 / 11.71, 1.3B
// Q4_K 37.82 / 36.16 / 36.27 -> 35.37 / 34.93 / 35.39.
TaperedCounter decode_claims(int64_t n, int64_t unit, int nth) {
  if (nth <= 1) return TaperedCounter(n, n, unit, 1);
  const int64_t first = std::max(unit, n * 3 / (4 * static_cast<int64_t>(nth)) / unit * unit);
  return TaperedCounter(n, first, unit, nth);
}

}  // namespace

size_t converted_bytes(GgmlType t, int64_t cols, int64_t n_tokens) {
  const TypeTraits& tt = type_traits(t);
  return static_cast<size_t>(cols / tt.block_size) * tt.type_size * static_cast<size_t>(n_tokens);
}

void convert_rows(ThreadPool& pool, GgmlType t, const float* x, int64_t n_tokens, int64_t cols, void* dst) {
  const TypeTraits& tt = type_traits(t);
  const size_t stride = converted_bytes(t, cols, 1);
  uint8_t* out = static_cast<uint8_t*>(dst);
  if (n_tokens == 1 || pool.size() == 1) {
    for (int64_t r = 0; r < n_tokens; ++r) tt.quantize_row(x + r * cols, out + r * stride, cols);
    return;
  }
  pool.run([&](int ith, int nth) {
    int64_t b, e;
    ThreadPool::split(n_tokens, ith, nth, &b, &e);
    for (int64_t r = b; r < e; ++r) tt.quantize_row(x + r * cols, out + r * stride, cols);
  });
}

void matmul_prepared(ThreadPool& pool, GgmlType wtype, const void* w, int64_t rows, int64_t cols,
                     const void* act, int64_t n_tokens, float* y, int64_t y_stride, bool use_tiles, bool rows_as_decode) {
  const TypeTraits& tt = type_traits(wtype);
  const size_t w_stride = static_cast<size_t>(cols / tt.block_size) * tt.type_size;
  const size_t a_stride = converted_bytes(tt.vec_dot_type, cols, 1);
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  const uint8_t* ab = static_cast<const uint8_t*>(act);
  const VecDotFn dot = tt.vec_dot;
  // Rows per block: keep a block of weights around 32 KiB so it stays in L1/L2 while a block of
  // activation rows streams past it.
  const int64_t row_block = (std::max<int64_t>(16, std::min<int64_t>(64, static_cast<int64_t>((32 << 10) / std::max<size_t>(w_stride, 1)))) + 15) / 16 * 16;
  constexpr int64_t kTokenBlock = 8;
  // Tile path: per row chunk, token blocks of kTileTokenBlock rows (at most ~170 KB of Q8
  // activations for 4864 columns: they stay in L2) pass over the chunk's weights, which stay in
  // L1/L2; inside, each tile kernel call reuses a tile_rows × n weight slice across tile_cols
  // tokens from registers (or AMX tiles). Chunks are multiples of 16 rows and of tile_rows (4 for
  // the VNNI/AVX2 kernels, 64 for AMX, whose per-call activation repacking then serves all 64
  // rows), so only the matrix's last chunk can end in a partial tile: the kernel handles it.
  // rows_as_decode (speculative verification: it must keep exactly the tokens plain greedy
  // decoding would have produced): each row the bits that token decoded alone would have. Tiles
  // that give them stay; the others (the AVX2 tiles, AVX-512 Q4_K, and Q4_0 whose AVX-512 GEMV
  // groups its sums differently) give way to the decode kernels, one token at a time.
  rows_as_decode = rows_as_decode && n_tokens >= 2 && !(use_tiles && tt.gemm_tile && tt.tile_matches_decode);
  const GemmTileFn tile = use_tiles && n_tokens >= 2 && !rows_as_decode ? tt.gemm_tile : nullptr;
  const int64_t tile_r = tile ? tt.tile_rows : 1, tile_c = tile ? tt.tile_cols : 1;
  // Decode: the format's multi-row GEMV where it has one.
  const GemvFn gemv = use_tiles && (n_tokens == 1 || rows_as_decode) ? tt.gemv : nullptr;
  const int64_t gemv_r = gemv ? tt.gemv_rows : 1;
  constexpr int64_t kTileTokenBlock = 32;
  // Rows are handed out in chunks from a shared counter rather than split statically, so a
  // thread that runs late (preempted, or on a slower core) does less of the work instead of
  // holding everyone at the join. Chunks are multiples of 16 rows (threads never share a cache
  // line of y). Several tokens: one cache block each. Decode (read-bound): decode_chunk's ~8 a thread.
  const int nth_total = pool.size();
  const bool decode = n_tokens == 1 || rows_as_decode;
  const int64_t chunk = tile ? std::max(row_block, (tile_r + 15) / 16 * 16) : row_block;
  const int64_t unit = std::max<int64_t>(16, (gemv_r + 15) / 16 * 16);
  const bool inline_decode = n_tokens == 1 && static_cast<size_t>(rows) * w_stride < kInlineDecodeBytes;
  ChunkCounter counter(rows, inline_decode ? rows : decode ? decode_chunk(rows, unit, nth_total) : chunk);
  auto body = [&](int, int) {
    for (;;) {
      int64_t r0, r1;
      if (!counter.claim(&r0, &r1)) return;
      if (gemv) {
        for (int64_t t = 0; t < n_tokens; ++t)
          for (int64_t r = r0; r < r1; r += gemv_r)
            gemv(cols, y + t * y_stride + r, wb + r * w_stride, w_stride, static_cast<int>(std::min(gemv_r, r1 - r)), ab + t * a_stride);
        continue;
      }
      if (n_tokens == 1 || rows_as_decode) {
        for (int64_t t = 0; t < n_tokens; ++t)
          for (int64_t r = r0; r < r1; ++r) dot(cols, y + t * y_stride + r, wb + r * w_stride, ab + t * a_stride);
        continue;
      }
      if (tile) {
        for (int64_t tb = 0; tb < n_tokens; tb += kTileTokenBlock) {
          const int64_t te = std::min(n_tokens, tb + kTileTokenBlock);
          for (int64_t r = r0; r < r1; r += tile_r) {
            const int nr = static_cast<int>(std::min(tile_r, r1 - r));
            for (int64_t t = tb; t < te; t += tile_c) {
              tile(cols, y + t * y_stride + r, y_stride, wb + r * w_stride, w_stride, nr, ab + t * a_stride, a_stride,
                   static_cast<int>(std::min(tile_c, te - t)));
            }
          }
        }
        continue;
      }
      for (int64_t tb = 0; tb < n_tokens; tb += kTokenBlock) {
        const int64_t te = std::min(n_tokens, tb + kTokenBlock);
        for (int64_t r = r0; r < r1; ++r) {
          const uint8_t* wr = wb + r * w_stride;
          for (int64_t t = tb; t < te; ++t) dot(cols, y + t * y_stride + r, wr, ab + t * a_stride);
        }
      }
    }
  };
  if (inline_decode) body(0, 1);
  else pool.run(body);
}

void gemv_packed_group(ThreadPool& pool, const PackedGemv* items, int n) {
  if (n < 1 || n > kMaxGemvItems) throw std::invalid_argument("gemv_packed_group: 1 to " + std::to_string(kMaxGemvItems) + " matrices, got " + std::to_string(n));
  // Each matrix's arranged activations (repack.h): per calling thread and slot, grown once.
  thread_local std::vector<uint8_t> arranged[kMaxGemvItems];
  const uint8_t* act[kMaxGemvItems];
  size_t group_bytes[kMaxGemvItems];
  // Matrix i's row groups are [start[i], start[i] + groups[i]) of one index space, each start a
  // multiple of 16 rows' worth of groups, so no claim's boundary makes two threads share a cache
  // line of one y (the padding is claimed and skipped).
  int64_t start[kMaxGemvItems + 1], groups[kMaxGemvItems];
  int64_t unit = 1;
  size_t bytes = 0;
  start[0] = 0;
  for (int i = 0; i < n; ++i) {
    const PackedGemv& it = items[i];
    const quant::PackedFormat& pf = *it.pf;
    const TypeTraits& tt = type_traits(pf.type);
    const int64_t G = pf.group_rows;
    group_bytes[i] = static_cast<size_t>(it.cols / tt.block_size) * tt.type_size * static_cast<size_t>(G);
    groups[i] = it.rows / G;
    bytes += group_bytes[i] * static_cast<size_t>(groups[i]);
    const int64_t u = std::max<int64_t>(1, 16 / G);
    unit = std::max(unit, u);
    start[i + 1] = start[i] + (groups[i] + u - 1) / u * u;
    act[i] = static_cast<const uint8_t*>(it.act);
    if (pf.arrange_act) {
      // A layer's Q, K and V of one format read the same arranged row: arrange it once.
      int same = -1;
      for (int j = 0; j < i && same < 0; ++j)
        if (items[j].act == it.act && items[j].pf->arrange_act == pf.arrange_act && items[j].cols == it.cols) same = j;
      if (same >= 0) {
        act[i] = act[same];
        continue;
      }
      std::vector<uint8_t>& buf = arranged[i];
      const size_t need = static_cast<size_t>(it.cols / pf.chunk_cols) * pf.act_chunk_bytes;
      if (buf.size() < need) buf.resize(need);
      pf.arrange_act(it.act, buf.data(), it.cols);
      act[i] = buf.data();
    }
  }
  const int64_t total = start[n];
  const int nth = pool.size();
  auto run_range = [&](int64_t g0, int64_t g1) {
    for (int i = 0; i < n; ++i) {
      const int64_t b = std::max(g0, start[i]) - start[i], e = std::min(g1, start[i] + groups[i]) - start[i];
      if (b >= e) continue;
      const PackedGemv& it = items[i];
      it.pf->gemv(it.cols, it.y + b * it.pf->group_rows, static_cast<const uint8_t*>(it.w) + static_cast<size_t>(b) * group_bytes[i],
                  static_cast<int>(e - b), act[i]);
    }
  };
  if (nth == 1 || bytes < kInlineDecodeBytes) {
    run_range(0, total);
    return;
  }
  if (bytes < kOneCutDecodeBytes) {
    // Thread ith's run: its split of the whole units (no cache line of y split); the last unit
    // may be partial, so the runs end at `total`.
    const int64_t units = (total + unit - 1) / unit;
    pool.run([&](int ith, int nth_run) {
      int64_t u0, u1;
      ThreadPool::split(units, ith, nth_run, &u0, &u1);
      const int64_t g0 = std::min(total, u0 * unit), g1 = std::min(total, u1 * unit);
      if (g0 < g1) run_range(g0, g1);
    });
    return;
  }
  // Claims of at least 4 groups: the four-stream walks read four groups side by side, and every
  // claim starts a walk's streams and prefetch over (gemm_tile_dispatch.h: chunks of 3 groups of
  // 16 rows, one stream, were 141-148 tok/s against 170-173 on 0.5B Q4_0 at 2 threads; tapering
  // to 2 groups measured 187 -> 171 tok/s, same-process A/B).
  const int64_t taper_unit = std::max<int64_t>(4, unit);
  TaperedCounter counter = decode_claims(total, taper_unit, nth);
  pool.run([&](int, int) {
    int64_t g0, g1;
    while (counter.claim(&g0, &g1)) run_range(g0, g1);
  });
}

bool gemv_groups_enabled() {
  const char* e = std::getenv("FULCRUM_NO_GEMV_GROUPS");
  return !(e && e[0] == '1');
}

void matmul_packed(ThreadPool& pool, const quant::PackedFormat& pf, const void* w, int64_t rows, int64_t cols, const void* act,
                   int64_t n_tokens, float* y, int64_t y_stride) {
  if (n_tokens == 1) {
    const PackedGemv one{&pf, w, rows, cols, act, y};
    gemv_packed_group(pool, &one, 1);
    return;
  }
  const TypeTraits& tt = type_traits(pf.type);
  const int64_t G = pf.group_rows;
  const size_t group_bytes = static_cast<size_t>(cols / tt.block_size) * tt.type_size * static_cast<size_t>(G);
  const size_t src_stride = converted_bytes(tt.vec_dot_type, cols, 1);
  const size_t a_stride = pf.arrange_act ? static_cast<size_t>(cols / pf.chunk_cols) * pf.act_chunk_bytes : src_stride;
  // The arranged activations (repack.h): per calling thread, grown to the largest batch seen and
  // then reused, so steady-state prefill allocates nothing. Formats without an arrangement read
  // the converted rows in place.
  thread_local std::vector<uint8_t> arranged;
  const uint8_t* src = static_cast<const uint8_t*>(act);
  const uint8_t* ab = src;
  if (pf.arrange_act) {
    if (arranged.size() < a_stride * static_cast<size_t>(n_tokens)) arranged.resize(a_stride * static_cast<size_t>(n_tokens));
    uint8_t* dst = arranged.data();
    if (n_tokens >= 8 && pool.size() > 1) {
      pool.run([&](int ith, int nth) {
        int64_t b, e;
        ThreadPool::split(n_tokens, ith, nth, &b, &e);
        for (int64_t t = b; t < e; ++t) pf.arrange_act(src + t * src_stride, dst + t * a_stride, cols);
      });
    } else {
      for (int64_t t = 0; t < n_tokens; ++t) pf.arrange_act(src + t * src_stride, dst + t * a_stride, cols);
    }
    ab = dst;
  }
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  const int64_t groups = rows / G;
  // Work is handed out in chunks of whole groups from a shared counter (as in matmul_prepared):
  // multiples of 16 rows (16 / group_rows groups, at least one), so threads never share a cache
  // line of y; about pf.claim_bytes of weights per chunk, which stay in L1/L2 while the token
  // blocks pass over them.
  const int64_t unit = std::max<int64_t>(1, 16 / G);
  // Few tokens may have their own tile (PackedFormat::few_tile), with the same bits.
  const bool few = n_tokens < pf.few_tokens;
  const auto tile = few ? pf.few_tile : pf.tile;
  const int64_t tc = few ? pf.few_tile_cols : pf.tile_cols;
  // Row group g over tokens [tb, te), tc tokens a tile. Every output is one tile's sum over all
  // columns, so how groups and tokens are handed out never changes a bit.
  auto tiles = [&](int64_t g, int64_t tb, int64_t te) {
    for (int64_t t = tb; t < te; t += tc)
      tile(cols, y + t * y_stride + g * G, y_stride, wb + static_cast<size_t>(g) * group_bytes, ab + t * a_stride, a_stride,
           static_cast<int>(std::min(tc, te - t)));
  };
  // Token blocks of up to 32 rows whose arranged activations stay within ~256 KiB (half of a Zen 3
  // L2): every row group of a chunk re-reads them.
  const int64_t token_block = std::max<int64_t>(tc, std::min<int64_t>(32, static_cast<int64_t>((256 << 10) / a_stride)) / tc * tc);
  if (n_tokens <= token_block) {
    // A few tokens, one token block (a speculative step's drafts, a batch of decoding sequences,
    // a prompt's last piece), still read every weight once, and that read is what they wait on:
    // row groups are handed out as the decode GEMV hands them out, in tapering claims of long
    // contiguous runs (decode_claims), not in the 32 KiB chunks below, which alternate between
    // the threads (~145 claims of one shared counter on the 0.5B FFN). bench.matmul 4864 x 896,
    // 2 threads, cold (256 MiB ring), alternating runs on the Zen 4: Q8_0 2 tokens 167 -> 141 µs,
    // 3 174 -> 138, 5 182-205 -> 148-171, 8 206-251 -> 167-177, 16 381 -> 300-325, 32 577 -> 506-533;
    // Q4_0 2 tokens 91 -> 77, 5 104 -> 79-95, 8 135 -> 116-121, 32 and 48 level; Q4_K (4864 x 1024)
    // 2 tokens 115 -> 90-104, 5 190 -> 166, 8 266 -> 241, 16 and 32 level (its tiles are
    // compute-bound there). One thread walks the same groups in the same order either way (level).
    const int nth = pool.size();
    const int64_t taper_unit = std::max<int64_t>(4, unit);
    TaperedCounter claims = decode_claims(groups, taper_unit, nth);
    pool.run([&](int, int) {
      int64_t g0, g1;
      while (claims.claim(&g0, &g1))
        for (int64_t g = g0; g < g1; ++g) tiles(g, 0, n_tokens);
    });
    return;
  }
  // Claims of about pf.claim_bytes of weights (at most 16 groups), which every token block reads
  // while they stay in L1 or L2 (repack.h).
  const int64_t group_block =
      std::max<int64_t>(unit, std::min<int64_t>(16, static_cast<int64_t>((few ? pf.few_claim_bytes : pf.claim_bytes) / group_bytes)) / unit * unit);
  ChunkCounter counter(groups, group_block);
  pool.run([&](int, int) {
    for (;;) {
      int64_t g0, g1;
      if (!counter.claim(&g0, &g1)) return;
      for (int64_t tb = 0; tb < n_tokens; tb += token_block) {
        const int64_t te = std::min(n_tokens, tb + token_block);
        for (int64_t g = g0; g < g1; ++g) tiles(g, tb, te);
      }
    }
  });
}

void matmul(ThreadPool& pool, GgmlType wtype, const void* w, int64_t rows, int64_t cols, const float* x,
            int64_t n_tokens, float* y, Scratch& scratch, bool use_tiles) {
  const TypeTraits& tt = type_traits(wtype);
  if (!tt.supported || !tt.vec_dot) {
    throw std::invalid_argument(std::string("matmul: weight type ") + (tt.name ? tt.name : std::to_string(static_cast<int>(wtype))) + " is not supported");
  }
  if (cols % tt.block_size != 0) {
    throw std::invalid_argument("matmul: cols " + std::to_string(cols) + " is not a multiple of the " + tt.name + " block size " + std::to_string(tt.block_size));
  }
  const TypeTraits& at = type_traits(tt.vec_dot_type);
  if (!at.quantize_row) throw std::invalid_argument(std::string("matmul: activation format of ") + tt.name + " has no converter");
  const void* act = x;
  if (tt.vec_dot_type != GgmlType::F32) {
    void* buf = scratch.reserve(converted_bytes(tt.vec_dot_type, cols, n_tokens));
    convert_rows(pool, tt.vec_dot_type, x, n_tokens, cols, buf);
    act = buf;
  }
  matmul_prepared(pool, wtype, w, rows, cols, act, n_tokens, y, rows, use_tiles);
}

}  // namespace fulcrum
