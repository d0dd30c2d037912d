#include "bench/team.h"

#include <stdexcept>

namespace fulcrum {
namespace bench {

Team::Team(int threads) {
  if (threads < 1 || threads > 1024) throw std::runtime_error("bench team: thread count out of range");
  workers_.reserve(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) workers_.emplace_back([this, t] { loop(t); });
}

Team::~Team() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
  }
  start_cv_.notify_all();
  for (std::thread& w : workers_) w.join();
}

void Team::run(const std::function<void(int)>& job) {
  std::unique_lock<std::mutex> lock(mu_);
  job_ = &job;
  pending_ = size();
  ++generation_;
  start_cv_.notify_all();
  done_cv_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void Team::loop(int tid) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return quit_ || generation_ != seen; });
      if (quit_) return;
      seen = generation_;
      job = job_;
    }
    (*job)(tid);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

}  // namespace bench
}  // namespace fulcrum
