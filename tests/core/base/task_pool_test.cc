#include "core/base/task_pool.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
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
