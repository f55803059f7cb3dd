// A job without a deadline under earliest-deadline-first (Scheduler::OrderingDeadline,
// --no_deadline_horizon_seconds): ordered as if due a horizon after its submission, so a
// steady stream of jobs with deadlines cannot starve it; 0 keeps the old order.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "server/state/scheduler.h"
#include "tests/server/state/null_backend.h"

namespace spexd::server {
namespace {

using test_backends::NullBackend;

TEST(SchedulerTest, OrderingDeadlineGivesJobsWithoutOneAHorizon) {
  using TimePoint = std::chrono::steady_clock::time_point;
  const TimePoint t0 = std::chrono::steady_clock::now();
  const auto minute = std::chrono::minutes(1);
  const auto never = TimePoint::max();
  EXPECT_EQ(Scheduler::OrderingDeadline(t0 + minute, t0, 10 * minute), t0 + minute);  // its own
  EXPECT_EQ(Scheduler::OrderingDeadline(never, t0, 10 * minute), t0 + 10 * minute);
  EXPECT_EQ(Scheduler::OrderingDeadline(never, t0, minute.zero()), never);  // 0: old order
  EXPECT_EQ(Scheduler::OrderingDeadline(never, t0, std::chrono::steady_clock::duration::max()),
            never);  // saturates
}

// Admits jobs to the one loader of a one-worker scheduler, which is the bottleneck: each
// job's Prepare records its name (the order in which the scheduler hands jobs out) and
// waits for a permit from the test.
class Gate {
 public:
  void Enter(const std::string& name) {
    absl::MutexLock lock(&mu_);
    entered_.push_back(name);
    auto permitted = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return permits_ > 0; };
    mu_.Await(absl::Condition(&permitted));
    --permits_;
  }
  void Permit(int n = 1) {
    absl::MutexLock lock(&mu_);
    permits_ += n;
  }
  // Waits until `n` jobs have entered; the name of the n-th, "" after 10 s.
  std::string Entered(std::size_t n) {
    absl::MutexLock lock(&mu_);
    auto there = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return entered_.size() >= n; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&there), absl::Seconds(10))) return "";
    return entered_[n - 1];
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> entered_ ABSL_GUARDED_BY(mu_);
  int permits_ ABSL_GUARDED_BY(mu_) = 0;
};

class GatedJob : public Job {
 public:
  GatedJob(std::string name, Gate* gate, std::chrono::steady_clock::time_point deadline =
                                             std::chrono::steady_clock::time_point::max())
      : name_(std::move(name)), gate_(gate), deadline_(deadline) {}
  bool Prepare() override {
    gate_->Enter(name_);
    return true;
  }
  std::chrono::steady_clock::time_point deadline() const override { return deadline_; }
  void Run(core::Backend&, int, core::TaskPool&) override {}
  void Abandon(const absl::Status&) override {}

 private:
  std::string name_;
  Gate* gate_;
  std::chrono::steady_clock::time_point deadline_;
};

// A job without a deadline ("patient") is admitted at t = 0 of a fake clock; then every
// minute a job due two minutes after its arrival (as spexctl sets them) arrives and the
// loader takes one job, so the queue never empties. Returns the minute at which patient
// was taken, or -1 if it was not within `minutes`; then lets the rest through and checks
// that patient was taken at all.
int MinuteTakingTheJobWithoutADeadline(double horizon_seconds, int minutes) {
  Gate gate;  // outlives the scheduler, whose loader may wait in it
  std::atomic<int> now_minutes{0};
  const auto base = std::chrono::steady_clock::now();
  auto now = [&] { return base + std::chrono::minutes(now_minutes.load()); };
  Scheduler s({.max_queue = 4 * minutes, .prefetch = 1,
               .no_deadline_horizon_seconds = horizon_seconds, .clock = now},
              nullptr);
  s.AddWorker(std::make_unique<NullBackend>(), -1);
  s.Submit(*s.Reserve(false), std::make_shared<GatedJob>("held", &gate, now() + std::chrono::minutes(2)));
  EXPECT_EQ(gate.Entered(1), "held");
  s.Submit(*s.Reserve(false), std::make_shared<GatedJob>("patient", &gate));
  int taken = -1;
  for (int minute = 1; minute <= minutes && taken < 0; ++minute) {
    now_minutes.store(minute);
    s.Submit(*s.Reserve(false), std::make_shared<GatedJob>(absl::StrCat("due", minute), &gate,
                                                          now() + std::chrono::minutes(2)));
    gate.Permit();
    const std::string next = gate.Entered(static_cast<std::size_t>(minute) + 1);
    EXPECT_FALSE(next.empty()) << "the loader took nothing at minute " << minute;
    if (next == "patient") taken = minute;
  }
  gate.Permit(4 * minutes);
  bool seen = taken >= 0;
  for (std::size_t n = 2; !seen; ++n) {
    const std::string next = gate.Entered(n);
    if (next.empty()) break;
    seen = next == "patient";
  }
  EXPECT_TRUE(seen) << "the job without a deadline never ran";
  return taken;
}

TEST(SchedulerTest, AJobWithoutADeadlineIsTakenOnceItsHorizonIsTheEarliestDeadline) {
  // Due at minute 10 by the horizon: taken at minute 8, when the job arriving is due at
  // minute 10 too (FIFO: patient was admitted first) and every earlier one has been taken.
  EXPECT_EQ(MinuteTakingTheJobWithoutADeadline(600, 30), 8);
  EXPECT_EQ(MinuteTakingTheJobWithoutADeadline(300, 30), 3);
}

TEST(SchedulerTest, AZeroHorizonKeepsJobsWithoutADeadlineAfterEveryJobWithOne) {
  // The order before the horizon: starved for as long as jobs with deadlines arrive.
  EXPECT_EQ(MinuteTakingTheJobWithoutADeadline(0, 30), -1);
}

}  // namespace
}  // namespace spexd::server
