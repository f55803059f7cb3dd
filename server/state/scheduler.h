// Bounded two-level priority queue (job_levels.h) in front of the workers, with a
// preparation stage: loader threads take admitted jobs in priority order and Prepare them
// (read and decode the image, warm the geometry) while the workers extract, so that a
// worker (a GPU) never waits for I/O. Each worker is a thread that owns one Backend (one
// per GPU, or one CPU backend), so device state is never shared between threads. Each
// worker brings its prefetch of loader threads, and at most that many jobs per worker are
// being prepared or wait prepared: reading a frame (a .fits.gz inflates on one thread) can
// take longer than a GPU extracts one. The prefetch is per worker (PrefetchPerWorker: more
// for a GPU worker than for the CPU backend) and the total is bounded by host memory
// (PrefetchBound), which keeps the memory of decoded images in check. The scheduler also
// owns the streaming stage (StreamersPerWorker threads per worker): a job hands its
// response streaming there, so the worker is free once the backend returns, and Shutdown
// runs what was handed over to the end and joins; no thread outlives it.
#ifndef SPEXD_SERVER_SCHEDULER_H_
#define SPEXD_SERVER_SCHEDULER_H_

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/backend/backend.h"
#include "core/base/task_pool.h"
#include "server/state/job.h"
#include "server/state/job_levels.h"

namespace spexd::server {

class ServerMetrics;

struct WorkerState {
  int index = 0;
  std::string backend;      // Backend::name()
  std::string description;  // Backend::description()
  int gpu_device = -1;
  bool healthy = true;
  bool busy = false;
};

// The Scheduler's bounds and sizes (spexd flags of the same names, server/server_config.h).
struct SchedulerOptions {
  // Jobs waiting (to be prepared, being prepared, prepared), so that memory for queued
  // images stays bounded; 0 scales it with the workers (kQueuePerWorker each, at least
  // kMinQueue).
  int max_queue = 0;
  // Uploads in progress (extraction images and PSFs), counted apart from queued work; 0
  // means the queue's bound.
  int max_uploads = 0;
  // Realtime requests may exceed both bounds by this much, so that stalled or bulk
  // reprocessing never locks realtime out.
  int realtime_reserve = 1;
  int prefetch = 0;  // frames prepared ahead per worker; 0: PrefetchPerWorker's default
  // Bound on the frames prepared ahead over all workers (PrefetchBound; 0: a quarter of
  // the host's memory).
  int64_t prefetch_memory_bytes = 0;
  int streamers_per_worker = 0;  // streaming threads added with each worker (0: StreamersPerWorker)
  // A job without a deadline is ordered as if due this long after its Submit (admission to
  // the queue), so that a steady stream of jobs with deadlines cannot starve it; 0: after
  // every job with one.
  double no_deadline_horizon_seconds = 600;
  // The time Submit and the queue-wait metric read (tests: a fake clock); empty: steady_clock.
  std::function<std::chrono::steady_clock::time_point()> clock = nullptr;
};

class Scheduler {
 public:
  // `metrics` may be null.
  Scheduler(const SchedulerOptions& options, ServerMetrics* metrics);
  // The default prefetch per worker. A GPU worker extracts an r frame in 0.1-0.13 s while
  // one loader reads and decodes one in 0.04-0.1 s, or 0.45 s for a .fits.gz (inflated on
  // one thread), so it needs about five loaders for gzip inputs (4 kept an H200 at 0.885 of
  // its pace); the CPU backend takes seconds per frame and uses every core.
  // Eight: a GPU node has about 16 cores a GPU and two workers a GPU, so an exposure's
  // first frames inflate one a core at once rather than six a worker.
  static constexpr int kGpuPrefetch = 8;
  static constexpr int kCpuPrefetch = 2;
  static int PrefetchPerWorker(int requested, bool gpu_worker) {
    return requested > 0 ? requested : gpu_worker ? kGpuPrefetch : kCpuPrefetch;
  }
  // Host memory one frame prepared ahead may hold: a DESI r frame decoded with float64
  // planes (4128 x 4114 x (8 + 8 + 2) bytes, plus header and FIBERMAP); float32 planes
  // take about half.
  static constexpr int64_t kPrefetchFrameBytes = int64_t{320} << 20;
  // Frames prepared ahead over all workers: the sum of their prefetch, at most what
  // `memory_bytes` holds at kPrefetchFrameBytes each, at least one per worker.
  static int PrefetchBound(int prefetch_sum, int workers, int64_t memory_bytes);
  // What a `prefetch_memory_bytes` of 0 means here: a quarter of the physical memory.
  static int64_t DefaultPrefetchMemoryBytes();
  static constexpr int kQueuePerWorker = 8;
  static constexpr int kMinQueue = 16;
  // Streaming threads per worker, by default: one for the job a worker just extracted (or
  // is extracting), one for the job before it that may still be writing its products. A
  // job whose stream has no thread yet keeps its bundles (and planes) until one is free.
  // A GPU worker gets more: a frame the server writes (server_output_path, every frame of
  // an exposure) costs its streaming thread ≈ 0.3 s of CPU (specmask, FITS encoding,
  // fsync'd write) against ≈ 0.1 s of GPU, so two threads would hold a GPU to ≈ 6 frames/s.
  static constexpr int kStreamersPerWorker = 2;
  static constexpr int kGpuStreamersPerWorker = 4;
  static int StreamersPerWorker(int requested, bool gpu_worker) {
    return requested > 0 ? requested : gpu_worker ? kGpuStreamersPerWorker : kStreamersPerWorker;
  }
  // Whether a worker should prepare a realtime job itself (on its own thread) rather than
  // wait for a loader: only when no loader can take it (the frames prepared ahead reach
  // the prefetch bound: `ahead` >= `bound`) and no loader is already preparing a realtime
  // job this worker could run (`loading_realtime_here`). Otherwise a worker, i.e. half a
  // GPU, spends a whole .fits.gz inflate (~0.5 s) on a frame when a loader delivers one
  // sooner: in a realtime exposure, each time the GPU catches up with the loaders.
  static bool WorkerPreparesRealtime(int ahead, int bound, int loading_realtime_here) {
    return ahead >= bound && loading_realtime_here == 0;
  }
  // The deadline a job is ordered by: its own, or for a job without one (max()) `admitted
  // + horizon` (saturating at max()); a zero horizon keeps max().
  static std::chrono::steady_clock::time_point OrderingDeadline(
      std::chrono::steady_clock::time_point deadline,
      std::chrono::steady_clock::time_point admitted, std::chrono::steady_clock::duration horizon);
  // Streaming threads over the workers added so far.
  int streaming_threads();
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Starts a worker thread that owns `backend`, and its loader threads. `gpu_device` is
  // -1 for a CPU backend.
  void AddWorker(std::unique_ptr<core::Backend> backend, int gpu_device);

