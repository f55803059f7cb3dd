#include "server/state/scheduler.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/platform/log.h"
#include "server/platform/metrics.h"
#include "server/platform/status_util.h"

namespace spexd::server {

Scheduler::Ticket::Ticket(Ticket&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)),
      realtime_(other.realtime_),
      upload_(other.upload_) {}

Scheduler::Ticket& Scheduler::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    if (owner_ != nullptr) owner_->ReleaseReservation(realtime_, upload_);
    owner_ = std::exchange(other.owner_, nullptr);
    realtime_ = other.realtime_;
    upload_ = other.upload_;
  }
  return *this;
}

Scheduler::Ticket::~Ticket() {
  if (owner_ != nullptr) owner_->ReleaseReservation(realtime_, upload_);
}

Scheduler::Scheduler(const SchedulerOptions& o, ServerMetrics* metrics)
    : max_queue_(o.max_queue),
      max_uploads_(o.max_uploads),
      realtime_reserve_(std::max(0, o.realtime_reserve)),
      prefetch_(std::max(0, o.prefetch)),
      prefetch_memory_bytes_(o.prefetch_memory_bytes > 0 ? o.prefetch_memory_bytes
                                                         : DefaultPrefetchMemoryBytes()),
      streamers_per_worker_(std::max(0, o.streamers_per_worker)),
      // Clamped (≈ 30 years) so that the conversion cannot overflow; NaN counts as 0.
      no_deadline_horizon_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(o.no_deadline_horizon_seconds > 0
                                            ? std::min(o.no_deadline_horizon_seconds, 1e9)
                                            : 0.0))),
      clock_(o.clock ? o.clock : [] { return std::chrono::steady_clock::now(); }),
      metrics_(metrics) {}

std::chrono::steady_clock::time_point Scheduler::OrderingDeadline(
    std::chrono::steady_clock::time_point deadline, std::chrono::steady_clock::time_point admitted,
    std::chrono::steady_clock::duration horizon) {
  using TimePoint = std::chrono::steady_clock::time_point;
  if (deadline != TimePoint::max() || horizon <= horizon.zero()) return deadline;
  return horizon >= TimePoint::max() - admitted ? TimePoint::max() : admitted + horizon;
}

int Scheduler::PrefetchBound(int prefetch_sum, int workers, int64_t memory_bytes) {
  const int64_t by_memory = memory_bytes / kPrefetchFrameBytes;
  return static_cast<int>(std::max<int64_t>(workers, std::min<int64_t>(prefetch_sum, by_memory)));
}

int64_t Scheduler::DefaultPrefetchMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  int64_t memory = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : int64_t{16} << 30;
  // In a container the cgroup's limit (v2: memory.max, "max" when none) is what counts.
  std::ifstream cgroup("/sys/fs/cgroup/memory.max");
  int64_t limit = 0;
  if (cgroup >> limit && limit > 0) memory = std::min(memory, limit);
  return memory / 4;
}

int Scheduler::PrefetchBoundLocked() const {
  return PrefetchBound(prefetch_sum_, static_cast<int>(workers_.size()), prefetch_memory_bytes_);
}

int Scheduler::prefetch_bound() {
  absl::MutexLock lock(&mu_);
  return PrefetchBoundLocked();
}

int Scheduler::streaming_threads() {
  absl::MutexLock lock(&mu_);
  return streamers_sum_;
}

int Scheduler::num_loaders() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(loaders_.size());
}

int Scheduler::QueueLimitLocked() const {
  if (max_queue_ > 0) return max_queue_;
  return std::max(kMinQueue, kQueuePerWorker * static_cast<int>(workers_.size()));
}

int Scheduler::UploadLimitLocked() const {
  return max_uploads_ > 0 ? max_uploads_ : QueueLimitLocked();
}

int Scheduler::QueuedLocked() const {
  return static_cast<int>(pending_.size() + ready_.size()) + preparing_;
}

Scheduler::~Scheduler() { Shutdown(); }

