// Prometheus metrics of the service (prometheus-cpp's registry, served over HTTP by
// MetricsHttpServer on its own port). Names
// follow Prometheus conventions: `spexd_` prefix, counters end in `_total`, durations are
// `_seconds`, sizes `_bytes`, fractions `_ratio`.
#ifndef SPEXD_SERVER_METRICS_H_
#define SPEXD_SERVER_METRICS_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "core/frame/extraction_result.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace spexd::server {

class HealthMetrics;
class MetricsHttpServer;

class ServerMetrics {
 public:
  ServerMetrics();
  ~ServerMetrics();
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  // Serves /metrics on `address` (host:port or [v6]:port; port 0 picks a free one) with
  // MetricsHttpServer (metrics_http.h).
  absl::Status StartExposer(const std::string& address);
  // Stops serving /metrics (the end of a drain); idempotent.
  void StopExposer();
  // The bound port, or 0 when not serving.
  int exposer_port() const { return exposer_port_; }
  // The current exposition text (what a scrape returns).
  std::string Serialize() const;

  void CountRequest(const std::string& rpc, const char* code);
  void AddInflight(double delta) { inflight_->Increment(delta); }
  void SetQueueDepth(bool realtime, double depth);
  void SetUploadsInProgress(double n) { uploads_->Set(n); }
  void SetRunningJobs(double n) { running_->Set(n); }
  // A call ended by the server because its client stalled: kind = "upload" or "write".
  void CountStalledCall(const char* kind);
  // Exposures (ExtractExposure): each frame's result by gRPC code name,
  // and each exposure's duration from arrival to its last frame's result.
  void CountExposureFrame(const char* code);
  // A server-written file's end (output_files.h): one of kOutputFileOutcomes.
  static constexpr const char* kOutputFileOutcomes[] = {"written", "kept_identical",
                                                         "refused_different"};
  void CountOutputFile(const char* outcome);
  void ObserveExposure(double seconds) { exposure_seconds_->Observe(seconds); }
  // An upload (image or PSF) ended by the server before it was complete:
  // reason = "idle" (--upload_idle_seconds), "slow" (under --upload_min_bytes_per_second)
  // or "draining" (SIGTERM/SIGHUP). Any other reason is a bug (a bounded label set).
  void CountUploadAborted(const char* reason);
  void ObserveQueueWait(bool realtime, double seconds);
  void ObserveFrame(double seconds) { frame_seconds_->Observe(seconds); }
  void ObserveImageLoad(double seconds) { load_seconds_->Observe(seconds); }
  // One finished bundle: latency, patch outcomes and the numerical QA distributions
  // (per-fibre median chi2pix and mean masked fraction, arrays [nfibers][nwave]).
  void ObserveBundle(double seconds, const core::BundleResult& bundle);
  void AddUploadBytes(double bytes) { upload_bytes_->Increment(bytes); }
  void CountCache(const char* kind, const char* what);  // what: hit | miss | eviction
  void SetCacheState(double bytes, double budget, double psfs, double geometries);
  void SetHostMemory(double bytes) { host_memory_->Set(bytes); }
  // Device memory in use on GPU `device` (the sum over the workers on it).
  void SetGpuMemory(int device, double bytes);
  // Busy time accrues to spexd_worker_busy_seconds_total between a call with busy = true
  // and the next with busy = false (and at each AccrueBusyTime meanwhile).
  void SetBackendState(int worker, const std::string& backend, bool healthy, bool busy);

  // Per-worker work, labelled {worker, gpu}: gpu is the worker's CUDA device ordinal, or
  // kCpuGpuLabel for a CPU-backend worker. AddWorker creates the series at 0; the
  // others ignore a worker that was never added.
  static constexpr const char* kCpuGpuLabel = "cpu";
  static std::string GpuLabel(int gpu_device);
  void AddWorker(int worker, int gpu_device);
  // Patches a worker's backend has just extracted (one bundle's, as it finishes).
  void CountWorkerPatches(int worker, int64_t extracted);
  // A frame (request) the worker's backend extracted completely, in `seconds` of worker time.
  void CountWorkerFrame(int worker, double seconds);
  // Adds the time busy workers have spent since they started or were last accrued, so that
  // the busy-seconds counter moves during long jobs (the monitor calls it every second).
  void AccrueBusyTime();
  // What the per-worker counters hold now (the benchmarks report it).
  struct WorkerWork {
    int worker = 0;
    std::string gpu;
    double frames = 0;
    double patches = 0;
    double busy_seconds = 0;
  };
  std::vector<WorkerWork> WorkerTotals() const;
  // The gpu label of a worker (kCpuGpuLabel for one never added).
  std::string WorkerGpu(int worker) const;
  // Numerical-health and shadow-parity metrics (server/platform/health_metrics.h).
  HealthMetrics& health() { return *health_; }
  void SetServing(bool serving) { serving_->Set(serving ? 1 : 0); }
  // CUDA regions registered now and the device bytes they span.
  void SetCudaRegions(double regions, double bytes) {
    cuda_regions_->Set(regions);
    cuda_region_bytes_->Set(bytes);
  }
  // Bytes an extraction read from (direction "in") or wrote into ("out") client regions.
  void AddHandoffBytes(const char* direction, double bytes);