  // A queue slot held from admission until Submit, or an upload slot held while an
  // upload is received (released when the ticket is destroyed).
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept;
    Ticket& operator=(Ticket&& other) noexcept;
    ~Ticket();
    bool valid() const { return owner_ != nullptr; }
    bool realtime() const { return realtime_; }
    bool upload() const { return upload_; }

   private:
    friend class Scheduler;
    Ticket(Scheduler* owner, bool realtime, bool upload)
        : owner_(owner), realtime_(realtime), upload_(upload) {}
    Scheduler* owner_ = nullptr;
    bool realtime_ = false;
    bool upload_ = false;
  };

  // A queue slot. RESOURCE_EXHAUSTED (with the reason, marked retryable) when the queue
  // is full, UNAVAILABLE when draining or without workers.
  absl::StatusOr<Ticket> Reserve(bool realtime);
  // A queue slot for a further frame of a request admitted as a whole (an exposure,
  // server/jobs/exposure_job.h): never refused for a full queue or a drain, since the request
  // was admitted with Reserve; a job submitted with it after Shutdown is abandoned.
  Ticket ReserveAdmitted(bool realtime);
  // An upload slot. RESOURCE_EXHAUSTED (retryable) when the uploads in progress reach
  // their bound, or, for an extraction (`then_queue`), when the queue is full already;
  // UNAVAILABLE when draining. An extraction reserves its queue slot (Reserve) once the
  // upload is complete, then drops the upload ticket.
  absl::StatusOr<Ticket> ReserveUpload(bool realtime, bool then_queue);
  // Queues the job; realtime jobs go before every reprocessing job, earliest deadline
  // first within a level (Job::deadline, OrderingDeadline).
  void Submit(Ticket ticket, std::shared_ptr<Job> job);

