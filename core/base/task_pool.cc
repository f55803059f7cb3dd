#include "core/base/task_pool.h"

#include <string>
#include <utility>

#include "core/base/thread_name.h"

namespace spexd::core {

namespace {

thread_local bool urgent_thread = false;

// Runs a task with this thread's urgency set to the task's, so that what it posts
// inherits it.
void RunAs(bool urgent, absl::AnyInvocable<void() &&> task) {
  const bool previous = std::exchange(urgent_thread, urgent);
  std::move(task)();
  urgent_thread = previous;
}

}  // namespace

UrgentTasks::UrgentTasks() : previous_(std::exchange(urgent_thread, true)) {}
UrgentTasks::~UrgentTasks() { urgent_thread = previous_; }
bool UrgentTasks::Active() { return urgent_thread; }

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
  (urgent_thread ? urgent_ : tasks_).push_back(std::move(task));
  return true;
}

bool TaskPool::PopLocked(Task* task, bool* urgent) {
  std::deque<Task>& from = urgent_.empty() ? tasks_ : urgent_;
  if (from.empty()) return false;
  *urgent = &from == &urgent_;
  *task = std::move(from.front());
  from.pop_front();
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
    Task task;
    bool urgent = false;
    {
      absl::MutexLock lock(&mu_);
      if (!PopLocked(&task, &urgent)) return;
    }
    RunAs(urgent, std::move(task));
  }
}

void TaskPool::Loop() {
  for (;;) {
    Task task;
    bool urgent = false;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !urgent_.empty() || !tasks_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (!PopLocked(&task, &urgent)) return;  // stopping, and nothing left to run
      ++running_;
    }
    RunAs(urgent, std::move(task));
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
  return static_cast<int>(urgent_.size() + tasks_.size());
}

int TaskPool::running() {
  absl::MutexLock lock(&mu_);
  return running_;
}

}  // namespace spexd::core
