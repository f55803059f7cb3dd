#include "core/base/task_pool.h"

#include <string>
#include <utility>

#include "core/base/task_priority.h"
#include "core/base/thread_name.h"

namespace spexd::core {

TaskPool::~TaskPool() { Shutdown(); }

void TaskPool::AddThreads(int n, absl::string_view name) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  for (int i = 0; i < n; ++i) {
    threads_.emplace_back([this, n = std::string(name)] {
      if (!n.empty()) NameThisThread(n);
      Loop();
    });
  }
}

bool TaskPool::Post(absl::AnyInvocable<void() &&> task) {
  const int64_t key = CurrentTaskPriority();
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  tasks_.emplace(std::make_pair(key, posted_++), std::move(task));
  return true;
}

void TaskPool::Shutdown() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  // The threads leave once the queue is empty and stopping_ is set (Loop).
  for (std::thread& t : threads) t.join();
  // A pool that never had threads still runs what was posted: a posted task is owed a run.
  while (RunFirst(/*count_running=*/false)) {
  }
}

bool TaskPool::RunFirst(bool count_running) {
  absl::AnyInvocable<void() &&> task;
  int64_t key = 0;
  {
    absl::MutexLock lock(&mu_);
    if (tasks_.empty()) return false;
    auto first = tasks_.begin();
    key = first->first.first;
    task = std::move(first->second);
    tasks_.erase(first);
    if (count_running) ++running_;
  }
  {
    const TaskPriorityScope scope(key);  // what the task posts inherits its key
    std::move(task)();
  }
  if (count_running) {
    absl::MutexLock lock(&mu_);
    --running_;
  }
  return true;
}

void TaskPool::Loop() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !tasks_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (tasks_.empty()) return;  // stopping, and nothing left to run
    }
    RunFirst(/*count_running=*/true);
  }
}

int TaskPool::num_threads() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(threads_.size());
}

int TaskPool::queued() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(tasks_.size());
}

int TaskPool::running() {
  absl::MutexLock lock(&mu_);
  return running_;
}

}  // namespace spexd::core
