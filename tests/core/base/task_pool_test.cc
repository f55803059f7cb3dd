#include "core/base/task_pool.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace spexd::core {
namespace {

TEST(TaskPoolTest, OneThreadRunsTasksInPostingOrder) {
  TaskPool pool;
  pool.AddThreads(1);
  std::mutex mu;
  std::vector<int> order;
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(pool.Post([&, i] {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(i);
    }));
  }
  pool.Shutdown();
  std::vector<int> expected(50);
  for (int i = 0; i < 50; ++i) expected[i] = i;
  EXPECT_EQ(order, expected);
}

// One thread held by a first task while the rest are posted: the order they then run in
// is the queue's.
class HeldPool {
 public:
  HeldPool() {
    pool.AddThreads(1);
    EXPECT_TRUE(pool.Post([this] {
      held.Notify();
      release.WaitForNotification();
    }));
    held.WaitForNotification();
  }
  void Record(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(name);
  }
  std::function<void()> Recorder(std::string name) {
    return [this, name] { Record(name); };
  }
  // The names in the order run, once `n` have run (tasks may still post while the pool
  // runs; Shutdown would refuse them).
  std::vector<std::string> RunUntil(std::size_t n) {
    release.Notify();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (order.size() >= n || std::chrono::steady_clock::now() > deadline) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    pool.Shutdown();
    return order;
  }

  TaskPool pool;
  absl::Notification held, release;
  std::mutex mu;
  std::vector<std::string> order;
};

TEST(TaskPoolTest, UrgentTasksRunBeforeTasksPostedOtherwise) {
  HeldPool h;
  ASSERT_TRUE(h.pool.Post(h.Recorder("n1")));
  ASSERT_TRUE(h.pool.Post(h.Recorder("n2")));
  {
    UrgentTasks urgent;
    ASSERT_TRUE(h.pool.Post(h.Recorder("u1")));
    ASSERT_TRUE(h.pool.Post(h.Recorder("u2")));
  }
  ASSERT_TRUE(h.pool.Post(h.Recorder("n3")));
  EXPECT_EQ(h.pool.queued(), 5);
  EXPECT_EQ(h.RunUntil(5), (std::vector<std::string>{"u1", "u2", "n1", "n2", "n3"}));
}

// What an urgent task posts is urgent too (ahead of tasks posted before it); what the
// same pool thread posts from a task that is not urgent afterwards is not.
TEST(TaskPoolTest, UrgencyPassesToTheTasksAnUrgentTaskPosts) {
  HeldPool h;
  ASSERT_TRUE(h.pool.Post(h.Recorder("n1")));
  {
    UrgentTasks urgent;
    ASSERT_TRUE(h.pool.Post([&h] {
      h.Record("u1");
      EXPECT_TRUE(UrgentTasks::Active());
      EXPECT_TRUE(h.pool.Post(h.Recorder("u1-child")));
    }));
  }
  ASSERT_TRUE(h.pool.Post([&h] {
    h.Record("n2");
    EXPECT_FALSE(UrgentTasks::Active());
    EXPECT_TRUE(h.pool.Post(h.Recorder("n2-child")));
  }));
  ASSERT_TRUE(h.pool.Post(h.Recorder("n3")));
  EXPECT_EQ(h.RunUntil(6),
            (std::vector<std::string>{"u1", "u1-child", "n1", "n2", "n3", "n2-child"}));
}

TEST(TaskPoolTest, UrgentScopesNestAndRestoreTheThreadsState) {
  EXPECT_FALSE(UrgentTasks::Active());
  {
    UrgentTasks outer;
    EXPECT_TRUE(UrgentTasks::Active());
    {
      UrgentTasks inner;
      EXPECT_TRUE(UrgentTasks::Active());
    }
    EXPECT_TRUE(UrgentTasks::Active());
  }
  EXPECT_FALSE(UrgentTasks::Active());
}

// Shutdown is a join: it returns only after every task posted before it has finished,
// including tasks still queued behind a slow one (a detached thread would fail this).
TEST(TaskPoolTest, ShutdownWaitsForRunningAndQueuedTasks) {
  TaskPool pool;
  pool.AddThreads(2);
  absl::Notification started;
  std::atomic<int> done{0};
  ASSERT_TRUE(pool.Post([&] {
    started.Notify();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    done.fetch_add(1);
  }));
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(pool.Post([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      done.fetch_add(1);
    }));
  }
  started.WaitForNotification();
  EXPECT_EQ(pool.num_threads(), 2);
  EXPECT_GE(pool.running(), 1);
  pool.Shutdown();
  EXPECT_EQ(done.load(), 11);
  EXPECT_EQ(pool.num_threads(), 0);
  EXPECT_EQ(pool.queued(), 0);
  EXPECT_EQ(pool.running(), 0);
}

TEST(TaskPoolTest, PostAfterShutdownIsRefusedAndTheTaskNotRun) {
  TaskPool pool;
  pool.AddThreads(1);
  pool.Shutdown();
  bool ran = false;
  EXPECT_FALSE(pool.Post([&] { ran = true; }));
  pool.AddThreads(1);  // ignored once stopped
  EXPECT_EQ(pool.num_threads(), 0);
  pool.Shutdown();  // idempotent
  EXPECT_FALSE(ran);
}

TEST(TaskPoolTest, APoolWithoutThreadsRunsWhatWasPostedAtShutdown) {
  TaskPool pool;
  int ran = 0;
  ASSERT_TRUE(pool.Post([&] { ++ran; }));
  ASSERT_TRUE(pool.Post([&] { ++ran; }));
  EXPECT_EQ(pool.queued(), 2);
  pool.Shutdown();
  EXPECT_EQ(ran, 2);
}

TEST(TaskPoolTest, TasksRunConcurrentlyUpToTheThreadCount) {
  TaskPool pool;
  pool.AddThreads(3);
  std::atomic<int> inside{0};
  std::atomic<int> peak{0};
  absl::Notification release;
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(pool.Post([&] {
      const int now = inside.fetch_add(1) + 1;
      int p = peak.load();
      while (now > p && !peak.compare_exchange_weak(p, now)) {
      }
      release.WaitForNotificationWithTimeout(absl::Seconds(5));
      inside.fetch_sub(1);
    }));
  }
  for (int i = 0; i < 500 && pool.running() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(pool.running(), 3);
  EXPECT_EQ(pool.queued(), 3);
  release.Notify();
  pool.Shutdown();
  EXPECT_EQ(peak.load(), 3);
}


// Named pools name their threads (cut to Linux's 15 bytes), so that `top -H` shows roles;
// unnamed ones keep the process's name.
TEST(TaskPoolTest, NamedThreadsCarryTheName) {
  auto name_inside = [](TaskPool& pool) {
    std::string name;
    absl::Notification done;
    EXPECT_TRUE(pool.Post([&] {
      char buf[32] = {};
      pthread_getname_np(pthread_self(), buf, sizeof(buf));
      name = buf;
      done.Notify();
    }));
    done.WaitForNotificationWithTimeout(absl::Seconds(10));
    return name;
  };
  TaskPool named;
  named.AddThreads(1, "spexd-host-pool-long");
  EXPECT_EQ(name_inside(named), "spexd-host-pool");
  TaskPool plain;
  plain.AddThreads(1);
  char self[32] = {};
  pthread_getname_np(pthread_self(), self, sizeof(self));
  EXPECT_EQ(name_inside(plain), std::string(self));
}

}  // namespace
}  // namespace spexd::core
