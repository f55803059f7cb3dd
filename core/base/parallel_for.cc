#include "core/base/parallel_for.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/synchronization/mutex.h"

namespace spexd::core {
namespace {

// Shared by the caller and its helper tasks. A helper may start after the loop has
// returned (it sat in the queue behind other work): it then finds `closed` and leaves
// without touching `body`, which lives on the caller's stack.
struct LoopState {
  absl::Mutex mu;
  bool closed ABSL_GUARDED_BY(mu) = false;  // the caller has run out of tasks
  int active ABSL_GUARDED_BY(mu) = 0;       // helpers inside RunTasks
  std::atomic<int> next{0};
};

bool Idle(LoopState* state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state->mu) {
  return state->active == 0;
}

void RunTasks(LoopState& state, int worker, int ntasks,
              absl::FunctionRef<void(int, int)> body) {
  for (int t = state.next.fetch_add(1); t < ntasks; t = state.next.fetch_add(1)) body(worker, t);
}

}  // namespace

void ParallelFor(TaskPool* pool, int max_workers, int ntasks,
                 absl::FunctionRef<void(int worker, int task)> body) {
  if (ntasks <= 0) return;
  int helpers = std::min(max_workers, ntasks) - 1;
  if (pool != nullptr) helpers = std::min(helpers, pool->num_threads());
  if (pool == nullptr || helpers <= 0) {
    for (int t = 0; t < ntasks; ++t) body(0, t);
    return;
  }
  auto state = std::make_shared<LoopState>();
  for (int w = 1; w <= helpers; ++w) {
    const bool posted = pool->Post([state, w, ntasks, body] {
      {
        absl::MutexLock lock(&state->mu);
        if (state->closed) return;
        ++state->active;
      }
      RunTasks(*state, w, ntasks, body);
      absl::MutexLock lock(&state->mu);
      --state->active;
    });
    if (!posted) break;  // shutting down: the caller does the rest
  }
  RunTasks(*state, 0, ntasks, body);
  // Every task is claimed; wait for the helpers still finishing theirs. Their writes are
  // visible here through the mutex.
  absl::MutexLock lock(&state->mu);
  state->closed = true;
  state->mu.Await(absl::Condition(&Idle, state.get()));
}

std::unique_ptr<TaskPool> MakeTaskPool(int threads, absl::string_view name) {
  auto pool = std::make_unique<TaskPool>();
  if (threads > 0) pool->AddThreads(threads, name);
  return pool;
}

int HardwareThreads() {
  // The CPUs this process may run on (taskset, cgroup cpusets), not all of the machine's:
  // more threads than cores only time-slice the patches.
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace spexd::core
