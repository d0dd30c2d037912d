#include "exec/executor.h"

#include <algorithm>
#include <chrono>

namespace fulcrum {

const char* lane_name(Lane l) {
  switch (l) {
    case Lane::Cpu: return "cpu";
    case Lane::Device: return "device";
    case Lane::ToDevice: return "h2d";
    case Lane::ToHost: return "d2h";
  }
  return "?";
}

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

LaneDeps HazardTracker::add(int32_t index, Lane lane, const std::vector<int>& reads, const std::vector<int>& writes,
                            std::vector<Lane>* op_lanes) {
  LaneDeps d;
  auto need = [&](int32_t j) {
    if (j < 0) return;
    const int l = static_cast<int>((*op_lanes)[static_cast<size_t>(j)]);
    if (l == static_cast<int>(lane)) return;  // same lane: list order already orders them
    d.dep[l] = std::max(d.dep[l], j);
  };
  for (int r : reads) need(last_writer_[static_cast<size_t>(r)]);       // read after write
  for (int w : writes) {
    need(last_writer_[static_cast<size_t>(w)]);                          // write after write
    for (int32_t j : readers_[static_cast<size_t>(w)]) need(j);          // write after read
  }
  for (int r : reads) readers_[static_cast<size_t>(r)].push_back(index);
  for (int w : writes) {
    last_writer_[static_cast<size_t>(w)] = index;
    readers_[static_cast<size_t>(w)].clear();
  }
  op_lanes->push_back(lane);
  return d;
}

Executor::Executor() {
  for (auto& d : done_) d.store(-1);
  for (auto& r : running_) r.store(-1);
}

Executor::~Executor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (int l = 1; l < kLanes; ++l)
    if (threads_[l].joinable()) threads_[l].join();
}

void Executor::wait_for(int lane, int32_t index) {
  for (int spin = 0; spin < 2000; ++spin) {
    if (done_[lane].load(std::memory_order_acquire) >= index || failed_.load(std::memory_order_relaxed)) return;
    // Sharing cores: an op its lane has not started may be far off; sleep at once (see run()).
    if (share_cores_ && running_[lane].load(std::memory_order_acquire) < index) break;
    if (spin > 64) std::this_thread::yield();
  }
  std::unique_lock<std::mutex> lock(mu_);
  waiters_.fetch_add(1);
  progress_.wait(lock, [&] { return done_[lane].load() >= index || failed_.load(); });
  waiters_.fetch_sub(1);
}

void Executor::run_lane(int lane) {
  for (int32_t i = 0; i < n_; ++i) {
    if (static_cast<int>(lanes_[i]) != lane) continue;
    if (failed_.load(std::memory_order_relaxed)) break;
    bool ran = false;
    if (!skip_ || !skip_(ctx_, i)) {
      for (int l = 0; l < kLanes; ++l)
        if (deps_[i].dep[l] >= 0) wait_for(l, deps_[i].dep[l]);
      if (failed_.load(std::memory_order_relaxed)) break;
      try {
        running_[lane].store(i, std::memory_order_release);
        if (timing_) start_ns_[i] = steady_ns();
        exec_(ctx_, i);
        if (timing_) end_ns_[i] = steady_ns();
        ran = true;
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = std::current_exception();
        failed_.store(true);
        progress_.notify_all();
        break;
      }
    }
    if (!ran && timing_) start_ns_[i] = end_ns_[i] = 0;
    done_[lane].store(i);  // seq_cst: pairs with waiters_ (no lost wake-up)
    if (waiters_.load() > 0) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        progress_.notify_all();
      }
      // Sharing cores: the woken lane may be queued on this lane's core; let it start.
      if (share_cores_) std::this_thread::yield();
    }
  }
  // A lane that stopped early lets nobody wait on it forever: failed_ wakes every waiter.
}

void Executor::lane_loop(int lane) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    if (lane_used_[lane]) run_lane(lane);
    std::lock_guard<std::mutex> lock(mu_);
    if (--active_lanes_ == 0) progress_.notify_all();
  }
}

void Executor::run(int32_t n, const Lane* lanes, const LaneDeps* deps, ExecFn exec, SkipFn skip, void* ctx, bool timing,
                   int64_t* start_ns, int64_t* end_ns, bool share_cores) {
  n_ = n;
  share_cores_ = share_cores;
  lanes_ = lanes;
  deps_ = deps;
  exec_ = exec;
  skip_ = skip;
  ctx_ = ctx;
  timing_ = timing;
  start_ns_ = start_ns;
  end_ns_ = end_ns;
  error_ = nullptr;
  failed_.store(false);
  bool others = false;
  for (int l = 0; l < kLanes; ++l) {
    done_[l].store(-1);
    running_[l].store(-1);
    lane_used_[l] = false;
  }
  for (int32_t i = 0; i < n; ++i) lane_used_[static_cast<int>(lanes[i])] = true;
  for (int l = 1; l < kLanes; ++l) others = others || lane_used_[l];
  if (others) {
    std::lock_guard<std::mutex> lock(mu_);
    for (int l = 1; l < kLanes; ++l)
      if (!threads_[l].joinable()) threads_[l] = std::thread([this, l] { lane_loop(l); });
    active_lanes_ = kLanes - 1;
    ++generation_;
  }
  if (others) wake_.notify_all();
  run_lane(0);
  if (others) {
    std::unique_lock<std::mutex> lock(mu_);
    waiters_.fetch_add(1);
    progress_.wait(lock, [&] { return active_lanes_ == 0; });
    waiters_.fetch_sub(1);
  }
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

}  // namespace fulcrum
