#include "server/platform/metrics.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/version.h"
#include "core/frame/frame.h"
#include "prometheus/text_serializer.h"
#include "server/platform/health_metrics.h"
#include "server/platform/metrics_http.h"

namespace spexd::server {
namespace {

constexpr const char* kUploadAbortReasons[] = {"idle", "slow", "draining"};

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

// A frame takes seconds on a GPU and minutes on a CPU.
const Histogram::BucketBoundaries kFrameBuckets = {0.1, 0.25, 0.5, 1,   2.5, 5,   10,
                                                   25,  50,   100, 250, 500, 1000};
const Histogram::BucketBoundaries kBundleBuckets = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                                    2.5,  5,     10,   25,  50,   100};
// One worker's extraction of a frame: 0.1-0.4 s on a GPU (finer steps there), seconds to
// minutes on the CPU backend.
const Histogram::BucketBoundaries kWorkerFrameBuckets = {0.05, 0.1, 0.15, 0.2, 0.25, 0.3,
                                                         0.4,  0.5, 0.75, 1,   2.5,  5,
                                                         10,   25,  50,   100, 250,  1000};
const Histogram::BucketBoundaries kWaitBuckets = {0.001, 0.01, 0.1, 0.5, 1,   2.5,
                                                  5,     10,   30,  60,  300, 1000};
// chi2pix is ~1 for a good fit (extraction-spec §2.11); the tail shows bad PSFs/cosmics.
const Histogram::BucketBoundaries kChi2Buckets = {0.5, 0.8, 0.9, 1, 1.1, 1.25,
                                                  1.5, 2,   3,   5, 10,  100};
const Histogram::BucketBoundaries kMaskedBuckets = {0,    0.001, 0.01, 0.05, 0.1,
                                                    0.25, 0.5,   0.75, 0.99, 1};

// One-line registrations: a family (series added per label set) or its single unlabelled series.
template <typename Builder>
auto& Family(Builder builder, prometheus::Registry& r, const char* name, const char* help) {
  return builder.Name(name).Help(help).Register(r);
}
prometheus::Family<prometheus::Counter>* CounterFamily(prometheus::Registry& r, const char* name,
                                                       const char* help) {
  return &Family(BuildCounter(), r, name, help);
}
prometheus::Family<prometheus::Gauge>* GaugeFamily(prometheus::Registry& r, const char* name,
                                                   const char* help) {
  return &Family(BuildGauge(), r, name, help);
}
prometheus::Counter* SingleCounter(prometheus::Registry& r, const char* name, const char* help) {
  return &CounterFamily(r, name, help)->Add({});
}
prometheus::Gauge* SingleGauge(prometheus::Registry& r, const char* name, const char* help) {
  return &GaugeFamily(r, name, help)->Add({});
}
prometheus::Histogram* SingleHistogram(prometheus::Registry& r, const char* name, const char* help,
                                       const Histogram::BucketBoundaries& buckets) {
  return &Family(BuildHistogram(), r, name, help).Add({}, buckets);
}

}  // namespace

ServerMetrics::ServerMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  GaugeFamily(*registry_, "spexd_build_info",
              "Build information of the running spexd (value is always 1)")
      ->Add({{"version", core::kSpexdVersion}})
      .Set(1);
  RegisterRequestMetrics();
  RegisterExtractionMetrics();
  RegisterHandoffMetrics();
  RegisterCacheMetrics();
  RegisterResourceMetrics();
  RegisterWorkerMetrics();
  health_ = std::make_unique<HealthMetrics>(*registry_);
  AddUsualSeries();
}

