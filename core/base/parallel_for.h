// Data-parallel loops on a shared core::TaskPool (one bounded pool, owned by
// whoever owns the backend, instead of threads started per call).
//
// The calling thread always takes part: it claims tasks like the pool's threads do and
// never waits for a helper that has not started. So ParallelFor may be called from a task
// already running on the same pool, or while every pool thread is busy or blocked: it then
// runs all tasks on the caller (slower, never a deadlock). It waits only for helpers that
// are inside `body`, and those are making progress on this loop's own tasks.
#ifndef SPEXD_CORE_PARALLEL_FOR_H_
#define SPEXD_CORE_PARALLEL_FOR_H_

#include <memory>

#include "absl/functional/function_ref.h"
#include "core/base/task_pool.h"

namespace spexd::core {

// Runs body(worker, task) once for every task in [0, ntasks), on the calling thread and
// on up to max_workers - 1 of `pool`'s threads, and returns when all have run. Tasks are
// claimed one at a time in ascending order, so per-task outputs must not depend on which
// worker ran them. `worker` is in [0, max_workers) and unique among the participants
// running at once (0: the caller), for indexing per-worker scratch. A null pool, a pool
// without threads or one shutting down runs everything on the caller. `body` must not
// throw.
void ParallelFor(TaskPool* pool, int max_workers, int ntasks,
                 absl::FunctionRef<void(int worker, int task)> body);

// A pool with `threads` threads (none for threads <= 0): the fallback of a component whose
// owner passed no pool, so that it still has one, owned locally, joined when it goes.
std::unique_ptr<TaskPool> MakeTaskPool(int threads, absl::string_view name = {});

// The CPUs in this process's affinity mask (taskset), else hardware_concurrency(); >= 1.
int HardwareThreads();

}  // namespace spexd::core

#endif  // SPEXD_CORE_PARALLEL_FOR_H_
