#include "core/thread_pool.h"

#include <sched.h>

#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace fulcrum {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// ~a few hundred microseconds of spinning before a worker sleeps.
constexpr int kSpinsBeforeSleep = 1 << 14;

}  // namespace

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(n_threads < 1 ? 1 : n_threads), slots_(new std::atomic<int>[static_cast<size_t>(n_threads < 1 ? 1 : n_threads)]) {
  for (int i = 0; i < n_threads_; ++i) slots_[i].store(3);
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_impl(void (*fn)(void*, int, int), void* ctx) {
  if (n_threads_ == 1) {
    fn(ctx, 0, 1);
    return;
  }
  fn_ = fn;
  ctx_ = ctx;
  for (int i = 1; i < n_threads_; ++i) slots_[i].store(0, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    wake_.notify_all();
  }
  fn(ctx, 0, n_threads_);
  for (int i = 1; i < n_threads_; ++i) {
    int expected = 0;
    if (slots_[i].compare_exchange_strong(expected, 2, std::memory_order_acq_rel)) {
      fn(ctx, i, n_threads_);  // its worker has not woken yet: do its share here
      continue;
    }
    int spins = 0;
    while (slots_[i].load(std::memory_order_acquire) != 3) {
      if (++spins < kSpinsBeforeSleep) cpu_relax();
      else std::this_thread::yield();
    }
  }
}

void ThreadPool::worker_loop(int ith) {
  uint64_t seen = 0;
  for (;;) {
    int spins = 0;
    uint64_t g;
    while ((g = generation_.load(std::memory_order_acquire)) == seen) {
      if (++spins < kSpinsBeforeSleep) {
        cpu_relax();
        continue;
      }
      std::unique_lock<std::mutex> lock(mutex_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_seq_cst) != seen; });
      sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      spins = 0;
    }
    seen = g;
    if (stop_.load()) return;
    int expected = 0;
    // Claiming the slot after its reset also makes fn_/ctx_ of that job visible (release/acquire).
    if (!slots_[ith].compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) continue;  // the caller ran it
    fn_(ctx_, ith, n_threads_);
    slots_[ith].store(3, std::memory_order_release);
  }
}

int physical_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int logical = static_cast<int>(std::thread::hardware_concurrency());
  if (logical < 1) logical = 1;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return logical;
  std::set<std::pair<int, int>> cores;
  int allowed = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    ++allowed;
    const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream core(base + "core_id"), pkg(base + "physical_package_id");
    int core_id = -1, pkg_id = -1;
    if (!(core >> core_id) || !(pkg >> pkg_id)) return allowed > 0 ? CPU_COUNT(&set) : logical;
    cores.emplace(pkg_id, core_id);
  }
  if (cores.empty()) return allowed > 0 ? allowed : logical;
  return static_cast<int>(cores.size());
}

}  // namespace fulcrum
