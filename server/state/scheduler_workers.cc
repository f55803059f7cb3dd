// The scheduler's two kinds of threads: loaders, which prepare admitted jobs ahead, and
// workers, which take prepared jobs (the realtime rules, a warm geometry first, a GPU that
// runs none before a busy one) and run them on their backend.
#include "server/state/scheduler.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "core/base/thread_name.h"
#include "server/platform/log.h"
#include "server/platform/metrics.h"

namespace spexd::server {

int Scheduler::LoadingRealtimeForLocked(int device) const {
  int n = 0;
  for (const auto& [job_device, count] : loading_realtime_) {
    if (job_device < 0 || job_device == device) n += count;
  }
  return n;
}

bool Scheduler::LeavesToIdleGpuLocked(int device) const {
  if (device < 0) return false;
  const auto here = gpu_running_.find(device);
  if (here == gpu_running_.end() || here->second == 0) return false;
  std::set<int> idle_gpus;
  for (const auto& w : workers_) {
    if (w->gpu_device < 0 || w->gpu_device == device || !w->waiting || !w->backend->healthy()) {
      continue;
    }
    const auto running = gpu_running_.find(w->gpu_device);
    if (running == gpu_running_.end() || running->second == 0) idle_gpus.insert(w->gpu_device);
  }
  if (idle_gpus.empty()) return false;
  // Each idle GPU's worker takes one of the jobs any worker may run; this one takes what
  // is left over, and a job bound to its own GPU.
  int any = 0;
  for (const std::deque<QueuedJob>* q : {&ready_.realtime, &ready_.reprocessing}) {
    for (const QueuedJob& item : *q) {
      if (item.device == device) return false;
      if (item.device < 0) ++any;
    }
  }
  return any <= static_cast<int>(idle_gpus.size());
}

void Scheduler::WarmGeometriesLocked(const Worker* w, std::set<const core::Geometry*>* here,
                                     std::set<const core::Geometry*>* elsewhere) const {
  // Backend::Memory never waits for a running extraction (a snapshot under the backend's
  // own lock): cheap enough for every job a worker takes.
  for (const auto& other : workers_) {
    std::set<const core::Geometry*>* into = other.get() == w ? here : elsewhere;
    for (const auto& [geometry, bytes] : other->backend->Memory().geometry_bytes) {
      if (bytes > 0) into->insert(geometry);
    }
  }
}

void Scheduler::LoaderLoop() {
  core::NameThisThread("spexd-load");
  for (;;) {
    QueuedJob item;
    {
      absl::MutexLock lock(&mu_);
      // Prepare ahead only up to `prefetch` jobs per worker (memory of decoded images).
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        const std::size_t ahead = ready_.size() + static_cast<std::size_t>(preparing_);
        return stopping_ ||
               (!pending_.empty() && ahead < static_cast<std::size_t>(PrefetchBoundLocked()));
      };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      item = pending_.Pop();
      ++preparing_;
      if (item.realtime) {
        ++preparing_realtime_;
        ++loading_realtime_[item.device];
      }
      PublishDepthLocked();
    }
    if (metrics_ != nullptr) {
      metrics_->ObserveQueueWait(item.realtime,
                                 std::chrono::duration<double>(clock_() - item.admitted).count());
    }
    const bool prepared = item.job->Prepare();
    bool abandon = false;
    {
      absl::MutexLock lock(&mu_);
      --preparing_;
      if (item.realtime) {
        --preparing_realtime_;
        if (--loading_realtime_[item.device] == 0) loading_realtime_.erase(item.device);
      }
      if (prepared) {
        if (stopping_) {
          abandon = true;
        } else {
          ready_.Push(std::move(item));
        }
      }
      PublishDepthLocked();
    }
    if (abandon) item.job->Abandon(absl::UnavailableError("server is shutting down"));
  }
}

void Scheduler::WorkerLoop(Worker* w) {
  core::NameThisThread(absl::StrCat("spexd-worker", w->index));
  for (;;) {
    QueuedJob item;
    bool prepare_here = false;
    {
      absl::MutexLock lock(&mu_);
      // A realtime job still waiting for preparation goes before a prepared reprocessing
      // one: when no loader can take it, the worker prepares it itself rather than let
      // prefetching invert priorities (WorkerPreparesRealtime).
      const int device = w->gpu_device;
      auto realtime_waits = [this, device]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        if (!JobLevels::HasFor(pending_.realtime, device) || JobLevels::HasFor(ready_.realtime, device)) {
          return false;
        }
        const int ahead = static_cast<int>(ready_.size()) + preparing_;
        return WorkerPreparesRealtime(ahead, PrefetchBoundLocked(),
                                      LoadingRealtimeForLocked(device));
      };
      auto ready = [&, this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || realtime_waits() ||
               (ready_.HasFor(device) && !LeavesToIdleGpuLocked(device));
      };
      w->waiting = true;
      mu_.Await(absl::Condition(&ready));
      w->waiting = false;
      if (stopping_) return;
      if (device >= 0) ++gpu_running_[device];
      if (realtime_waits()) {
        item = pending_.PopFor(device, /*realtime_only=*/true);
        ++preparing_;
        ++preparing_realtime_;
        prepare_here = true;
      } else {
        std::set<const core::Geometry*> warm_here, warm_elsewhere;
        WarmGeometriesLocked(w, &warm_here, &warm_elsewhere);
        item = ready_.PopWarmFor(device, warm_here, warm_elsewhere);
      }
      ++running_;
      PublishDepthLocked();
    }
    w->busy.store(true);
    if (metrics_ != nullptr) {
      metrics_->SetBackendState(w->index, w->backend->name(), w->backend->healthy(), true);
    }
    bool run = true;
    if (prepare_here) {
      if (metrics_ != nullptr) {
        metrics_->ObserveQueueWait(
            item.realtime, std::chrono::duration<double>(clock_() - item.admitted).count());
      }
      run = item.job->Prepare();
      absl::MutexLock lock(&mu_);
      --preparing_;
      --preparing_realtime_;
    }
    if (run) item.job->Run(*w->backend, w->index, streaming_);
    item.job.reset();  // the worker's reference; streaming may still hold the job
    w->busy.store(false);
    {
      absl::MutexLock lock(&mu_);
      --running_;
      if (w->gpu_device >= 0) --gpu_running_[w->gpu_device];
      PublishDepthLocked();
    }
    const bool healthy = w->backend->healthy();
    if (metrics_ != nullptr) metrics_->SetBackendState(w->index, w->backend->name(), healthy, false);
    if (!healthy) {
      Log(LogLevel::kError, "backend_unhealthy",
          {{"worker", w->index}, {"backend", w->backend->description()}});
    }
  }
}

}  // namespace spexd::server
