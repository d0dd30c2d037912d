// Runs a step's compiled op list on lanes: the CPU pool (the calling thread), the device queue,
// host->device copies and device->host copies. Each lane runs its ops in list order on its own
// thread, so a CPU op and a device op of the same step really overlap. Events between lanes are
// the ops' dependencies: op i waits until, for every other lane L, L has finished the op
// dep[L] (the latest op of L that i reads from or overwrites), which compile() derives from the
// ops' read and write sets. Within a lane, list order is the only order.
//
// Completion is one counter per lane (the index of its last finished op): a lane finishes its
// ops in increasing index order, so "op j is done" is "lane(j)'s counter >= j". Waiting spins
// briefly (ops are often microseconds apart) and then sleeps on a condition variable (see run's
// share_cores for the exception).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace fulcrum {

enum class Lane : int8_t { Cpu = 0, Device = 1, ToDevice = 2, ToHost = 3 };
constexpr int kLanes = 4;
const char* lane_name(Lane l);

struct LaneDeps {
  int32_t dep[kLanes] = {-1, -1, -1, -1};
};

// Builds dependencies from read/write sets (resource ids are small integers the caller defines).
class HazardTracker {
 public:
  explicit HazardTracker(int n_resources) : last_writer_(static_cast<size_t>(n_resources), -1), readers_(static_cast<size_t>(n_resources)) {}
  // Registers op `index` on `lane` reading `reads` and writing `writes`; returns its cross-lane deps.
  LaneDeps add(int32_t index, Lane lane, const std::vector<int>& reads, const std::vector<int>& writes, std::vector<Lane>* op_lanes);

 private:
  std::vector<int32_t> last_writer_;
  std::vector<std::vector<int32_t>> readers_;  // since the last write
};

class Executor {
 public:
  Executor();
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Runs ops [0, n): exec(ctx, i) runs op i on its lane's thread. `skip(ctx, i)` may say an op is
  // not needed this step (it then counts as done at once). Returns when every lane has finished;
  // the first exception any op threw is rethrown here (the other lanes stop at their next op).
  // With timing on, start_ns[i] / end_ns[i] (steady clock) are filled for every op that ran.
  // share_cores: the lanes' work is meant to overlap on few cores (NEO's pipelined sub-batches
  // with a loopback device on two vCPUs). A waiter then spins only while the op it waits for is
  // running and otherwise sleeps at once, and a lane that wakes another yields its core: spinning
  // waiters and a busy lane otherwise left a woken copy lane (the one op the CPU lane waited
  // for) no core until the device idled, and the sub-batches ran one after the other. Off (the
  // default), waiters spin briefly whatever they wait for: on a loaded machine a sleeping lane's
  // wake-up costs more than a tiny model's whole step.
  using ExecFn = void (*)(void* ctx, int32_t i);
  using SkipFn = bool (*)(void* ctx, int32_t i);
  void run(int32_t n, const Lane* lanes, const LaneDeps* deps, ExecFn exec, SkipFn skip, void* ctx, bool timing,
           int64_t* start_ns, int64_t* end_ns, bool share_cores = false);

 private:
  void lane_loop(int lane);
  void run_lane(int lane);
  void wait_for(int lane, int32_t index);

  std::thread threads_[kLanes];  // [0] unused: the CPU lane is the caller
  std::mutex mu_;
  std::condition_variable wake_, progress_;
  uint64_t generation_ = 0;  // under mu_
  bool stop_ = false;
  int active_lanes_ = 0;      // lane threads still running this step (under mu_)
  std::atomic<int32_t> done_[kLanes];
  std::atomic<int32_t> running_[kLanes];  // the op each lane started last (share_cores)
  bool share_cores_ = false;
  std::atomic<bool> failed_{false};
  std::atomic<int> waiters_{0};
  std::exception_ptr error_;
  // The current step.
  int32_t n_ = 0;
  const Lane* lanes_ = nullptr;
  const LaneDeps* deps_ = nullptr;
  ExecFn exec_ = nullptr;
  SkipFn skip_ = nullptr;
  void* ctx_ = nullptr;
  bool timing_ = false;
  int64_t *start_ns_ = nullptr, *end_ns_ = nullptr;
  bool lane_used_[kLanes] = {};
};

int64_t steady_ns();

}  // namespace fulcrum
