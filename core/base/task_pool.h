// A fixed set of threads that run posted tasks in FIFO order. Its owner decides how many
// threads it has and when it ends, so no thread outlives the object that started it
// (no detached threads). The server's scheduler owns one as its streaming stage:
// a finished extraction's bundles are sent to the client there while the worker moves on;
// the backends' data-parallel loops run on another through core::ParallelFor
// (core/base/parallel_for.h, BackendOptions::pool).
#ifndef SPEXD_CORE_TASK_POOL_H_
#define SPEXD_CORE_TASK_POOL_H_

#include <deque>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace spexd::core {

class TaskPool {
 public:
  TaskPool() = default;
  // Shutdown().
  ~TaskPool();
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  // Starts `n` more threads (an owner grows the pool with its workers), named `name` when
  // given (core::NameThisThread). None once Shutdown has begun.
  void AddThreads(int n, absl::string_view name = {});
  // Queues `task` for the next free thread. Returns false, and drops the task unrun,
  // once Shutdown has begun: the caller still owns whatever the task would have done.
  bool Post(absl::AnyInvocable<void() &&> task);
  // Refuses new tasks, waits until every task already posted has run (on the pool's
  // threads, or here when the pool has none), then joins the threads. Blocks for as long
  // as the slowest task takes. Idempotent; safe from any thread but the pool's own.
  void Shutdown();

  int num_threads();
  // Tasks posted and not yet started, and tasks running now.
  int queued();
  int running();

 private:
  void Loop();

  absl::Mutex mu_;
  std::deque<absl::AnyInvocable<void() &&>> tasks_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace spexd::core

#endif  // SPEXD_CORE_TASK_POOL_H_
