// Which work a shared TaskPool runs first (issue 22). spexd's host pool serves every
// request at once: inflating and decoding the frames being loaded, the backends' host work,
// writing and hashing the frames being finished. In FIFO order each new ParallelFor phase
// of a request queues behind every other request's, so concurrent loads share the cores
// and all finish late. Tasks instead carry a key, and a pool runs the smallest key first
// (FIFO among equal keys): a request's work is keyed by when the request arrived, so the
// oldest request in the server goes first and leaves the pipeline soonest.
#ifndef SPEXD_CORE_BASE_TASK_PRIORITY_H_
#define SPEXD_CORE_BASE_TASK_PRIORITY_H_

#include <chrono>
#include <cstdint>

namespace spexd::core {

// The key of tasks posted from this thread now: the innermost TaskPriorityScope's, or,
// outside any, the current steady-clock time (so that unkeyed work keeps FIFO order, after
// the work of every request that arrived before it was posted). A pool thread runs each
// task inside its key's scope, so what a task posts (e.g. a nested ParallelFor) inherits it.
int64_t CurrentTaskPriority();

// Sets this thread's key for its lifetime (nests; restores the outer one).
class TaskPriorityScope {
 public:
  explicit TaskPriorityScope(int64_t key);
  // Keyed by a steady-clock time point: when the request arrived.
  explicit TaskPriorityScope(std::chrono::steady_clock::time_point arrived);
  ~TaskPriorityScope();
  TaskPriorityScope(const TaskPriorityScope&) = delete;
  TaskPriorityScope& operator=(const TaskPriorityScope&) = delete;

 private:
  bool had_;
  int64_t outer_;
};

// The key of a steady-clock time point (nanoseconds since the clock's epoch).
int64_t TaskPriorityOf(std::chrono::steady_clock::time_point t);

}  // namespace spexd::core

#endif  // SPEXD_CORE_BASE_TASK_PRIORITY_H_
