// Where the frames of an exposure go and who prepares them: loaders prepare many ahead at
// once (a worker, i.e. half a GPU, never inflates a frame a loader is about to deliver),
// every GPU worker starts from the first frames, and a prepared frame goes to the worker
// whose backend holds its geometry warm when that leaves no worker idle.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "server/state/scheduler.h"
#include "tests/server/state/null_backend.h"

namespace spexd::server {
namespace {

using Clock = std::chrono::steady_clock;

// Stand-ins for geometries: the scheduler only compares their addresses.
const core::Geometry* FakeGeometry(int i) {
  static const int tokens[16] = {};
  return reinterpret_cast<const core::Geometry*>(&tokens[i]);
}

// A backend on `device` reporting `warm` as the geometries it holds (Backend::Memory).
class WarmBackend : public core::Backend {
 public:
  WarmBackend(int device, std::set<const core::Geometry*> warm)
      : device_(device), warm_(std::move(warm)) {}
  std::string name() const override { return "warm"; }
  absl::StatusOr<core::ExtractionSummary> Extract(const core::ExtractionJob&,
                                                  const core::BundleSink&) override {
    return core::ExtractionSummary{};
  }
  core::BackendMemory Memory() const override {
    core::BackendMemory m;
    m.device = device_;
    for (const core::Geometry* g : warm_) m.geometry_bytes[g] = 1 << 20;
    return m;
  }

