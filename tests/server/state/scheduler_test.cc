#include "server/state/scheduler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "core/plan/geometry.h"
#include "core/io/psf.h"
#include "gtest/gtest.h"
#include "server/platform/status_util.h"
#include "tests/server/state/null_backend.h"
#include "tests/test_support.h"

namespace spexd::server {
namespace {

using test_backends::NullBackend;

// Reports a fixed amount of device memory and records the geometries it is asked to free.
class MemoryBackend : public core::Backend {
 public:
  MemoryBackend(int device, std::vector<const core::Geometry*>* released, std::mutex* mu)
      : device_(device), released_(released), mu_(mu) {}
  std::string name() const override { return "memory"; }
  absl::StatusOr<core::ExtractionSummary> Extract(const core::ExtractionJob&,
                                                  const core::BundleSink&) override {
    return core::ExtractionSummary{};
  }
  core::BackendMemory Memory() const override {
    core::BackendMemory m;
    m.device = device_;
    m.device_bytes = 1000 + device_;
    return m;
  }
  void Release(const std::shared_ptr<const core::Geometry>& geometry) override {
    std::lock_guard<std::mutex> lock(*mu_);
    released_->push_back(geometry.get());
  }

 private:
  int device_;
  std::vector<const core::Geometry*>* released_;
  std::mutex* mu_;
};

// Records the order in which jobs run; the first one can be held to build a queue.
class RecordingJob : public Job {
 public:
  RecordingJob(std::string name, std::vector<std::string>* log, std::mutex* mu,
               absl::Notification* hold = nullptr)
      : name_(std::move(name)), log_(log), mu_(mu), hold_(hold) {}
  void Run(core::Backend&, int, core::TaskPool&) override {
    if (hold_ != nullptr) hold_->WaitForNotification();
    std::lock_guard<std::mutex> lock(*mu_);
    log_->push_back(name_);
  }
  void Abandon(const absl::Status& status) override {
    std::lock_guard<std::mutex> lock(*mu_);
    log_->push_back(name_ + ":" + std::string(absl::StatusCodeToString(status.code())));
  }

 private:
  std::string name_;
  std::vector<std::string>* log_;
  std::mutex* mu_;
  absl::Notification* hold_;
};

// Hands a slow "streaming" task to the scheduler's streaming stage and returns at once,
// as ExtractJob does: the worker is free while the task goes on.
class StreamingJob : public Job {
 public:
  explicit StreamingJob(std::atomic<int>* streamed) : streamed_(streamed) {}
  void Run(core::Backend&, int, core::TaskPool& streaming) override {
    ASSERT_TRUE(streaming.Post([streamed = streamed_] {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      streamed->fetch_add(1);
    }));
  }
  void Abandon(const absl::Status&) override {}

