#include "model/deferred_attention.h"

#include <chrono>
#include <stdexcept>

namespace fulcrum {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

DeferredAttention::~DeferredAttention() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DeferredAttention::reserve(const AttentionShape& largest, int64_t ctx, int max_in_flight) {
  if (next_ticket_ > 1) wait_all();
  {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = nullptr;
  }
  scratch_.reserve(largest, ctx, 1, 1);
  ring_.assign(static_cast<size_t>(max_in_flight < 1 ? 1 : max_in_flight), Job{});
}

uint64_t DeferredAttention::start(const AttentionShape& shape, const float* q, int64_t pos0, const KvPages& kv, float* out) {
  if (ring_.empty()) throw std::logic_error("deferred attention: start before reserve");
  const uint64_t ticket = next_ticket_;
  {
    std::unique_lock<std::mutex> lock(mu_);
    // A full ring (more rows in flight than sequences) cannot happen while each sequence holds
    // at most one; waiting for the oldest keeps it correct if that ever changes.
    done_.wait(lock, [&] { return ticket - finished_ <= ring_.size(); });
    ring_[static_cast<size_t>(ticket % ring_.size())] = Job{shape, q, pos0, kv, out};
    queued_ = ticket;
  }
  ++next_ticket_;
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  work_.notify_one();
  return ticket;
}

void DeferredAttention::wait(uint64_t ticket) {
  if (ticket == 0) return;
  std::unique_lock<std::mutex> lock(mu_);
  if (finished_ < ticket) {
    const int64_t t0 = now_ns();
    done_.wait(lock, [&] { return finished_ >= ticket; });
    wait_ns_ += static_cast<uint64_t>(now_ns() - t0);
  }
  if (error_) std::rethrow_exception(error_);
}

uint64_t DeferredAttention::run_ns() const {
  std::lock_guard<std::mutex> lock(mu_);
  return run_ns_;
}

void DeferredAttention::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_.wait(lock, [&] { return stop_ || queued_ > finished_; });
    if (queued_ == finished_ && stop_) return;
    const Job job = ring_[static_cast<size_t>((finished_ + 1) % ring_.size())];
    lock.unlock();
    const int64_t t0 = now_ns();
    std::exception_ptr err;
    try {
      attention(pool_, job.shape, job.q, 1, job.pos0, job.kv, job.out, scratch_);
    } catch (...) {
      err = std::current_exception();
    }
    const int64_t t1 = now_ns();
    lock.lock();
    run_ns_ += static_cast<uint64_t>(t1 - t0);
    if (err && !error_) error_ = err;
    ++finished_;
    done_.notify_all();
  }
}

}  // namespace fulcrum