void Scheduler::AddWorker(std::unique_ptr<core::Backend> backend, int gpu_device) {
  auto w = std::make_unique<Worker>();
  w->gpu_device = gpu_device;
  w->backend = std::move(backend);
  Worker* raw = w.get();
  absl::MutexLock lock(&mu_);
  raw->index = static_cast<int>(workers_.size());
  const int prefetch = PrefetchPerWorker(prefetch_, gpu_device >= 0);
  prefetch_sum_ += prefetch;
  if (metrics_ != nullptr) {
    metrics_->AddWorker(raw->index, gpu_device);
    metrics_->SetBackendState(raw->index, raw->backend->name(), raw->backend->healthy(), false);
  }
  raw->thread = std::thread([this, raw] { WorkerLoop(raw); });
  workers_.push_back(std::move(w));
  // One loader per frame that may be prepared ahead (a loader holds at most one).
  const int bound = PrefetchBoundLocked();
  while (static_cast<int>(loaders_.size()) < bound) loaders_.emplace_back([this] { LoaderLoop(); });
  Log(LogLevel::kInfo, "worker_started",
      {{"worker", raw->index}, {"backend", raw->backend->description()},
       {"gpu_device", gpu_device}, {"prefetch", prefetch}, {"prefetch_bound", bound},
       {"loaders", static_cast<int>(loaders_.size())}});
  const int streamers = StreamersPerWorker(streamers_per_worker_, gpu_device >= 0);
  streamers_sum_ += streamers;
  streaming_.AddThreads(streamers, "spexd-stream");
}

absl::StatusOr<Scheduler::Ticket> Scheduler::Reserve(bool realtime) {
  absl::MutexLock lock(&mu_);
  if (!accepting_) {
    return absl::UnavailableError("server is draining: not accepting new extractions");
  }
  if (workers_.empty()) return absl::UnavailableError("server has no workers");
  const int used = QueuedLocked() + reserved_;
  const int limit = QueueLimitLocked() + (realtime ? realtime_reserve_ : 0);
  if (used >= limit) {
    return Retryable(absl::ResourceExhaustedError(absl::StrCat(
        "queue full: ", used, " extraction(s) waiting (limit ", QueueLimitLocked(),
        ", --max_queue, plus ", realtime_reserve_,
        " for realtime); retry later or on another replica")));
  }
  ++reserved_;
  PublishDepthLocked();
  return Ticket(this, realtime, /*upload=*/false);
}

absl::StatusOr<Scheduler::Ticket> Scheduler::ReserveUpload(bool realtime, bool then_queue) {
  absl::MutexLock lock(&mu_);
  if (!accepting_) return absl::UnavailableError("server is draining: not accepting uploads");
  const int extra = realtime ? realtime_reserve_ : 0;
  if (uploads_ >= UploadLimitLocked() + extra) {
    return Retryable(absl::ResourceExhaustedError(absl::StrCat(
        "too many uploads in progress: ", uploads_, " (limit ", UploadLimitLocked(),
        ", --max_uploads, plus ", realtime_reserve_,
        " for realtime); retry later or on another replica")));
  }
  if (then_queue) {
    if (workers_.empty()) return absl::UnavailableError("server has no workers");
    const int used = QueuedLocked() + reserved_;
    if (used >= QueueLimitLocked() + extra) {
      return Retryable(absl::ResourceExhaustedError(absl::StrCat(
          "queue full: ", used, " extraction(s) waiting (limit ", QueueLimitLocked(),
          ", --max_queue, plus ", realtime_reserve_,
          " for realtime); retry later or on another replica")));
    }
  }
  ++uploads_;
  PublishDepthLocked();
  return Ticket(this, realtime, /*upload=*/true);
}

Scheduler::Ticket Scheduler::ReserveAdmitted(bool realtime) {
  absl::MutexLock lock(&mu_);
  ++reserved_;
  PublishDepthLocked();
  return Ticket(this, realtime, /*upload=*/false);
}

void Scheduler::ReleaseReservation(bool /*realtime*/, bool upload) {
  absl::MutexLock lock(&mu_);
  --(upload ? uploads_ : reserved_);
  PublishDepthLocked();
}

void Scheduler::Submit(Ticket ticket, std::shared_ptr<Job> job) {
  const bool realtime = ticket.realtime();
  const int device = job->device();
  // From the job's own admission, an exposure's frames included (each submitted as its
  // window frees): a frame due from the exposure's admission would, once that is past,
  // go before every job with a deadline for as long as the exposure lasts.
  const auto now = clock_();
  const auto due = OrderingDeadline(job->deadline(), now, no_deadline_horizon_);
  ticket.owner_ = nullptr;  // the reservation becomes the queue entry
  absl::Status abandon;
  {
    absl::MutexLock lock(&mu_);
    --(ticket.upload() ? uploads_ : reserved_);
    const bool runnable = device < 0 || std::any_of(workers_.begin(), workers_.end(),
                                                    [device](const std::unique_ptr<Worker>& w) {
                                                      return w->gpu_device == device;
                                                    });
    if (stopping_) {
      abandon = absl::UnavailableError("server is shutting down");
    } else if (!runnable) {
      abandon = absl::FailedPreconditionError(
          absl::StrCat("the request's CUDA region is on GPU ", device, ", where no worker runs"));
    } else {
      pending_.Push(QueuedJob{job, now, realtime, device, due});
      PublishDepthLocked();
    }
  }
  if (!abandon.ok()) job->Abandon(abandon);
}

