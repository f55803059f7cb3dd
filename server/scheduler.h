// Bounded two-level priority queue in front of the workers. Each worker is a thread that
// owns one Backend (one per GPU, or one CPU backend) and runs jobs to completion, so
// that device state is never shared between threads.
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

// Work handed to a worker. Exactly one of Run or Abandon is called, once.
class Job {
 public:
  virtual ~Job() = default;
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
  // `max_queue` bounds jobs waiting for a worker plus uploads in progress (which hold
  // a reservation), so that memory for queued images stays bounded. `metrics` may be null.
  Scheduler(int max_queue, ServerMetrics* metrics);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Starts a worker thread that owns `backend`. `gpu_device` is -1 for a CPU backend.
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
  int num_workers();

 private:
  struct Queued {
    std::shared_ptr<Job> job;
    std::chrono::steady_clock::time_point admitted;
  };
  struct Worker {
    int index = 0;
    int gpu_device = -1;
    std::unique_ptr<core::Backend> backend;
    std::atomic<bool> busy{false};
    std::thread thread;
  };

  void ReleaseReservation(bool realtime);
  void WorkerLoop(Worker* worker);
  void PublishDepthLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int max_queue_;
  ServerMetrics* const metrics_;
  absl::Mutex mu_;
  std::deque<Queued> realtime_ ABSL_GUARDED_BY(mu_);
  std::deque<Queued> reprocessing_ ABSL_GUARDED_BY(mu_);
  int reserved_ ABSL_GUARDED_BY(mu_) = 0;
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::unique_ptr<Worker>> workers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_SCHEDULER_H_
