#include "core/base/task_pool.h"

#include <algorithm>
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

bool TaskPool::PostBackground(absl::AnyInvocable<void() &&> task) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  background_.push_back(std::move(task));
  return true;
}

int TaskPool::BackgroundLimit() const {
  return std::max(1, static_cast<int>(kBackgroundShare * static_cast<double>(threads_.size())));
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
      std::deque<absl::AnyInvocable<void() &&>>& queue = tasks_.empty() ? background_ : tasks_;
      if (queue.empty()) return;
      task = std::move(queue.front());
      queue.pop_front();
    }
    std::move(task)();
  }
}

void TaskPool::Loop() {
  for (;;) {
    absl::AnyInvocable<void() &&> task;
    bool background = false;
    {
      absl::MutexLock lock(&mu_);
      auto may_take_background = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !background_.empty() && background_running_ < BackgroundLimit();
      };
      // Stopping, a thread leaves once both queues are empty: background tasks over the
      // limit are left to the threads running the others.
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !tasks_.empty() || may_take_background() ||
               (stopping_ && background_.empty());
      };
      mu_.Await(absl::Condition(&ready));
      if (!tasks_.empty()) {
        task = std::move(tasks_.front());
        tasks_.pop_front();
      } else if (may_take_background()) {
        task = std::move(background_.front());
        background_.pop_front();
        background = true;
        ++background_running_;
      } else {
        return;  // stopping, and nothing left to run
      }
      ++running_;
    }
    std::move(task)();
    absl::MutexLock lock(&mu_);
    --running_;
    if (background) --background_running_;
  }
}

int TaskPool::num_threads() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(threads_.size());
}

int TaskPool::queued() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(tasks_.size() + background_.size());
}

int TaskPool::running() {
  absl::MutexLock lock(&mu_);
  return running_;
}

}  // namespace spexd::core
