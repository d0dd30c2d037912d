// Microbenchmarks of the engine's real CPU kernels (kernels/matmul.h, kernels/attention.h) on
// synthetic data of the shapes the profiler asks for, on the engine's ThreadPool, optionally
// while a Disturber runs a concurrent transfer.
//
// Working sets: decode GEMV and attention are memory-bound and, in inference, stream weights
// and KV from DRAM (a model's layers far exceed the last-level cache). A single benchmark
// matrix would sit in the LLC after the first run, so the data are replicated `ring_bytes`
// worth and consecutive runs walk the copies: every run reads from DRAM, as decode does.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bench/cancel.h"
#include "bench/disturb.h"
#include "bench/memory.h"
#include "ggml_types.h"
#include "kernels/attention.h"

namespace fulcrum {
namespace bench {

struct KernelBenchResult {
  std::vector<ThreadSamples> by_threads;
  // Interleaved mode: the runs taken while the transfer ran (by_threads holds those without).
  std::vector<ThreadSamples> contended_by_threads;
  uint64_t bytes_per_run = 0;  // weight (or KV) bytes one run reads
  double flops_per_run = 0;
  int copies = 1;              // data copies in the ring
  bool disturbed = false;
  std::string transfer_kind;
  TransferTotals transfer;     // totals of the concurrent transfer, when disturbed
};

// How a Disturber is used: none; running through every run; or interleaved, alternating blocks
// of runs without and with the transfer, so both sides see the same machine state (other load
// on a shared machine drifts over seconds) and the ratio of their medians is the slowdown.
enum class DisturbMode { None, Always, Interleaved };

struct MatmulBenchSpec {
  GgmlType type = GgmlType::F32;
  int64_t rows = 0, cols = 0, tokens = 1;
  size_t ring_bytes = 0;  // 0: one copy
};

// Throws std::runtime_error when the type has no kernel ("Q6_K: no vec_dot kernel") or the
// shape does not fit the format's block size.
KernelBenchResult bench_matmul(const MatmulBenchSpec& spec, const std::vector<int>& thread_counts,
                               const RunPlan& plan, Disturber* disturber, DisturbMode mode,
                               const CancelToken& cancel);

struct AttentionBenchSpec {
  int64_t kv_len = 0, heads = 0, kv_heads = 0, head_dim = 0;
  // Query tokens per call, at the last `tokens` positions of kv_len (a speculative step's
  // verification, or a prompt's last block).
  int64_t tokens = 1;
  size_t ring_bytes = 0;
  KvFormat format = KvFormat::F16;
};

// Bytes of one copy of bench_attention's cache: K then V of one layer in whole KV pages (the
// kernel addresses the last page as a whole page), in `format`. Double, so the caller can check a
// size from JS numbers before it overflows.
double attention_cache_bytes(double kv_len, double kv_heads, double head_dim, KvFormat format);

// One decode step (one query token attending to kv_len positions) of one layer's heads.
KernelBenchResult bench_attention(const AttentionBenchSpec& spec, const std::vector<int>& thread_counts,
                                  const RunPlan& plan, Disturber* disturber, DisturbMode mode,
                                  const CancelToken& cancel);

}  // namespace bench
}  // namespace fulcrum
