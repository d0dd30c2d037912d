// A fixed team of worker threads for the memory benchmarks: started once per measurement, then
// released together for each timed run, so a run's time holds no thread creation. (The kernel
// benchmarks use the engine's own ThreadPool instead: they measure what inference runs.)
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace fulcrum {
namespace bench {

class Team {
 public:
  explicit Team(int threads);
  ~Team();
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;

  int size() const { return static_cast<int>(workers_.size()); }
  // Runs job(tid) on every worker and returns when all have finished.
  void run(const std::function<void(int)>& job);

 private:
  void loop(int tid);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool quit_ = false;
};

}  // namespace bench
}  // namespace fulcrum
