#include "core/base/parallel_for.h"

#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "core/base/task_pool.h"
#include "gtest/gtest.h"

namespace spexd::core {
namespace {

// Runs a loop of `ntasks` and checks that each task ran exactly once, that worker ids stay
// in [0, max_workers) and that no two participants held the same id at once.
void CheckEveryTaskOnce(TaskPool* pool, int max_workers, int ntasks) {
  std::vector<std::atomic<int>> runs(static_cast<std::size_t>(ntasks));
  std::vector<std::atomic<int>> in_use(static_cast<std::size_t>(max_workers));
  std::atomic<bool> bad_worker{false}, shared_worker{false};
  ParallelFor(pool, max_workers, ntasks, [&](int worker, int task) {
    if (worker < 0 || worker >= max_workers) {
      bad_worker = true;
      return;
    }
    if (in_use[static_cast<std::size_t>(worker)].fetch_add(1) != 0) shared_worker = true;
    runs[static_cast<std::size_t>(task)].fetch_add(1);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    in_use[static_cast<std::size_t>(worker)].fetch_sub(1);
  });
  EXPECT_FALSE(bad_worker);
  EXPECT_FALSE(shared_worker);
  for (int t = 0; t < ntasks; ++t) ASSERT_EQ(runs[static_cast<std::size_t>(t)].load(), 1) << t;
}

TEST(ParallelForTest, RunsEveryTaskOnceWithDistinctWorkers) {
  TaskPool pool;
  pool.AddThreads(3);
  for (int ntasks : {0, 1, 2, 7, 200}) {
    for (int max_workers : {1, 2, 4, 9}) {
      SCOPED_TRACE(::testing::Message() << ntasks << " tasks, " << max_workers << " workers");
      CheckEveryTaskOnce(&pool, max_workers, ntasks);
      CheckEveryTaskOnce(nullptr, max_workers, ntasks);
    }
  }
}

TEST(ParallelForTest, UsesThePoolsThreads) {
  TaskPool pool;
  pool.AddThreads(2);
  std::atomic<int> inside{0};
  std::atomic<int> peak{0};
  ParallelFor(&pool, 3, 3, [&](int, int) {
    const int now = inside.fetch_add(1) + 1;
    int p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
    // Each participant waits for the others (bounded, so a failure cannot hang).
    for (int i = 0; i < 2000 && peak.load() < 3; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    inside.fetch_sub(1);
  });
  EXPECT_EQ(peak.load(), 3);
}

// The rule that keeps nested use safe: the caller never waits for a helper that has not
// started. With every pool thread blocked, the loop runs wholly on the caller, and the
// helpers it queued find the loop closed when they finally run.
TEST(ParallelForTest, ASaturatedPoolLeavesTheWorkToTheCaller) {
  TaskPool pool;
  pool.AddThreads(2);
  absl::Notification release;
  std::atomic<int> blocked{0};
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(pool.Post([&] {
      blocked.fetch_add(1);
      release.WaitForNotification();
    }));
  }
  while (blocked.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::atomic<int> calls{0};
  std::atomic<bool> off_caller{false};
  ParallelFor(&pool, 3, 50, [&](int worker, int) {
    if (worker != 0) off_caller = true;
    calls.fetch_add(1);
  });
  EXPECT_EQ(calls.load(), 50);
  EXPECT_FALSE(off_caller);
  EXPECT_EQ(pool.queued(), 2);  // the two helpers, not yet started
  release.Notify();
  pool.Shutdown();  // runs the late helpers: they must not call the finished loop's body
  EXPECT_EQ(calls.load(), 50);
}

// Loops inside tasks of the same pool, two levels deep, with more loops than threads:
// completes (a design that waited for queued helpers would deadlock here).
TEST(ParallelForTest, NestedLoopsOnTheSamePoolComplete) {
  TaskPool pool;
  pool.AddThreads(2);
  std::atomic<int> leaves{0};
  ParallelFor(&pool, 3, 6, [&](int, int) {
    ParallelFor(&pool, 3, 5, [&](int, int) {
      ParallelFor(&pool, 3, 4, [&](int, int) { leaves.fetch_add(1); });
    });
  });
  EXPECT_EQ(leaves.load(), 6 * 5 * 4);
}

TEST(ParallelForTest, APoolShuttingDownLeavesTheWorkToTheCaller) {
  TaskPool pool;
  pool.AddThreads(2);
  pool.Shutdown();
  CheckEveryTaskOnce(&pool, 3, 20);
}

TEST(ParallelForTest, MakeTaskPoolStartsTheThreadsAsked) {
  EXPECT_EQ(MakeTaskPool(3)->num_threads(), 3);
  EXPECT_EQ(MakeTaskPool(0)->num_threads(), 0);
  EXPECT_EQ(MakeTaskPool(-1)->num_threads(), 0);
  EXPECT_GE(HardwareThreads(), 1);
}

// Under taskset (or a cpuset) the default thread count is the CPUs allowed, not the
// machine's (16 threads on 2 given cores only time-slice the patches).
TEST(ParallelForTest, HardwareThreadsFollowsTheAffinityMask) {
  std::thread([] {  // a thread of its own: the mask is per thread, the test's stays as it is
    cpu_set_t all;
    ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
    EXPECT_EQ(HardwareThreads(), CPU_COUNT(&all));
    int first = 0;
    while (!CPU_ISSET(first, &all)) ++first;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    EXPECT_EQ(HardwareThreads(), 1);
  }).join();
}

}  // namespace
}  // namespace spexd::core
