#include "cuda/host/sleep_poll.h"

#include <time.h>

#include <chrono>

#include "gtest/gtest.h"

namespace spexd::cuda {
namespace {

double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

enum Query { kNotReady, kReady, kFailed };

// Until the work is done the waiting thread sleeps: over a 100 ms wait it uses a small
// part of a core (a spinning wait uses all of it), and it sees the result the query gives.
TEST(SleepPollTest, SleepsUntilTheQueryIsReady) {
  const auto start = std::chrono::steady_clock::now();
  const auto done = start + std::chrono::milliseconds(100);
  int queries = 0;
  const double cpu0 = ThreadCpuSeconds();
  const Query r = SleepPoll(
      [&] {
        ++queries;
        return std::chrono::steady_clock::now() >= done ? kReady : kNotReady;
      },
      kNotReady);
  const double cpu = ThreadCpuSeconds() - cpu0;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r, kReady);
  EXPECT_GE(wall, 0.1);
  EXPECT_LT(wall, 1.0);  // ends soon after (loosely: sanitizer builds on a busy host)
  EXPECT_LT(cpu, 0.25 * wall) << queries << " queries";
  EXPECT_LE(queries, 100000 / kSleepPollPeriod.count() + 2);
}

// An error ends the wait at once, as does work already done: no sleep first.
TEST(SleepPollTest, ReturnsTheFirstResultOtherThanNotReady) {
  int queries = 0;
  EXPECT_EQ(SleepPoll([&] { return ++queries < 3 ? kNotReady : kFailed; }, kNotReady), kFailed);
  EXPECT_EQ(queries, 3);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(SleepPoll([] { return kReady; }, kNotReady, std::chrono::microseconds(1000000)), kReady);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
}

}  // namespace
}  // namespace spexd::cuda