void ServerMetrics::RegisterRequestMetrics() {
  prometheus::Registry& r = *registry_;
  requests_ =
      CounterFamily(r, "spexd_requests_total", "RPCs finished, by method and gRPC status code");
  inflight_ = SingleGauge(r, "spexd_inflight_requests",
                          "Extraction RPCs in progress (queued, uploading or running)");
  queue_depth_ =
      GaugeFamily(r, "spexd_queue_depth", "Extraction jobs waiting for a worker, by priority");
  uploads_ = SingleGauge(r, "spexd_uploads_in_progress",
                         "Image and PSF uploads being received (bounded by --max_uploads)");
  running_ = SingleGauge(r, "spexd_running_jobs", "Extraction jobs on a worker");
  stalled_ = CounterFamily(r, "spexd_stalled_calls_total",
                           "Calls ended because the client stalled: kind = upload (no chunk for "
                           "--upload_idle_seconds) or write (responses not read for "
                           "--write_timeout_seconds)");
  uploads_aborted_ = CounterFamily(
      r, "spexd_uploads_aborted_total",
      "Uploads the server ended before they were complete: reason = idle (no data for "
      "--upload_idle_seconds), slow (under --upload_min_bytes_per_second) or draining");
  queue_wait_ = &Family(BuildHistogram(), r, "spexd_queue_wait_seconds",
                        "Time from admission to a worker taking the job, by priority");
  upload_bytes_ =
      SingleCounter(r, "spexd_upload_bytes_total", "Bytes received in image and PSF uploads");
}

void ServerMetrics::RegisterExtractionMetrics() {
  prometheus::Registry& r = *registry_;
  frame_seconds_ =
      SingleHistogram(r, "spexd_frame_duration_seconds",
                      "Worker time per extraction request (load, extract, stream)", kFrameBuckets);
  exposure_frames_ = CounterFamily(r, "spexd_exposure_frames_total",
                                   "Frames of exposures (ExtractExposure) finished, by gRPC status code");
  output_files_ = CounterFamily(
      r, "spexd_output_files_total",
      "Server-written files (server_output_path, server_model_path) by outcome: written; "
      "kept_identical (already there, the same frame: a retry's, left untouched); "
      "refused_different (already there, another file: ALREADY_EXISTS)");
  exposure_seconds_ = SingleHistogram(r, "spexd_exposure_duration_seconds",
                                      "Exposures (ExtractExposure) from arrival to the last frame's result",
                                      kFrameBuckets);
  load_seconds_ = SingleHistogram(r, "spexd_image_load_duration_seconds",
                                  "Time to read and decode the input image and warm the geometry",
                                  kFrameBuckets);
  bundle_seconds_ =
      SingleHistogram(r, "spexd_bundle_duration_seconds",
                      "Time between consecutive finished bundles of a request", kBundleBuckets);
  bundles_ = SingleCounter(r, "spexd_bundles_total", "Bundles extracted and streamed");
  patches_ = CounterFamily(r, "spexd_patches_total",
                           "Patches processed, by outcome (extracted, skipped, retried, failed); "
                           "rate() gives patches per second");
  chi2pix_median_ = SingleHistogram(r, "spexd_fiber_chi2pix_median",
                                    "Median chi2 per pixel of each extracted fibre", kChi2Buckets);
  masked_ratio_ = SingleHistogram(
      r, "spexd_fiber_masked_ratio",
      "Mean masked-pixel fraction (PIXMASK_FRACTION) of each extracted fibre", kMaskedBuckets);
}

void ServerMetrics::RegisterHandoffMetrics() {
  prometheus::Registry& r = *registry_;
  cuda_regions_ =
      SingleGauge(r, "spexd_cuda_regions", "CUDA IPC regions registered by clients (CudaRegions)");
  cuda_region_bytes_ = SingleGauge(r, "spexd_cuda_region_bytes",
                                   "Device bytes spanned by the registered CUDA regions");
  handoff_bytes_ = CounterFamily(r, "spexd_handoff_bytes_total",
                                 "Bytes read from (in) or written into (out) client CUDA regions");
}

