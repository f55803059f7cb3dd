// A fixed set of threads that run posted tasks in FIFO order, urgent ones first
// (UrgentTasks below). Its owner decides how many
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

// While one lives on a thread, the tasks that thread posts to any TaskPool (a ParallelFor's
// helpers among them) are urgent: they run before every task posted otherwise, and the
// tasks they post in turn are urgent too. For short work that a caller waits on while
// the pool is busy with longer, less pressing work: a served frame's end (its mask's
// medians, its file's last parts), which every client waits for, behind the next frames'
// loads. Scopes nest; the thread's earlier state comes back when one ends.
class UrgentTasks {
 public:
  UrgentTasks();
  ~UrgentTasks();
  UrgentTasks(const UrgentTasks&) = delete;
  UrgentTasks& operator=(const UrgentTasks&) = delete;
  // Whether tasks posted from this thread now are urgent.
  static bool Active();

 private:
  bool previous_;
};

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
  // Queues `task` for the next free thread, behind the urgent tasks when this thread is
  // in an UrgentTasks scope, else behind all. Returns false, and drops the task unrun,
  // once Shutdown has begun: the caller still owns whatever the task would have done.
  bool Post(absl::AnyInvocable<void() &&> task);
  // Refuses new tasks, waits until every task already posted has run (on the pool's
  // threads, or here when the pool has none), then joins the threads. Blocks for as long
  // as the slowest task takes. Idempotent; safe from any thread but the pool's own.
  void Shutdown();

  int num_threads();
  // Tasks posted and not yet started (urgent or not), and tasks running now.
  int queued();
  int running();

 private:
  using Task = absl::AnyInvocable<void() &&>;
  void Loop();
  // The next task (urgent first) and whether it is urgent; false when none is queued.
  bool PopLocked(Task* task, bool* urgent) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::deque<Task> urgent_ ABSL_GUARDED_BY(mu_);
  std::deque<Task> tasks_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace spexd::core

#endif  // SPEXD_CORE_TASK_POOL_H_
