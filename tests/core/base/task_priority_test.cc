// The order a shared TaskPool runs its tasks in (core/base/task_priority.h, issue 22).
#include "core/base/task_priority.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "core/base/parallel_for.h"
#include "core/base/task_pool.h"

namespace spexd::core {
namespace {

// One thread, blocked until everything is queued, so that the queue's order decides.
struct BlockedPool {
  TaskPool pool;
  absl::Notification go;
  absl::Mutex mu;
  std::vector<std::string> ran;
  BlockedPool() {
    pool.AddThreads(1);
    pool.Post([this] { go.WaitForNotification(); });
  }
  void Record(const std::string& s) {
    absl::MutexLock lock(&mu);
    ran.push_back(s);
  }
};

TEST(TaskPriorityTest, SmallestKeyFirstAndFifoAmongEqualKeys) {
  BlockedPool p;
  {
    const TaskPriorityScope young(200);
    p.pool.Post([&] { p.Record("young 1"); });
    p.pool.Post([&] { p.Record("young 2"); });
  }
  {
    const TaskPriorityScope old(100);
    p.pool.Post([&] { p.Record("old 1"); });
    p.pool.Post([&] { p.Record("old 2"); });
  }
  p.go.Notify();
  p.pool.Shutdown();
  EXPECT_EQ(p.ran, (std::vector<std::string>{"old 1", "old 2", "young 1", "young 2"}));
}

TEST(TaskPriorityTest, UnkeyedWorkKeepsFifoOrderAfterOlderRequests) {
  BlockedPool p;
  p.pool.Post([&] { p.Record("unkeyed 1"); });
  p.pool.Post([&] { p.Record("unkeyed 2"); });
  {
    // A request that arrived a second ago: older than the unkeyed work posted just now.
    const TaskPriorityScope request(std::chrono::steady_clock::now() - std::chrono::seconds(1));
    p.pool.Post([&] { p.Record("request"); });
  }
  {
    // One that arrives after that work was posted goes after it.
    const TaskPriorityScope later(std::chrono::steady_clock::now() + std::chrono::seconds(1));
    p.pool.Post([&] { p.Record("later request"); });
  }
  p.go.Notify();
  p.pool.Shutdown();
  EXPECT_EQ(p.ran, (std::vector<std::string>{"request", "unkeyed 1", "unkeyed 2", "later request"}));
}

TEST(TaskPriorityTest, ATaskRunsInItsKeyAndWhatItPostsInheritsIt) {
  TaskPool pool;
  pool.AddThreads(2);
  std::vector<int64_t> seen(3, 0);
  {
    const TaskPriorityScope scope(42);
    // The helpers ParallelFor posts carry key 42; each task sees it while it runs.
    ParallelFor(&pool, 3, 3, [&](int, int task) { seen[task] = CurrentTaskPriority(); });
  }
  EXPECT_EQ(seen, (std::vector<int64_t>{42, 42, 42}));
  absl::Notification done;
  int64_t nested = 0;
  {
    const TaskPriorityScope scope(7);
    pool.Post([&] {
      pool.Post([&] {
        nested = CurrentTaskPriority();
        done.Notify();
      });
    });
  }
  done.WaitForNotification();
  EXPECT_EQ(nested, 7);
}

TEST(TaskPriorityTest, ScopesNestAndRestore) {
  const int64_t before = CurrentTaskPriority();
  {
    const TaskPriorityScope outer(10);
    EXPECT_EQ(CurrentTaskPriority(), 10);
    {
      const TaskPriorityScope inner(5);
      EXPECT_EQ(CurrentTaskPriority(), 5);
    }
    EXPECT_EQ(CurrentTaskPriority(), 10);
  }
  // Unkeyed again: the clock, which has not gone backwards.
  EXPECT_GE(CurrentTaskPriority(), before);
}

}  // namespace
}  // namespace spexd::core