void ServerMetrics::RegisterCacheMetrics() {
  prometheus::Registry& r = *registry_;
  cache_events_hits_ =
      CounterFamily(r, "spexd_psf_cache_hits_total",
                    "PSF cache lookups that found the entry, by kind (psf, geometry)");
  cache_events_misses_ = CounterFamily(r, "spexd_psf_cache_misses_total",
                                       "PSF cache lookups that missed, by kind (psf, geometry)");
  cache_events_evictions_ =
      CounterFamily(r, "spexd_psf_cache_evictions_total",
                    "Entries evicted to stay under the cache budget, by kind");
  cache_bytes_ = SingleGauge(r, "spexd_psf_cache_bytes",
                             "Host memory held by cached PSFs and warm geometries");
  cache_budget_ = SingleGauge(r, "spexd_psf_cache_budget_bytes",
                              "Memory budget of the PSF cache (--psf_cache_bytes)");
  cache_entries_ = GaugeFamily(r, "spexd_psf_cache_entries",
                               "Entries in the PSF cache, by kind (psf, geometry)");
}

void ServerMetrics::RegisterResourceMetrics() {
  prometheus::Registry& r = *registry_;
  host_memory_ =
      SingleGauge(r, "spexd_host_memory_bytes", "Resident host memory of the server process");
  gpu_memory_ = GaugeFamily(r, "spexd_gpu_memory_bytes",
                            "Device memory held by the backends on each GPU: workspaces and "
                            "warm geometries (spots, plans)");
  backend_healthy_ = GaugeFamily(r, "spexd_backend_healthy",
                                 "1 while the worker's backend is healthy, 0 after a sticky error");
  worker_busy_ = GaugeFamily(r, "spexd_worker_busy", "1 while the worker runs a job");
  serving_ = SingleGauge(r, "spexd_serving", "1 when the health status is SERVING");
}

void ServerMetrics::RegisterWorkerMetrics() {
  prometheus::Registry& r = *registry_;
  worker_frames_ = CounterFamily(r, "spexd_worker_frames_total",
                                 "Frames (extraction requests) the worker's backend extracted "
                                 "completely, by worker and gpu (CUDA device, or cpu)");
  worker_patches_ = CounterFamily(r, "spexd_worker_patches_total",
                                  "Patches the worker's backend extracted, by worker and gpu");
  worker_busy_seconds_ =
      CounterFamily(r, "spexd_worker_busy_seconds_total",
                    "Seconds the worker spent on jobs, by worker and gpu; rate() is its "
                    "utilisation (0 to 1)");
  worker_extract_seconds_ =
      &Family(BuildHistogram(), r, "spexd_worker_extract_duration_seconds",
              "Worker time per frame the backend extracted completely, from taking the job "
              "to the backend's return, by worker and gpu");
}

// Families with labels get their usual series up front, so a scrape shows them at 0.
void ServerMetrics::AddUsualSeries() {
  for (const char* kind : {"psf", "geometry"}) {
    cache_events_hits_->Add({{"kind", kind}});
    cache_events_misses_->Add({{"kind", kind}});
    cache_events_evictions_->Add({{"kind", kind}});
    cache_entries_->Add({{"kind", kind}});
  }
  for (const char* outcome : {"extracted", "skipped", "retried", "failed"}) {
    patches_->Add({{"outcome", outcome}});
  }
  for (const char* kind : {"upload", "write"}) stalled_->Add({{"kind", kind}});
  for (const char* outcome : kOutputFileOutcomes) output_files_->Add({{"outcome", outcome}});
  for (const char* reason : kUploadAbortReasons) uploads_aborted_->Add({{"reason", reason}});
  for (const char* direction : {"in", "out"}) handoff_bytes_->Add({{"direction", direction}});
  for (bool realtime : {true, false}) {
    SetQueueDepth(realtime, 0);
    queue_wait_->Add({{"priority", realtime ? "realtime" : "reprocessing"}}, kWaitBuckets);
  }
}

// The HTTP server goes first: its thread renders from the registry.
ServerMetrics::~ServerMetrics() { exposer_.reset(); }

absl::Status ServerMetrics::StartExposer(const std::string& address) {
  auto server = MetricsHttpServer::Start(address, [this] { return Serialize(); });
  if (!server.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", server.status().message()));
  }
  exposer_ = *std::move(server);
  exposer_port_ = exposer_->port();
  return absl::OkStatus();
}

