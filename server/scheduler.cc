#include "server/scheduler.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/log.h"
#include "server/metrics.h"

namespace spexd::server {

Scheduler::Ticket::Ticket(Ticket&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), realtime_(other.realtime_) {}

Scheduler::Ticket& Scheduler::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    if (owner_ != nullptr) owner_->ReleaseReservation(realtime_);
    owner_ = std::exchange(other.owner_, nullptr);
    realtime_ = other.realtime_;
  }
  return *this;
}

Scheduler::Ticket::~Ticket() {
  if (owner_ != nullptr) owner_->ReleaseReservation(realtime_);
}

Scheduler::Scheduler(int max_queue, ServerMetrics* metrics)
    : max_queue_(max_queue), metrics_(metrics) {}

Scheduler::~Scheduler() { Shutdown(); }

void Scheduler::AddWorker(std::unique_ptr<core::Backend> backend, int gpu_device) {
  auto w = std::make_unique<Worker>();
  w->index = static_cast<int>(workers_.size());
  w->gpu_device = gpu_device;
  w->backend = std::move(backend);
  Worker* raw = w.get();
  if (metrics_ != nullptr) {
    metrics_->SetBackendState(raw->index, raw->backend->name(), raw->backend->healthy(), false);
  }
  Log(LogLevel::kInfo, "worker_started",
      {{"worker", raw->index}, {"backend", raw->backend->description()},
       {"gpu_device", gpu_device}});
  raw->thread = std::thread([this, raw] { WorkerLoop(raw); });
  absl::MutexLock lock(&mu_);
  workers_.push_back(std::move(w));
}

absl::StatusOr<Scheduler::Ticket> Scheduler::Reserve(bool realtime) {
  absl::MutexLock lock(&mu_);
  if (!accepting_) {
    return absl::UnavailableError("server is draining: not accepting new extractions");
  }
  if (workers_.empty()) return absl::UnavailableError("server has no workers");
  const int used = static_cast<int>(realtime_.size() + reprocessing_.size()) + reserved_;
  if (used >= max_queue_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "queue full: ", used, " extraction(s) waiting or uploading (limit ", max_queue_,
        ", --max_queue); retry later or on another replica"));
  }
  ++reserved_;
  return Ticket(this, realtime);
}

void Scheduler::ReleaseReservation(bool /*realtime*/) {
  absl::MutexLock lock(&mu_);
  --reserved_;
}

void Scheduler::Submit(Ticket ticket, std::shared_ptr<Job> job) {
  const bool realtime = ticket.realtime();
  ticket.owner_ = nullptr;  // the reservation becomes the queue entry
  bool abandon = false;
  {
    absl::MutexLock lock(&mu_);
    --reserved_;
    if (stopping_) {
      abandon = true;
    } else {
      (realtime ? realtime_ : reprocessing_)
          .push_back(Queued{std::move(job), std::chrono::steady_clock::now()});
      PublishDepthLocked();
    }
  }
  if (abandon) job->Abandon(absl::UnavailableError("server is shutting down"));
}

void Scheduler::StopAccepting() {
  absl::MutexLock lock(&mu_);
  accepting_ = false;
}

void Scheduler::Shutdown() {
  std::deque<Queued> dropped;
  {
    absl::MutexLock lock(&mu_);
    accepting_ = false;
    if (stopping_) return;
    stopping_ = true;
    for (auto* q : {&realtime_, &reprocessing_}) {
      for (auto& item : *q) dropped.push_back(std::move(item));
      q->clear();
    }
    PublishDepthLocked();
  }
  for (auto& item : dropped) item.job->Abandon(absl::UnavailableError("server is shutting down"));
  std::vector<Worker*> workers;
  {
    absl::MutexLock lock(&mu_);
    for (auto& w : workers_) workers.push_back(w.get());
  }
  for (Worker* w : workers) {
    if (w->thread.joinable()) w->thread.join();
  }
}

void Scheduler::WorkerLoop(Worker* w) {
  for (;;) {
    Queued item;
    bool realtime = false;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !realtime_.empty() || !reprocessing_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (stopping_ && realtime_.empty() && reprocessing_.empty()) return;
      realtime = !realtime_.empty();
      auto& q = realtime ? realtime_ : reprocessing_;
      item = std::move(q.front());
      q.pop_front();
      PublishDepthLocked();
    }
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - item.admitted).count();
    if (metrics_ != nullptr) {
      metrics_->ObserveQueueWait(realtime, waited);
      metrics_->SetBackendState(w->index, w->backend->name(), w->backend->healthy(), true);
    }
    w->busy.store(true);
    item.job->Run(*w->backend, w->index);
    item.job.reset();  // release the job's memory (image, results) before idling
    w->busy.store(false);
    const bool healthy = w->backend->healthy();
    if (metrics_ != nullptr) metrics_->SetBackendState(w->index, w->backend->name(), healthy, false);
    if (!healthy) {
      Log(LogLevel::kError, "backend_unhealthy",
          {{"worker", w->index}, {"backend", w->backend->description()}});
    }
  }
}

void Scheduler::PublishDepthLocked() {
  if (metrics_ == nullptr) return;
  metrics_->SetQueueDepth(true, static_cast<double>(realtime_.size()));
  metrics_->SetQueueDepth(false, static_cast<double>(reprocessing_.size()));
}

int Scheduler::queue_depth() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(realtime_.size() + reprocessing_.size());
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

int Scheduler::num_workers() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(workers_.size());
}

}  // namespace spexd::server
