// Bounded two-level priority queue in front of the workers, with a preparation stage:
// loader threads take admitted jobs in priority order and Prepare them (read and decode
// the image, warm the geometry) while the workers extract, so that a worker (a GPU)
// never waits for I/O. Each worker is a thread that owns one Backend (one per GPU, or
// one CPU backend), so device state is never shared between threads. Each worker brings
// `prefetch` loader threads, and at most `prefetch` jobs per worker are being prepared
// or wait prepared: decoding a frame can take longer than a GPU extracts one, and the
// bound keeps the memory of decoded images (~270 MB per r frame) in check.
#ifndef SPEXD_SERVER_SCHEDULER_H_
#define SPEXD_SERVER_SCHEDULER_H_

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/backend.h"

namespace spexd::server {

class ServerMetrics;

// Work handed to a worker. Prepare is called first (on a loader thread); if it returns
// true, Run follows; Abandon replaces whichever has not happened when the scheduler
// shuts down. A job that returns false from Prepare has finished itself.
class Job {
 public:
  virtual ~Job() = default;
  virtual bool Prepare() { return true; }
  // On the worker's thread; `backend` belongs to that worker for the whole call.
  virtual void Run(core::Backend& backend, int worker) = 0;
  // The job will never run (the scheduler shut down while it waited).
  virtual void Abandon(const absl::Status& status) = 0;
};

struct WorkerState {
  int index = 0;
  std::string backend;      // Backend::name()
  std::string description;  // Backend::description()
  int gpu_device = -1;
  bool healthy = true;
  bool busy = false;
};

class Scheduler {
 public:
  // `max_queue` bounds jobs waiting (to be prepared, being prepared, prepared) plus
  // uploads in progress (which hold a reservation), so that memory for queued images
  // stays bounded. `prefetch` (at least 1): see above. `metrics` may be null.
  Scheduler(int max_queue, int prefetch, ServerMetrics* metrics);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Starts a worker thread that owns `backend`, and its loader threads. `gpu_device` is
  // -1 for a CPU backend.
  void AddWorker(std::unique_ptr<core::Backend> backend, int gpu_device);

  // A queue slot held from admission (e.g. before an upload) until Submit.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept;
    Ticket& operator=(Ticket&& other) noexcept;
    ~Ticket();
    bool valid() const { return owner_ != nullptr; }
    bool realtime() const { return realtime_; }

   private:
    friend class Scheduler;
    Ticket(Scheduler* owner, bool realtime) : owner_(owner), realtime_(realtime) {}
    Scheduler* owner_ = nullptr;
    bool realtime_ = false;
  };

  // RESOURCE_EXHAUSTED (with the reason) when the queue is full, UNAVAILABLE when
  // draining or without workers.
  absl::StatusOr<Ticket> Reserve(bool realtime);
  // Queues the job; realtime jobs go before every reprocessing job, FIFO within a level.
  void Submit(Ticket ticket, std::shared_ptr<Job> job);

  // New reservations are refused from now on; queued and running jobs continue.
  void StopAccepting();
  // StopAccepting, abandons queued jobs (UNAVAILABLE), waits for running ones, joins.
  void Shutdown();

  int queue_depth();
  std::vector<WorkerState> Workers();
  // False when any worker's backend reports a sticky error (Backend::healthy()).
  bool AllHealthy();
  // Device memory of each worker's backend (Backend::Memory), in worker order. Never
  // waits for a running extraction.
  std::vector<core::BackendMemory> BackendMemory();
  // Asks every worker's backend to free its warm device state for `geometry` (the PSF
  // cache dropped it). Never waits for a running extraction: a backend that is busy
  // frees it when its request ends (Backend::Release).
  void ReleaseGeometry(const std::shared_ptr<const core::Geometry>& geometry);
  int num_workers();

 private:
  struct Queued {
    std::shared_ptr<Job> job;
    std::chrono::steady_clock::time_point admitted;
    bool realtime = false;
  };
  // FIFO per priority level; realtime first.
  struct Levels {
    std::deque<Queued> realtime, reprocessing;
    bool empty() const { return realtime.empty() && reprocessing.empty(); }
    std::size_t size() const { return realtime.size() + reprocessing.size(); }
    void Push(Queued q) { (q.realtime ? realtime : reprocessing).push_back(std::move(q)); }
    Queued Pop();
  };
  struct Worker {
    int index = 0;
    int gpu_device = -1;
    std::unique_ptr<core::Backend> backend;
    std::atomic<bool> busy{false};
    std::thread thread;
  };

  void ReleaseReservation(bool realtime);
  void LoaderLoop();
  void WorkerLoop(Worker* worker);
  void PublishDepthLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int max_queue_;
  const int prefetch_;
  ServerMetrics* const metrics_;
  absl::Mutex mu_;
  Levels pending_ ABSL_GUARDED_BY(mu_);  // admitted, waiting for a loader
  Levels ready_ ABSL_GUARDED_BY(mu_);    // prepared, waiting for a worker
  int preparing_ ABSL_GUARDED_BY(mu_) = 0;
  int reserved_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> loaders_ ABSL_GUARDED_BY(mu_);
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::unique_ptr<Worker>> workers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_SCHEDULER_H_