void ServerMetrics::StopExposer() {
  if (exposer_ != nullptr) exposer_->Stop();
}

std::string ServerMetrics::Serialize() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

void ServerMetrics::CountRequest(const std::string& rpc, const char* code) {
  requests_->Add({{"rpc", rpc}, {"code", code}}).Increment();
}

void ServerMetrics::CountExposureFrame(const char* code) {
  exposure_frames_->Add({{"code", code}}).Increment();
}

void ServerMetrics::CountOutputFile(const char* outcome) {
  output_files_->Add({{"outcome", outcome}}).Increment();
}

void ServerMetrics::CountStalledCall(const char* kind) {
  stalled_->Add({{"kind", kind}}).Increment();
}

void ServerMetrics::CountUploadAborted(const char* reason) {
  // Only the declared reasons: a typo must not create a new series.
  for (const char* known : kUploadAbortReasons) {
    if (std::strcmp(known, reason) == 0) {
      uploads_aborted_->Add({{"reason", known}}).Increment();
      return;
    }
  }
}

void ServerMetrics::SetQueueDepth(bool realtime, double depth) {
  queue_depth_->Add({{"priority", realtime ? "realtime" : "reprocessing"}}).Set(depth);
}

void ServerMetrics::ObserveQueueWait(bool realtime, double seconds) {
  queue_wait_->Add({{"priority", realtime ? "realtime" : "reprocessing"}}, kWaitBuckets)
      .Observe(seconds);
}

void ServerMetrics::ObserveBundle(double seconds, const core::BundleResult& b) {
  bundle_seconds_->Observe(seconds);
  bundles_->Increment();
  patches_->Add({{"outcome", "extracted"}}).Increment(static_cast<double>(b.counts.extracted));
  patches_->Add({{"outcome", "skipped"}}).Increment(static_cast<double>(b.counts.skipped));
  patches_->Add({{"outcome", "retried"}}).Increment(static_cast<double>(b.counts.retried));
  patches_->Add({{"outcome", "failed"}}).Increment(static_cast<double>(b.counts.failed));
  // Per fibre, not per bin: 25 observations per bundle keep the cost negligible.
  std::vector<double> row;
  for (int f = 0; f < b.nfibers; ++f) {
    const std::size_t off = static_cast<std::size_t>(f) * b.nwave;
    chi2pix_median_->Observe(core::BundleFiberMedian(b, f, &row));
    double sum = 0;
    for (int w = 0; w < b.nwave; ++w) sum += b.pixmask_fraction[off + w];
    masked_ratio_->Observe(b.nwave > 0 ? sum / b.nwave : 0.0);
  }
}

void ServerMetrics::CountCache(const char* kind, const char* what) {
  const std::string w(what);
  auto* family = w == "hit"    ? cache_events_hits_
                 : w == "miss" ? cache_events_misses_
                               : cache_events_evictions_;
  family->Add({{"kind", kind}}).Increment();
}

void ServerMetrics::SetCacheState(double bytes, double budget, double psfs, double geometries) {
  cache_bytes_->Set(bytes);
  cache_budget_->Set(budget);
  cache_entries_->Add({{"kind", "psf"}}).Set(psfs);
  cache_entries_->Add({{"kind", "geometry"}}).Set(geometries);
}

void ServerMetrics::SetGpuMemory(int device, double bytes) {
  gpu_memory_->Add({{"device", absl::StrCat(device)}}).Set(bytes);
}

void ServerMetrics::SetBackendState(int worker, const std::string& backend, bool healthy,
                                    bool busy) {
  const std::string w = absl::StrCat(worker);
  backend_healthy_->Add({{"worker", w}, {"backend", backend}}).Set(healthy ? 1 : 0);
  worker_busy_->Add({{"worker", w}}).Set(busy ? 1 : 0);
  absl::MutexLock lock(&workers_mu_);
  WorkerSeries* series = FindWorkerLocked(worker);
  if (series != nullptr && series->busy != busy) SetWorkerBusyLocked(*series, busy);
}