 private:
  std::atomic<int>* streamed_;
};

// Waits up to 5 s until `entries` (guarded by `mu`) holds `n` of them.
template <typename T>
void WaitForSize(std::mutex& mu, const std::vector<T>& entries, std::size_t n) {
  for (int i = 0; i < 500; ++i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (entries.size() == n) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool WaitForBusy(Scheduler& s) {
  for (int i = 0; i < 200; ++i) {
    if (s.Workers()[0].busy) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Counts its preparation; Run is held by `hold` (the blocker only).
class PreparedJob : public Job {
 public:
  PreparedJob(std::atomic<int>* prepared, absl::Notification* hold = nullptr)
      : prepared_(prepared), hold_(hold) {}
  bool Prepare() override {
    prepared_->fetch_add(1);
    return true;
  }
  void Run(core::Backend&, int, core::TaskPool&) override {
    if (hold_ != nullptr) hold_->WaitForNotification();
  }
  void Abandon(const absl::Status&) override {}

 private:
  std::atomic<int>* prepared_;
  absl::Notification* hold_;
};

TEST(SchedulerPrefetchTest, DefaultsPerWorkerKindAndMemoryBound) {
  EXPECT_EQ(Scheduler::PrefetchPerWorker(0, /*gpu_worker=*/true), Scheduler::kGpuPrefetch);
  EXPECT_EQ(Scheduler::PrefetchPerWorker(0, /*gpu_worker=*/false), Scheduler::kCpuPrefetch);
  EXPECT_EQ(Scheduler::PrefetchPerWorker(3, true), 3);  // --prefetch wins
  EXPECT_EQ(Scheduler::PrefetchPerWorker(3, false), 3);
  const int64_t frame = Scheduler::kPrefetchFrameBytes;
  EXPECT_EQ(Scheduler::PrefetchBound(16, 4, 100 * frame), 16);  // memory enough
  EXPECT_EQ(Scheduler::PrefetchBound(16, 4, 6 * frame + frame / 2), 6);  // memory bounds it
  EXPECT_EQ(Scheduler::PrefetchBound(16, 4, frame), 4);  // but one per worker at least
  EXPECT_GT(Scheduler::DefaultPrefetchMemoryBytes(), 0);
}

TEST(SchedulerPrefetchTest, LoadersScaleWithGpuWorkers) {
  const int64_t plenty = 100 * Scheduler::kPrefetchFrameBytes;
  {
    Scheduler s({.prefetch_memory_bytes = plenty}, nullptr);
    s.AddWorker(std::make_unique<NullBackend>(), 0);
    EXPECT_EQ(s.prefetch_bound(), Scheduler::kGpuPrefetch);
    s.AddWorker(std::make_unique<NullBackend>(), 1);
    EXPECT_EQ(s.prefetch_bound(), 2 * Scheduler::kGpuPrefetch);
    EXPECT_EQ(s.num_loaders(), 2 * Scheduler::kGpuPrefetch);
  }
  {
    Scheduler cpu({.prefetch_memory_bytes = plenty}, nullptr);
    cpu.AddWorker(std::make_unique<NullBackend>(), -1);
    EXPECT_EQ(cpu.prefetch_bound(), Scheduler::kCpuPrefetch);
    EXPECT_EQ(cpu.num_loaders(), Scheduler::kCpuPrefetch);
  }
  {
    // Host memory for three frames: three loaders for two GPU workers.
    Scheduler small({.prefetch_memory_bytes = 3 * Scheduler::kPrefetchFrameBytes}, nullptr);
    small.AddWorker(std::make_unique<NullBackend>(), 0);
    small.AddWorker(std::make_unique<NullBackend>(), 1);
    EXPECT_EQ(small.prefetch_bound(), 3);
    EXPECT_EQ(small.num_loaders(), 3);
  }
}

// A GPU worker's frames written by the server need more streaming threads.
TEST(SchedulerPrefetchTest, StreamingThreadsPerWorkerKind) {
  EXPECT_EQ(Scheduler::StreamersPerWorker(0, /*gpu_worker=*/true), Scheduler::kGpuStreamersPerWorker);
  EXPECT_EQ(Scheduler::StreamersPerWorker(0, /*gpu_worker=*/false), Scheduler::kStreamersPerWorker);
  EXPECT_EQ(Scheduler::StreamersPerWorker(3, /*gpu_worker=*/true), 3);
  Scheduler s({}, nullptr);
  s.AddWorker(std::make_unique<NullBackend>(), 0);
  s.AddWorker(std::make_unique<NullBackend>(), 1);
  EXPECT_EQ(s.streaming_threads(), 2 * Scheduler::kGpuStreamersPerWorker);
  Scheduler cpu({.streamers_per_worker = 1}, nullptr);
  cpu.AddWorker(std::make_unique<NullBackend>(), -1);
  EXPECT_EQ(cpu.streaming_threads(), 1);
}

TEST(SchedulerPrefetchTest, PreparesUpToTheBoundWhileTheWorkerIsBusy) {
  Scheduler s({.prefetch_memory_bytes = 100 * Scheduler::kPrefetchFrameBytes}, nullptr);
  s.AddWorker(std::make_unique<NullBackend>(), 0);
  std::atomic<int> prepared{0};
  absl::Notification hold;
  s.Submit(*s.Reserve(false), std::make_shared<PreparedJob>(&prepared, &hold));
  ASSERT_TRUE(WaitForBusy(s));
  constexpr int kMore = Scheduler::kGpuPrefetch + 1;  // one more than may be prepared ahead
  for (int i = 0; i < kMore; ++i) {
    s.Submit(*s.Reserve(false), std::make_shared<PreparedJob>(&prepared));
  }
  // The blocker, then kGpuPrefetch frames ahead; the rest wait unprepared.
  for (int i = 0; i < 300 && prepared.load() < 1 + Scheduler::kGpuPrefetch; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(prepared.load(), 1 + Scheduler::kGpuPrefetch);
  hold.Notify();
  for (int i = 0; i < 300 && prepared.load() < 1 + kMore; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(prepared.load(), 1 + kMore);
}

TEST(SchedulerTest, RealtimeBeforeReprocessingFifoWithinALevel) {
  Scheduler s({.max_queue = 8, .prefetch = 1}, nullptr);
  s.AddWorker(std::make_unique<NullBackend>(), -1);
  std::vector<std::string> log;
  std::mutex mu;
  absl::Notification hold;
  s.Submit(*s.Reserve(false), std::make_shared<RecordingJob>("blocker", &log, &mu, &hold));
  ASSERT_TRUE(WaitForBusy(s));
  s.Submit(*s.Reserve(false), std::make_shared<RecordingJob>("r1", &log, &mu));
  s.Submit(*s.Reserve(true), std::make_shared<RecordingJob>("rt1", &log, &mu));
  s.Submit(*s.Reserve(false), std::make_shared<RecordingJob>("r2", &log, &mu));
  s.Submit(*s.Reserve(true), std::make_shared<RecordingJob>("rt2", &log, &mu));
  EXPECT_EQ(s.queue_depth(), 4);
  hold.Notify();
  WaitForSize(mu, log, 5);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(log, (std::vector<std::string>{"blocker", "rt1", "rt2", "r1", "r2"}));
}

// A RecordingJob due at `deadline` (EDF within a priority level).
class DueJob : public RecordingJob {
 public:
  DueJob(std::string name, std::vector<std::string>* log, std::mutex* mu,
         std::chrono::steady_clock::time_point deadline)
      : RecordingJob(std::move(name), log, mu), deadline_(deadline) {}
  std::chrono::steady_clock::time_point deadline() const override { return deadline_; }

 private:
  std::chrono::steady_clock::time_point deadline_;
};

TEST(SchedulerTest, EarliestDeadlineFirstWithinALevelFifoAmongEqualOnes) {
  Scheduler s({.max_queue = 16, .prefetch = 1}, nullptr);
  s.AddWorker(std::make_unique<NullBackend>(), -1);
  std::vector<std::string> log;
  std::mutex mu;
  absl::Notification hold;
  s.Submit(*s.Reserve(false), std::make_shared<RecordingJob>("blocker", &log, &mu, &hold));
  ASSERT_TRUE(WaitForBusy(s));
  const auto now = std::chrono::steady_clock::now();
  const auto in = [now](int seconds) { return now + std::chrono::seconds(seconds); };
  s.Submit(*s.Reserve(false), std::make_shared<RecordingJob>("none1", &log, &mu));
  s.Submit(*s.Reserve(false), std::make_shared<DueJob>("late", &log, &mu, in(300)));
  s.Submit(*s.Reserve(false), std::make_shared<DueJob>("soon1", &log, &mu, in(100)));
  s.Submit(*s.Reserve(false), std::make_shared<RecordingJob>("none2", &log, &mu));
  s.Submit(*s.Reserve(false), std::make_shared<DueJob>("soon2", &log, &mu, in(100)));
  s.Submit(*s.Reserve(true), std::make_shared<DueJob>("rt_late", &log, &mu, in(900)));
  // An admitted exposure's further frames get a slot beyond the queue's bound.
  s.Submit(s.ReserveAdmitted(false), std::make_shared<DueJob>("first", &log, &mu, in(50)));
  hold.Notify();
  WaitForSize(mu, log, 8);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(log.size(), 8u);
  EXPECT_EQ(log[0], "blocker");
  EXPECT_EQ(log[1], "rt_late");  // realtime first, whatever its deadline
  // The one loader may have prepared a reprocessing job before the others arrived: that
  // one may run first; the rest run earliest deadline first, FIFO among equal deadlines.
  std::vector<std::string> edf{"first", "soon1", "soon2", "late", "none1", "none2"};
  std::vector<std::string> after(log.begin() + 2, log.end());
  if (after != edf) {
    edf.erase(std::find(edf.begin(), edf.end(), after.front()));
    after.erase(after.begin());
  }
  EXPECT_EQ(after, edf);
}

TEST(SchedulerTest, BoundedQueueAndDraining) {
  Scheduler s({.max_queue = 2, .prefetch = 1}, nullptr);
  EXPECT_EQ(s.Reserve(false).status().code(), absl::StatusCode::kUnavailable);  // no workers
  s.AddWorker(std::make_unique<NullBackend>(), -1);
  std::vector<std::string> log;
  std::mutex mu;
  absl::Notification hold;
  s.Submit(*s.Reserve(false), std::make_shared<RecordingJob>("blocker", &log, &mu, &hold));
  ASSERT_TRUE(WaitForBusy(s));
  auto t1 = s.Reserve(false);
  auto t2 = s.Reserve(true);
  ASSERT_TRUE(t1.ok() && t2.ok());
  auto full = s.Reserve(false);  // reservations count
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.status().message().find("queue full"), absl::string_view::npos);
  EXPECT_TRUE(IsRetryable(full.status()));
  {
    auto reserve = s.Reserve(true);  // the slot kept for realtime
    EXPECT_TRUE(reserve.ok()) << reserve.status();
    EXPECT_EQ(s.Reserve(true).status().code(), absl::StatusCode::kResourceExhausted);
  }
  { Scheduler::Ticket dropped = *std::move(t1); }  // a request that failed frees its slot
  EXPECT_TRUE(s.Reserve(false).ok());
  s.StopAccepting();
  EXPECT_EQ(s.Reserve(false).status().code(), absl::StatusCode::kUnavailable);
  s.Submit(*std::move(t2), std::make_shared<RecordingJob>("queued", &log, &mu));
  hold.Notify();
  s.Shutdown();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(log.size(), 2u);
  // The running job finished; the queued one either ran before Shutdown took the queue
  // or was abandoned as UNAVAILABLE (possibly logged first).
  std::sort(log.begin(), log.end());
  EXPECT_EQ(log[0], "blocker");
  EXPECT_TRUE(log[1] == "queued" || log[1] == "queued:UNAVAILABLE") << log[1];
}

// Drain joins the streaming stage: every stream handed over has ended when Shutdown
// returns, and the worker was free while its job streamed.
TEST(SchedulerTest, ShutdownWaitsForTheStreamingItJoins) {
  Scheduler s({.max_queue = 8, .prefetch = 1}, nullptr);
  s.AddWorker(std::make_unique<NullBackend>(), -1);
  std::atomic<int> streamed{0};
  std::vector<std::string> log;
  std::mutex mu;
  for (int i = 0; i < 3; ++i) s.Submit(*s.Reserve(false), std::make_shared<StreamingJob>(&streamed));
  s.Submit(*s.Reserve(false), std::make_shared<RecordingJob>("after", &log, &mu));
  // The worker runs the job queued behind three 500 ms streams without waiting for them.
  for (int i = 0; i < 400; ++i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!log.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(log, std::vector<std::string>{"after"});
  }
  EXPECT_LT(streamed.load(), 3);
  s.Shutdown();
  EXPECT_EQ(streamed.load(), 3);
}

TEST(SchedulerTest, UploadsAreCountedApartFromQueuedWorkWithARealtimeReserve) {
  Scheduler s({.max_queue = 0, .max_uploads = 2, .realtime_reserve = 1, .prefetch = 1}, nullptr);
  s.AddWorker(std::make_unique<NullBackend>(), -1);
  EXPECT_EQ(s.CurrentLoad().max_queue, Scheduler::kMinQueue);  // automatic, one worker
  auto u1 = s.ReserveUpload(false, true);
  auto u2 = s.ReserveUpload(false, false);
  ASSERT_TRUE(u1.ok() && u2.ok());
  auto full = s.ReserveUpload(false, true);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(IsRetryable(full.status()));
  auto realtime = s.ReserveUpload(true, true);  // kept for realtime
  EXPECT_TRUE(realtime.ok()) << realtime.status();
  Scheduler::Load load = s.CurrentLoad();
  EXPECT_EQ(load.uploads, 3);
  EXPECT_EQ(load.queued, 0);  // uploads hold no queue slot
  EXPECT_EQ(load.max_uploads, 2);
  // Queue slots are independent of the uploads.
  EXPECT_TRUE(s.Reserve(false).ok());
  { Scheduler::Ticket done = *std::move(u1); }
  EXPECT_EQ(s.CurrentLoad().uploads, 2);
  s.Shutdown();
}

TEST(SchedulerTest, TheAutomaticQueueBoundScalesWithTheWorkers) {
  Scheduler s({.prefetch = 1}, nullptr);
  for (int i = 0; i < 4; ++i) s.AddWorker(std::make_unique<NullBackend>(), -1);
  EXPECT_EQ(s.CurrentLoad().max_queue, 4 * Scheduler::kQueuePerWorker);
  EXPECT_EQ(s.CurrentLoad().max_uploads, 4 * Scheduler::kQueuePerWorker);
  s.Shutdown();
}

TEST(SchedulerTest, MemoryAndReleaseReachEveryWorkersBackend) {
  Scheduler s({.max_queue = 8, .prefetch = 1}, nullptr);
  std::vector<const core::Geometry*> released;
  std::mutex mu;
  s.AddWorker(std::make_unique<MemoryBackend>(0, &released, &mu), 0);
  s.AddWorker(std::make_unique<MemoryBackend>(1, &released, &mu), 1);
  s.AddWorker(std::make_unique<NullBackend>(), -1);
  const std::vector<core::BackendMemory> memory = s.BackendMemory();
  ASSERT_EQ(memory.size(), 3u);
  EXPECT_EQ(memory[0].device, 0);
  EXPECT_EQ(memory[0].device_bytes, 1000);
  EXPECT_EQ(memory[1].device, 1);
  EXPECT_EQ(memory[1].device_bytes, 1001);
  EXPECT_EQ(memory[2].device, -1);  // Backend's default: no device memory
  EXPECT_EQ(memory[2].device_bytes, 0);
  std::shared_ptr<const core::Psf> psf = testing::LoadBundledPsf();
  ASSERT_NE(psf, nullptr);
  core::ExtractionParams p;
  p.wmin = 5760.0;
  p.wmax = 5800.0;
  p.nspec = 25;
  auto geometry = core::Geometry::Create(psf, p, 4128, 4114, /*cache_spots=*/false);
  ASSERT_TRUE(geometry.ok()) << geometry.status();
  s.ReleaseGeometry(*geometry);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(released, (std::vector<const core::Geometry*>{geometry->get(), geometry->get()}));
}

// Runs on whichever worker takes it and records that worker; bound to `device` (a job
// whose CUDA regions are on that GPU).
class DeviceJob : public Job {
 public:
  DeviceJob(int device, std::vector<std::pair<int, int>>* runs, std::mutex* mu)
      : device_(device), runs_(runs), mu_(mu) {}
  int device() const override { return device_; }
  void Run(core::Backend& backend, int, core::TaskPool&) override {
    std::lock_guard<std::mutex> lock(*mu_);
    runs_->emplace_back(device_, backend.Memory().device);
  }
  void Abandon(const absl::Status& status) override {
    std::lock_guard<std::mutex> lock(*mu_);
    runs_->emplace_back(device_, status.code() == absl::StatusCode::kFailedPrecondition ? -2 : -3);
  }

 private:
  int device_;
  std::vector<std::pair<int, int>>* runs_;
  std::mutex* mu_;
};

TEST(SchedulerTest, JobsBoundToAGpuRunOnThatGpusWorker) {
  std::vector<const core::Geometry*> released;
  std::mutex release_mu;
  Scheduler s({.max_queue = 64, .prefetch = 1}, nullptr);
  s.AddWorker(std::make_unique<MemoryBackend>(0, &released, &release_mu), 0);
  s.AddWorker(std::make_unique<MemoryBackend>(1, &released, &release_mu), 1);
  std::vector<std::pair<int, int>> runs;  // (job's device, device of the worker that ran it)
  std::mutex mu;
  for (int i = 0; i < 20; ++i) {
    s.Submit(*s.Reserve(false), std::make_shared<DeviceJob>(i % 2, &runs, &mu));
  }
  // A device without a worker: refused at once, never queued forever.
  s.Submit(*s.Reserve(false), std::make_shared<DeviceJob>(7, &runs, &mu));
  WaitForSize(mu, runs, 21);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(runs.size(), 21u);
  for (const auto& [job_device, worker_device] : runs) {
    if (job_device == 7) {
      EXPECT_EQ(worker_device, -2);  // abandoned with FAILED_PRECONDITION
    } else {
      EXPECT_EQ(job_device, worker_device);
    }
  }
}

}  // namespace
}  // namespace spexd::server
