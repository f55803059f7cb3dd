#include "core/base/task_pool.h"

#include <string>
#include <utility>

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
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  tasks_.push_back(std::move(task));
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
  for (;;) {
    absl::AnyInvocable<void() &&> task;
    {
      absl::MutexLock lock(&mu_);
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    std::move(task)();
  }
}

void TaskPool::Loop() {
  for (;;) {
    absl::AnyInvocable<void() &&> task;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !tasks_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (tasks_.empty()) return;  // stopping, and nothing left to run
      task = std::move(tasks_.front());
      tasks_.pop_front();
      ++running_;
    }
    std::move(task)();
    absl::MutexLock lock(&mu_);
    --running_;
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