std::string ServerMetrics::GpuLabel(int gpu_device) {
  return gpu_device >= 0 ? absl::StrCat(gpu_device) : std::string(kCpuGpuLabel);
}

std::string ServerMetrics::WorkerGpu(int worker) const {
  absl::MutexLock lock(&workers_mu_);
  if (worker < 0 || static_cast<std::size_t>(worker) >= workers_.size() ||
      workers_[static_cast<std::size_t>(worker)].gpu.empty()) {
    return kCpuGpuLabel;
  }
  return workers_[static_cast<std::size_t>(worker)].gpu;
}

void ServerMetrics::AddWorker(int worker, int gpu_device) {
  if (worker < 0) return;
  const std::string gpu = GpuLabel(gpu_device);
  health_->AddUsualSeries(gpu_device >= 0 ? "cuda" : "cpu", gpu);
  const prometheus::Labels labels = {{"worker", absl::StrCat(worker)}, {"gpu", gpu}};
  absl::MutexLock lock(&workers_mu_);
  if (static_cast<std::size_t>(worker) >= workers_.size()) workers_.resize(worker + 1);
  WorkerSeries& w = workers_[static_cast<std::size_t>(worker)];
  w.gpu = gpu;
  w.frames = &worker_frames_->Add(labels);
  w.patches = &worker_patches_->Add(labels);
  w.busy_seconds = &worker_busy_seconds_->Add(labels);
  w.extract_seconds = &worker_extract_seconds_->Add(labels, kWorkerFrameBuckets);
}

ServerMetrics::WorkerSeries* ServerMetrics::FindWorkerLocked(int worker) {
  if (worker < 0 || static_cast<std::size_t>(worker) >= workers_.size()) return nullptr;
  WorkerSeries& w = workers_[static_cast<std::size_t>(worker)];
  return w.frames != nullptr ? &w : nullptr;
}

void ServerMetrics::SetWorkerBusyLocked(WorkerSeries& w, bool busy) {
  const auto now = std::chrono::steady_clock::now();
  if (w.busy) w.busy_seconds->Increment(std::chrono::duration<double>(now - w.busy_since).count());
  w.busy = busy;
  w.busy_since = now;
}

void ServerMetrics::CountWorkerPatches(int worker, int64_t extracted) {
  absl::MutexLock lock(&workers_mu_);
  if (WorkerSeries* w = FindWorkerLocked(worker)) w->patches->Increment(static_cast<double>(extracted));
}

void ServerMetrics::CountWorkerFrame(int worker, double seconds) {
  absl::MutexLock lock(&workers_mu_);
  if (WorkerSeries* w = FindWorkerLocked(worker)) {
    w->frames->Increment();
    w->extract_seconds->Observe(seconds);
  }
}

void ServerMetrics::AccrueBusyTime() {
  absl::MutexLock lock(&workers_mu_);
  for (WorkerSeries& w : workers_) {
    if (w.frames != nullptr && w.busy) SetWorkerBusyLocked(w, true);
  }
}

std::vector<ServerMetrics::WorkerWork> ServerMetrics::WorkerTotals() const {
  absl::MutexLock lock(&workers_mu_);
  std::vector<WorkerWork> out;
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    const WorkerSeries& w = workers_[i];
    if (w.frames == nullptr) continue;
    out.push_back({static_cast<int>(i), w.gpu, w.frames->Value(), w.patches->Value(),
                   w.busy_seconds->Value()});
  }
  return out;
}

void ServerMetrics::AddHandoffBytes(const char* direction, double bytes) {
  handoff_bytes_->Add({{"direction", direction}}).Increment(bytes);
}

double HostMemoryBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long pages_total = 0, pages_resident = 0;
  const int n = std::fscanf(f, "%ld %ld", &pages_total, &pages_resident);
  std::fclose(f);
  if (n != 2) return 0;
  return static_cast<double>(pages_resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

}  // namespace spexd::server