void Scheduler::StopAccepting() {
  absl::MutexLock lock(&mu_);
  accepting_ = false;
}

void Scheduler::Shutdown() {
  std::vector<QueuedJob> dropped;
  std::vector<Worker*> workers;
  std::vector<std::thread> loaders;
  {
    absl::MutexLock lock(&mu_);
    accepting_ = false;
    if (stopping_) return;
    stopping_ = true;
    for (JobLevels* levels : {&pending_, &ready_}) {
      while (!levels->empty()) dropped.push_back(levels->Pop());
    }
    PublishDepthLocked();
    for (auto& w : workers_) workers.push_back(w.get());
    loaders.swap(loaders_);
  }
  for (auto& item : dropped) item.job->Abandon(absl::UnavailableError("server is shutting down"));
  for (auto& t : loaders) {
    if (t.joinable()) t.join();
  }
  for (Worker* w : workers) {
    if (w->thread.joinable()) w->thread.join();
  }
  // No job can post any more: finish the streaming handed over, join its threads.
  streaming_.Shutdown();
}

void Scheduler::PublishDepthLocked() {
  if (metrics_ == nullptr) return;
  // Jobs being prepared (read, decoded) still wait for a worker: they count as queued.
  metrics_->SetQueueDepth(true, static_cast<double>(pending_.realtime.size() +
                                                    ready_.realtime.size() + preparing_realtime_));
  metrics_->SetQueueDepth(false, static_cast<double>(pending_.reprocessing.size() +
                                                     ready_.reprocessing.size() + preparing_ -
                                                     preparing_realtime_));
  metrics_->SetUploadsInProgress(uploads_);
  metrics_->SetRunningJobs(running_);
}

int Scheduler::queue_depth() {
  absl::MutexLock lock(&mu_);
  return QueuedLocked();
}

Scheduler::Load Scheduler::CurrentLoad() {
  absl::MutexLock lock(&mu_);
  Load l;
  l.uploads = uploads_;
  l.queued = QueuedLocked();
  l.running = running_;
  l.max_queue = QueueLimitLocked();
  l.max_uploads = UploadLimitLocked();
  l.realtime_reserve = realtime_reserve_;
  return l;
}

std::vector<WorkerState> Scheduler::Workers() {
  absl::MutexLock lock(&mu_);
  std::vector<WorkerState> out;
  for (const auto& w : workers_) {
    WorkerState s;
    s.index = w->index;
    s.backend = w->backend->name();
    s.description = w->backend->description();
    s.gpu_device = w->gpu_device;
    s.healthy = w->backend->healthy();
    s.busy = w->busy.load();
    out.push_back(std::move(s));
  }
  return out;
}

bool Scheduler::AllHealthy() {
  absl::MutexLock lock(&mu_);
  for (const auto& w : workers_) {
    if (!w->backend->healthy()) return false;
  }
  return true;
}

std::vector<core::BackendMemory> Scheduler::BackendMemory() {
  absl::MutexLock lock(&mu_);
  std::vector<core::BackendMemory> out;
  out.reserve(workers_.size());
  for (const auto& w : workers_) out.push_back(w->backend->Memory());
  return out;
}

void Scheduler::ReleaseGeometry(const std::shared_ptr<const core::Geometry>& geometry) {
  // Workers are never removed before the scheduler is destroyed: the pointers stay valid
  // outside the lock, where a backend may spend a few milliseconds freeing memory.
  std::vector<core::Backend*> backends;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& w : workers_) backends.push_back(w->backend.get());
  }
  for (core::Backend* b : backends) b->Release(geometry);
}

absl::StatusOr<std::unique_ptr<core::ImportedRegion>> Scheduler::ImportRegion(
    const std::string& ipc_handle, int device, uint64_t size) {
  // As in ReleaseGeometry: workers live as long as the scheduler.
  core::Backend* on_device = nullptr;
  core::Backend* any = nullptr;
  std::string devices;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& w : workers_) {
      if (any == nullptr) any = w->backend.get();
      if (w->gpu_device == device && on_device == nullptr) on_device = w->backend.get();
      if (w->gpu_device >= 0) absl::StrAppend(&devices, devices.empty() ? "" : ",", w->gpu_device);
    }
  }
  if (on_device != nullptr) return core::ImportRegion(*on_device, ipc_handle, device, size);
  if (devices.empty() && any != nullptr) return core::ImportRegion(*any, ipc_handle, device, size);
  return absl::FailedPreconditionError(absl::StrCat(
      "no worker runs on GPU ", device, " (workers on GPU(s): ", devices.empty() ? "none" : devices,
      "); register the region with a server on that GPU"));
}

int Scheduler::num_workers() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(workers_.size());
}

}  // namespace spexd::server