 private:
  int device_;
  std::set<const core::Geometry*> warm_;
};

bool WaitUntil(const std::function<bool()>& done) {
  for (int i = 0; i < 1000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return done();
}

// Records which thread prepared it and which ran it, and the worker; Prepare takes
// `prepare_time` and counts how many preparations overlap.
class FrameJob : public Job {
 public:
  struct Log {
    std::mutex mu;
    int preparing = 0, most_preparing = 0, prepared = 0, ran = 0;
    std::vector<int> workers;                       // in the order they started running
    std::vector<const core::Geometry*> geometries;  // likewise
    int prepared_on_the_running_thread = 0;         // a worker prepared it itself
  };
  FrameJob(Log* log, std::chrono::milliseconds prepare_time, std::chrono::milliseconds run_time,
           const core::Geometry* geometry = nullptr, int device = -1,
           absl::Notification* hold = nullptr,
           Clock::time_point deadline = Clock::time_point::max())
      : log_(log),
        prepare_time_(prepare_time),
        run_time_(run_time),
        geometry_(geometry),
        device_(device),
        hold_(hold),
        deadline_(deadline) {}
  bool Prepare() override {
    {
      std::lock_guard<std::mutex> lock(log_->mu);
      log_->most_preparing = std::max(log_->most_preparing, ++log_->preparing);
    }
    std::this_thread::sleep_for(prepare_time_);
    prepared_by_ = std::this_thread::get_id();
    std::lock_guard<std::mutex> lock(log_->mu);
    --log_->preparing;
    ++log_->prepared;
    return true;
  }
  int device() const override { return device_; }
  Clock::time_point deadline() const override { return deadline_; }
  const core::Geometry* warm_geometry() const override { return geometry_; }
  void Run(core::Backend&, int worker, core::TaskPool&) override {
    if (hold_ != nullptr) hold_->WaitForNotification();
    {
      std::lock_guard<std::mutex> lock(log_->mu);
      log_->workers.push_back(worker);
      log_->geometries.push_back(geometry_);
      if (prepared_by_ == std::this_thread::get_id()) ++log_->prepared_on_the_running_thread;
    }
    std::this_thread::sleep_for(run_time_);
    std::lock_guard<std::mutex> lock(log_->mu);
    ++log_->ran;
  }
  void Abandon(const absl::Status&) override {}

 private:
  Log* log_;
  std::chrono::milliseconds prepare_time_, run_time_;
  const core::Geometry* geometry_;
  int device_;
  absl::Notification* hold_;
  Clock::time_point deadline_;
  std::thread::id prepared_by_;
};

TEST(SchedulerDispatchTest, AWorkerPreparesARealtimeJobOnlyWhenNoLoaderCan) {
  // A loader is free (fewer prepared ahead than the bound): it takes the job.
  EXPECT_FALSE(Scheduler::WorkerPreparesRealtime(/*ahead=*/3, /*bound=*/4, /*loading=*/0));
  // Loaders at the bound, one of them on a realtime job this worker can run: wait for it.
  EXPECT_FALSE(Scheduler::WorkerPreparesRealtime(4, 4, 1));
  // Loaders at the bound with other work only: the worker prepares it (no inversion).
  EXPECT_TRUE(Scheduler::WorkerPreparesRealtime(4, 4, 0));
}

TEST(SchedulerDispatchTest, RealtimeFramesArePreparedByLoadersNotByTheWorker) {
  // One loader: while it inflates frame k, the idle worker waits for it rather than take
  // frame k+1 and spend a whole preparation on its own thread.
  Scheduler s({.max_queue = 16, .prefetch = 1, .prefetch_memory_bytes = int64_t{1} << 40}, nullptr);
  s.AddWorker(std::make_unique<test_backends::NullBackend>(), 0);
  ASSERT_EQ(s.prefetch_bound(), 1);
  FrameJob::Log log;
  constexpr int kFrames = 4;
  for (int i = 0; i < kFrames; ++i) {
    s.Submit(*s.Reserve(true), std::make_shared<FrameJob>(&log, std::chrono::milliseconds(100),
                                                          std::chrono::milliseconds(10)));
  }
  ASSERT_TRUE(WaitUntil([&] {
    std::lock_guard<std::mutex> lock(log.mu);
    return log.ran == kFrames;
  }));
  std::lock_guard<std::mutex> lock(log.mu);
  EXPECT_EQ(log.prepared_on_the_running_thread, 0);
}

TEST(SchedulerDispatchTest, AnExposureLoadsAFramePerLoaderAtOnceAndStartsOnEveryGpu) {
  // Four GPUs, two workers each: the first frames are all prepared at once, and every
  // worker runs one of the first eight (none waits for another's frames to go first).
  Scheduler s({.max_queue = 64, .prefetch_memory_bytes = int64_t{1} << 40}, nullptr);
  for (int gpu = 0; gpu < 4; ++gpu) {
    for (int k = 0; k < 2; ++k) s.AddWorker(std::make_unique<test_backends::NullBackend>(), gpu);
  }
  ASSERT_EQ(s.prefetch_bound(), 8 * Scheduler::kGpuPrefetch);
  FrameJob::Log log;
  constexpr int kFrames = 30;
  for (int i = 0; i < kFrames; ++i) {
    Scheduler::Ticket ticket = i == 0 ? *s.Reserve(true) : s.ReserveAdmitted(true);
    s.Submit(std::move(ticket), std::make_shared<FrameJob>(&log, std::chrono::milliseconds(300),
                                                           std::chrono::milliseconds(200)));
  }
  ASSERT_TRUE(WaitUntil([&] {
    std::lock_guard<std::mutex> lock(log.mu);
    return log.ran == kFrames;
  }));
  std::lock_guard<std::mutex> lock(log.mu);
  EXPECT_EQ(log.most_preparing, kFrames);
  EXPECT_EQ(log.prepared_on_the_running_thread, 0);
  const std::set<int> first(log.workers.begin(), log.workers.begin() + 8);
  EXPECT_EQ(first.size(), 8u);
}

TEST(SchedulerDispatchTest, APreparedFrameGoesToTheWorkerHoldingItsGeometryWarm) {
  // Worker 0 (GPU 0) holds g2 and g3 warm, worker 1 (GPU 1) g1. Worker 1 stays busy;
  // worker 0 takes, of the frames ready (g0, g1, g2 due alike, g3 an hour later): g2
  // (warm here), then g0 (warm nowhere), then g1 (warm on the busy worker: better than
  // idle), and g3 last: a warm geometry never lets a job overtake one due much sooner.
  Scheduler s({.max_queue = 16, .prefetch_memory_bytes = int64_t{1} << 40}, nullptr);
  s.AddWorker(std::make_unique<WarmBackend>(0, std::set{FakeGeometry(2), FakeGeometry(3)}), 0);
  s.AddWorker(std::make_unique<WarmBackend>(1, std::set{FakeGeometry(1)}), 1);
  FrameJob::Log log;
  absl::Notification hold0, hold1;
  const auto none = std::chrono::milliseconds(0);
  s.Submit(*s.Reserve(false), std::make_shared<FrameJob>(&log, none, none, nullptr, 0, &hold0));
  s.Submit(*s.Reserve(false), std::make_shared<FrameJob>(&log, none, none, nullptr, 1, &hold1));
  ASSERT_TRUE(WaitUntil([&] { return s.Workers()[0].busy && s.Workers()[1].busy; }));
  for (int g : {0, 1, 2}) {
    s.Submit(*s.Reserve(false), std::make_shared<FrameJob>(&log, none, none, FakeGeometry(g)));
  }
  s.Submit(*s.Reserve(false),
           std::make_shared<FrameJob>(&log, none, none, FakeGeometry(3), -1, nullptr,
                                      Clock::now() + std::chrono::hours(2)));
  ASSERT_TRUE(WaitUntil([&] {
    std::lock_guard<std::mutex> lock(log.mu);
    return log.prepared == 6;
  }));
  hold0.Notify();
  ASSERT_TRUE(WaitUntil([&] {
    std::lock_guard<std::mutex> lock(log.mu);
    return log.ran == 5;  // worker 0's blocker and the four frames
  }));
  hold1.Notify();
  ASSERT_TRUE(WaitUntil([&] {
    std::lock_guard<std::mutex> lock(log.mu);
    return log.ran == 6;
  }));
  std::lock_guard<std::mutex> lock(log.mu);
  EXPECT_EQ(log.workers, (std::vector<int>{0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(log.geometries,
            (std::vector<const core::Geometry*>{nullptr, FakeGeometry(2), FakeGeometry(0),
                                                FakeGeometry(1), FakeGeometry(3), nullptr}));
}

// Workers (in AddWorker order) running a job now.
std::vector<int> BusyWorkers(Scheduler& s) {
  std::vector<int> busy;
  for (const WorkerState& w : s.Workers()) {
    if (w.busy) busy.push_back(w.index);
  }
  return busy;
}

TEST(SchedulerDispatchTest, AFrameGoesToAGpuThatRunsNoneBeforeSharingOne) {
  // Two GPUs, two workers each (0, 1 on GPU 0; 2, 3 on GPU 1). One GPU runs a frame; the
  // next frame goes to the other GPU, not to the busy GPU's second worker (one chance in
  // three each round by lot; twenty rounds, alternating the busy GPU).
  Scheduler s({.max_queue = 16, .prefetch_memory_bytes = int64_t{1} << 40}, nullptr);
  for (int gpu = 0; gpu < 2; ++gpu) {
    for (int k = 0; k < 2; ++k) s.AddWorker(std::make_unique<test_backends::NullBackend>(), gpu);
  }
  FrameJob::Log log;
  const auto none = std::chrono::milliseconds(0);
  for (int round = 0; round < 20; ++round) {
    const int busy_gpu = round % 2;
    absl::Notification hold_bound, hold_next;
    s.Submit(*s.Reserve(false),
             std::make_shared<FrameJob>(&log, none, none, nullptr, busy_gpu, &hold_bound));
    ASSERT_TRUE(WaitUntil([&] { return BusyWorkers(s).size() == 1; }));
    s.Submit(*s.Reserve(false), std::make_shared<FrameJob>(&log, none, none, nullptr, -1, &hold_next));
    ASSERT_TRUE(WaitUntil([&] { return BusyWorkers(s).size() == 2; }));
    const std::vector<int> busy = BusyWorkers(s);
    int on_busy_gpu = 0;
    for (int w : busy) on_busy_gpu += (w / 2 == busy_gpu) ? 1 : 0;
    EXPECT_EQ(on_busy_gpu, 1) << "round " << round << ": the frame shares GPU " << busy_gpu
                              << " while the other runs none";
    hold_bound.Notify();
    hold_next.Notify();
    ASSERT_TRUE(WaitUntil([&] { return BusyWorkers(s).empty(); }));
  }
}

TEST(SchedulerDispatchTest, FramesBeyondTheIdleGpusStillRunOnTheBusyOnes) {
  // GPU 0 runs a frame, GPU 1 none; two frames come: one goes to GPU 1, the other to GPU
  // 0's idle worker at once (leaving work to idle GPUs never leaves a frame waiting while
  // a worker could run it). A frame bound to the busy GPU runs there too.
  Scheduler s({.max_queue = 16, .prefetch_memory_bytes = int64_t{1} << 40}, nullptr);
  for (int gpu = 0; gpu < 2; ++gpu) {
    for (int k = 0; k < 2; ++k) s.AddWorker(std::make_unique<test_backends::NullBackend>(), gpu);
  }
  FrameJob::Log log;
  const auto none = std::chrono::milliseconds(0);
  absl::Notification hold;
  s.Submit(*s.Reserve(false), std::make_shared<FrameJob>(&log, none, none, nullptr, 0, &hold));
  ASSERT_TRUE(WaitUntil([&] { return BusyWorkers(s).size() == 1; }));
  for (int i = 0; i < 2; ++i) {
    s.Submit(*s.Reserve(false), std::make_shared<FrameJob>(&log, none, none, nullptr, -1, &hold));
  }
  ASSERT_TRUE(WaitUntil([&] { return BusyWorkers(s).size() == 3; }));
  s.Submit(*s.Reserve(false), std::make_shared<FrameJob>(&log, none, none, nullptr, 0, &hold));
  s.Submit(*s.Reserve(false), std::make_shared<FrameJob>(&log, none, none, nullptr, 1, &hold));
  ASSERT_TRUE(WaitUntil([&] { return BusyWorkers(s).size() == 4; }));
  hold.Notify();
  ASSERT_TRUE(WaitUntil([&] {
    std::lock_guard<std::mutex> lock(log.mu);
    return log.ran == 5;
  }));
}

}  // namespace
}  // namespace spexd::server