 private:
  // The constructor's parts, by what the metrics describe.
  void RegisterRequestMetrics();     // RPCs, queue, uploads, stalls
  void RegisterExtractionMetrics();  // frames, bundles, patches, numerical QA
  void RegisterHandoffMetrics();     // CUDA IPC regions and hand-off bytes
  void RegisterCacheMetrics();       // PSF cache
  void RegisterResourceMetrics();    // memory, backends, serving state
  void RegisterWorkerMetrics();      // per-worker work, labelled by GPU
  void AddUsualSeries();             // labelled series shown at 0 before first use

  // One worker's series and busy-time bookkeeping.
  struct WorkerSeries {
    std::string gpu;
    prometheus::Counter* frames = nullptr;
    prometheus::Counter* patches = nullptr;
    prometheus::Counter* busy_seconds = nullptr;
    prometheus::Histogram* extract_seconds = nullptr;
    bool busy = false;
    std::chrono::steady_clock::time_point busy_since;  // or since the last accrual
  };
  // The worker's series, or null when it was never added.
  WorkerSeries* FindWorkerLocked(int worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(workers_mu_);
  void SetWorkerBusyLocked(WorkerSeries& w, bool busy) ABSL_EXCLUSIVE_LOCKS_REQUIRED(workers_mu_);

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<MetricsHttpServer> exposer_;
  std::unique_ptr<HealthMetrics> health_;
  int exposer_port_ = 0;

  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Gauge* inflight_;
  prometheus::Family<prometheus::Gauge>* queue_depth_;
  prometheus::Gauge* uploads_;
  prometheus::Gauge* running_;
  prometheus::Family<prometheus::Counter>* stalled_;
  prometheus::Family<prometheus::Counter>* exposure_frames_;
  prometheus::Family<prometheus::Counter>* output_files_;
  prometheus::Histogram* exposure_seconds_;
  prometheus::Family<prometheus::Counter>* uploads_aborted_;
  prometheus::Family<prometheus::Histogram>* queue_wait_;
  prometheus::Histogram* frame_seconds_;
  prometheus::Histogram* load_seconds_;
  prometheus::Histogram* bundle_seconds_;
  prometheus::Counter* bundles_;
  prometheus::Family<prometheus::Counter>* patches_;
  prometheus::Histogram* chi2pix_median_;
  prometheus::Histogram* masked_ratio_;
  prometheus::Counter* upload_bytes_;
  prometheus::Family<prometheus::Counter>* cache_events_hits_;
  prometheus::Family<prometheus::Counter>* cache_events_misses_;
  prometheus::Family<prometheus::Counter>* cache_events_evictions_;
  prometheus::Gauge* cache_bytes_;
  prometheus::Gauge* cache_budget_;
  prometheus::Family<prometheus::Gauge>* cache_entries_;
  prometheus::Gauge* host_memory_;
  prometheus::Family<prometheus::Gauge>* gpu_memory_;
  prometheus::Family<prometheus::Gauge>* backend_healthy_;
  prometheus::Family<prometheus::Gauge>* worker_busy_;
  prometheus::Gauge* serving_;
  prometheus::Gauge* cuda_regions_;
  prometheus::Gauge* cuda_region_bytes_;
  prometheus::Family<prometheus::Counter>* handoff_bytes_;
  prometheus::Family<prometheus::Counter>* worker_frames_;
  prometheus::Family<prometheus::Counter>* worker_patches_;
  prometheus::Family<prometheus::Counter>* worker_busy_seconds_;
  prometheus::Family<prometheus::Histogram>* worker_extract_seconds_;
  mutable absl::Mutex workers_mu_;
  std::vector<WorkerSeries> workers_ ABSL_GUARDED_BY(workers_mu_);  // by worker index
};

// Resident set size of this process (from /proc/self/statm), 0 when unknown.
double HostMemoryBytes();

}  // namespace spexd::server

#endif  // SPEXD_SERVER_METRICS_H_