  // New reservations are refused from now on; queued and running jobs continue.
  void StopAccepting();
  // StopAccepting, abandons queued jobs (UNAVAILABLE), waits for running ones and for
  // the streaming they handed over, joins every thread.
  void Shutdown();

  int queue_depth();
  // Frames that may be prepared ahead now (PrefetchBound over the workers added so far),
  // and the loader threads started.
  int prefetch_bound();
  int num_loaders();
  // What the server is doing now, for GetServerInfo and the metrics.
  struct Load {
    int uploads = 0;    // uploads in progress (extraction images and PSFs)
    int queued = 0;     // jobs admitted and not yet on a worker (queued_depth)
    int running = 0;    // jobs on a worker
    int max_queue = 0;  // the effective bounds (see the constructor)
    int max_uploads = 0;
    int realtime_reserve = 0;
  };
  Load CurrentLoad();
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
  // Opens a client's CUDA region (GpuCapabilities::ImportRegion) on the worker of `device`.
  // FAILED_PRECONDITION when no worker runs there (with the CPU backend: its refusal).
  absl::StatusOr<std::unique_ptr<core::ImportedRegion>> ImportRegion(const std::string& ipc_handle,
                                                                     int device, uint64_t size);

 private:
  struct Worker {
    int index = 0;
    int gpu_device = -1;
    std::unique_ptr<core::Backend> backend;
    std::atomic<bool> busy{false};
    bool waiting = false;  // in WorkerLoop's wait for a job (guarded by the scheduler's mu_)
    std::thread thread;
  };

  void ReleaseReservation(bool realtime, bool upload);
  int QueueLimitLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int UploadLimitLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int QueuedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int PrefetchBoundLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LoaderLoop();
  void WorkerLoop(Worker* worker);
  // Realtime jobs a worker on `device` could run that loaders are preparing now.
  int LoadingRealtimeForLocked(int device) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a worker on GPU `device`, which already runs a job (its other worker's), leaves
  // the ready jobs to the workers waiting on GPUs that run none: a frame alone on a GPU
  // extracts in about half the time of two sharing one. Jobs bound to `device` it takes,
  // and a GPU whose backend is unhealthy is not waited for.
  bool LeavesToIdleGpuLocked(int device) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The geometries warm on `w`'s backend and on every other worker's.
  void WarmGeometriesLocked(const Worker* w, std::set<const core::Geometry*>* here,
                            std::set<const core::Geometry*>* elsewhere) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PublishDepthLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int max_queue_;
  const int max_uploads_;
  const int realtime_reserve_;
  const int prefetch_;                  // requested per worker; 0: PrefetchPerWorker
  const int64_t prefetch_memory_bytes_;  // resolved (never 0)
  const int streamers_per_worker_;       // requested; 0: StreamersPerWorker's default
  const std::chrono::steady_clock::duration no_deadline_horizon_;
  const std::function<std::chrono::steady_clock::time_point()> clock_;
  ServerMetrics* const metrics_;
  absl::Mutex mu_;
  JobLevels pending_ ABSL_GUARDED_BY(mu_);  // admitted, waiting for a loader
  JobLevels ready_ ABSL_GUARDED_BY(mu_);    // prepared, waiting for a worker
  int preparing_ ABSL_GUARDED_BY(mu_) = 0;
  int preparing_realtime_ ABSL_GUARDED_BY(mu_) = 0;
  // Realtime jobs on loader threads by Job::device() (-1: any worker's).
  std::map<int, int> loading_realtime_ ABSL_GUARDED_BY(mu_);
  int reserved_ ABSL_GUARDED_BY(mu_) = 0;  // queue slots held before Submit
  int uploads_ ABSL_GUARDED_BY(mu_) = 0;   // upload slots held
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int, int> gpu_running_ ABSL_GUARDED_BY(mu_);  // jobs running, per GPU device
  std::vector<std::thread> loaders_ ABSL_GUARDED_BY(mu_);
  int prefetch_sum_ ABSL_GUARDED_BY(mu_) = 0;  // over the workers added
  int streamers_sum_ ABSL_GUARDED_BY(mu_) = 0;  // streaming threads, over the workers added
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::unique_ptr<Worker>> workers_ ABSL_GUARDED_BY(mu_);
  core::TaskPool streaming_;  // shut down after the workers, whose jobs post to it
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_SCHEDULER_H_
