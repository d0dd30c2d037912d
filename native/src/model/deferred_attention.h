// APEX's asynchronous overlap window (paper 004 §3.3): the CPU's attention of a layer-by-layer
// row, started in the step that stored the row's K and V for that layer and joined in the next
// step that continues the token, just before that layer's output projection. In between it runs
// on its own thread while the executor goes on with the rest of the step, the JS turn-around and
// the next step's earlier layers: the window the paper overlaps with the GPU's whole iteration.
//
// One thread runs the started attentions in start order; a sequence has at most one in flight
// (Model keeps the ticket). The kernel is the step's own (kernels/attention.h) on a one-thread
// pool: decode attention splits a row by heads only, so its bits do not depend on the thread
// count, and a deferred row equals the row attended within its step.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/attention.h"

namespace fulcrum {

class DeferredAttention {
 public:
  DeferredAttention() = default;
  ~DeferredAttention();
  DeferredAttention(const DeferredAttention&) = delete;
  DeferredAttention& operator=(const DeferredAttention&) = delete;

  // Sizes the job ring (one slot per sequence) and the scratch for contexts up to ctx; waits for
  // any attention still running first. Allocates; call where the placement is set.
  void reserve(const AttentionShape& largest, int64_t ctx, int max_in_flight);
  // Starts one query row's attention at position pos0 over `kv` (pages holding [0, pos0]); out
  // gets n_heads × head_dim floats. q, the page tables and out must stay put until wait().
  // Returns the ticket wait() takes. No allocation.
  uint64_t start(const AttentionShape& shape, const float* q, int64_t pos0, const KvPages& kv, float* out);
  // Blocks until the attention of `ticket` (and every one started before it) has finished;
  // rethrows what it threw. Ticket 0 returns at once.
  void wait(uint64_t ticket);
  void wait_all() { wait(next_ticket_ - 1); }

  // Totals since the model was loaded: attentions started; ns they ran on the thread; ns the
  // joins waited for them (0 when the attention was done before the next step needed it).
  uint64_t started() const { return next_ticket_ - 1; }
  uint64_t run_ns() const;
  uint64_t wait_ns() const { return wait_ns_; }

 private:
  struct Job {
    AttentionShape shape;
    const float* q = nullptr;
    int64_t pos0 = 0;
    KvPages kv;
    float* out = nullptr;
  };
  void loop();

  std::thread thread_;
  ThreadPool pool_{1};
  AttentionScratch scratch_;
  std::vector<Job> ring_;
  uint64_t next_ticket_ = 1;  // the next start's ticket (caller thread only)
  uint64_t wait_ns_ = 0;      // caller thread only
  mutable std::mutex mu_;
  std::condition_variable work_, done_;
  uint64_t queued_ = 0;       // tickets up to this one are in the ring (under mu_)
  uint64_t finished_ = 0;     // tickets up to this one have run (under mu_)
  uint64_t run_ns_ = 0;       // under mu_
  std::exception_ptr error_;  // the first job that threw (under mu_)
  bool stop_ = false;         // under mu_
};

}  // namespace fulcrum
