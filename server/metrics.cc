#include "server/metrics.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/frame.h"
#include "core/version.h"
#include "prometheus/exposer.h"
#include "prometheus/text_serializer.h"

namespace spexd::server {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

// A frame takes seconds on a GPU and minutes on a CPU.
const Histogram::BucketBoundaries kFrameBuckets = {0.1, 0.25, 0.5, 1,  2.5, 5,   10,
                                                   25,  50,   100, 250, 500, 1000};
const Histogram::BucketBoundaries kBundleBuckets = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                                    2.5,  5,     10,   25,  50,   100};
const Histogram::BucketBoundaries kWaitBuckets = {0.001, 0.01, 0.1, 0.5, 1,   2.5,
                                                  5,     10,   30,  60,  300, 1000};
// chi2pix is ~1 for a good fit (extraction-spec §2.11); the tail shows bad PSFs/cosmics.
const Histogram::BucketBoundaries kChi2Buckets = {0.5, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2, 3, 5, 10, 100};
const Histogram::BucketBoundaries kMaskedBuckets = {0, 0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.99, 1};

}  // namespace

ServerMetrics::ServerMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  BuildGauge()
      .Name("spexd_build_info")
      .Help("Build information of the running spexd (value is always 1)")
      .Register(r)
      .Add({{"version", core::kSpexdVersion}})
      .Set(1);
  requests_ = &BuildCounter()
                   .Name("spexd_requests_total")
                   .Help("RPCs finished, by method and gRPC status code")
                   .Register(r);
  inflight_ = &BuildGauge()
                   .Name("spexd_inflight_requests")
                   .Help("Extraction RPCs in progress (queued, uploading or running)")
                   .Register(r)
                   .Add({});
  queue_depth_ = &BuildGauge()
                      .Name("spexd_queue_depth")
                      .Help("Extraction jobs waiting for a worker, by priority")
                      .Register(r);
  uploads_ = &BuildGauge()
                  .Name("spexd_uploads_in_progress")
                  .Help("Image and PSF uploads being received (bounded by --max_uploads)")
                  .Register(r)
                  .Add({});
  running_ = &BuildGauge()
                  .Name("spexd_running_jobs")
                  .Help("Extraction jobs on a worker")
                  .Register(r)
                  .Add({});
  stalled_ = &BuildCounter()
                  .Name("spexd_stalled_calls_total")
                  .Help("Calls ended because the client stalled: kind = upload (no chunk for "
                        "--upload_idle_seconds) or write (responses not read for "
                        "--write_timeout_seconds)")
                  .Register(r);
  queue_wait_ = &BuildHistogram()
                     .Name("spexd_queue_wait_seconds")
                     .Help("Time from admission to a worker taking the job, by priority")
                     .Register(r);
  frame_seconds_ = &BuildHistogram()
                        .Name("spexd_frame_duration_seconds")
                        .Help("Worker time per extraction request (load, extract, stream)")
                        .Register(r)
                        .Add({}, kFrameBuckets);
  load_seconds_ = &BuildHistogram()
                       .Name("spexd_image_load_duration_seconds")
                       .Help("Time to read and decode the input image and warm the geometry")
                       .Register(r)
                       .Add({}, kFrameBuckets);
  bundle_seconds_ = &BuildHistogram()
                         .Name("spexd_bundle_duration_seconds")
                         .Help("Time between consecutive finished bundles of a request")
                         .Register(r)
                         .Add({}, kBundleBuckets);
  bundles_ = &BuildCounter()
                  .Name("spexd_bundles_total")
                  .Help("Bundles extracted and streamed")
                  .Register(r)
                  .Add({});
  patches_ = &BuildCounter()
                  .Name("spexd_patches_total")
                  .Help("Patches processed, by outcome (extracted, skipped, retried, failed); "
                        "rate() gives patches per second")
                  .Register(r);
  chi2pix_median_ = &BuildHistogram()
                         .Name("spexd_fiber_chi2pix_median")
                         .Help("Median chi2 per pixel of each extracted fibre")
                         .Register(r)
                         .Add({}, kChi2Buckets);
  masked_ratio_ = &BuildHistogram()
                       .Name("spexd_fiber_masked_ratio")
                       .Help("Mean masked-pixel fraction (PIXMASK_FRACTION) of each extracted fibre")
                       .Register(r)
                       .Add({}, kMaskedBuckets);
  upload_bytes_ = &BuildCounter()
                       .Name("spexd_upload_bytes_total")
                       .Help("Bytes received in image and PSF uploads")
                       .Register(r)
                       .Add({});
  cuda_regions_ = &BuildGauge()
                       .Name("spexd_cuda_regions")
                       .Help("CUDA IPC regions registered by clients (CudaRegions)")
                       .Register(r)
                       .Add({});
  cuda_region_bytes_ = &BuildGauge()
                            .Name("spexd_cuda_region_bytes")
                            .Help("Device bytes spanned by the registered CUDA regions")
                            .Register(r)
                            .Add({});
  handoff_bytes_ = &BuildCounter()
                        .Name("spexd_handoff_bytes_total")
                        .Help("Bytes read from (in) or written into (out) client CUDA regions")
                        .Register(r);
  for (const char* direction : {"in", "out"}) handoff_bytes_->Add({{"direction", direction}});
  cache_events_hits_ = &BuildCounter()
                            .Name("spexd_psf_cache_hits_total")
                            .Help("PSF cache lookups that found the entry, by kind (psf, geometry)")
                            .Register(r);
  cache_events_misses_ = &BuildCounter()
                              .Name("spexd_psf_cache_misses_total")
                              .Help("PSF cache lookups that missed, by kind (psf, geometry)")
                              .Register(r);
  cache_events_evictions_ = &BuildCounter()
                                 .Name("spexd_psf_cache_evictions_total")
                                 .Help("Entries evicted to stay under the cache budget, by kind")
                                 .Register(r);
  cache_bytes_ = &BuildGauge()
                      .Name("spexd_psf_cache_bytes")
                      .Help("Host memory held by cached PSFs and warm geometries")
                      .Register(r)
                      .Add({});
  cache_budget_ = &BuildGauge()
                       .Name("spexd_psf_cache_budget_bytes")
                       .Help("Memory budget of the PSF cache (--psf_cache_bytes)")
                       .Register(r)
                       .Add({});
  cache_entries_ = &BuildGauge()
                        .Name("spexd_psf_cache_entries")
                        .Help("Entries in the PSF cache, by kind (psf, geometry)")
                        .Register(r);
  host_memory_ = &BuildGauge()
                      .Name("spexd_host_memory_bytes")
                      .Help("Resident host memory of the server process")
                      .Register(r)
                      .Add({});
  gpu_memory_ = &BuildGauge()
                     .Name("spexd_gpu_memory_bytes")
                     .Help("Device memory held by the backends on each GPU: workspaces and "
                           "warm geometries (spots, plans)")
                     .Register(r);
  backend_healthy_ = &BuildGauge()
                          .Name("spexd_backend_healthy")
                          .Help("1 while the worker's backend is healthy, 0 after a sticky error")
                          .Register(r);
  worker_busy_ = &BuildGauge()
                      .Name("spexd_worker_busy")
                      .Help("1 while the worker runs a job")
                      .Register(r);
  serving_ = &BuildGauge()
                  .Name("spexd_serving")
                  .Help("1 when the health status is SERVING")
                  .Register(r)
                  .Add({});
  // Families with labels get their usual series up front, so a scrape shows them at 0.
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
  for (bool realtime : {true, false}) {
    SetQueueDepth(realtime, 0);
    queue_wait_->Add({{"priority", realtime ? "realtime" : "reprocessing"}}, kWaitBuckets);
  }
}

ServerMetrics::~ServerMetrics() = default;

absl::Status ServerMetrics::StartExposer(const std::string& address) {
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(address, 2);
    exposer_->RegisterCollectable(registry_);
    std::vector<int> ports = exposer_->GetListeningPorts();
    exposer_port_ = ports.empty() ? 0 : ports.front();
  } catch (const std::exception& e) {
    exposer_.reset();
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", std::string(e.what())));
  }
  return absl::OkStatus();
}

std::string ServerMetrics::Serialize() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

void ServerMetrics::CountRequest(const std::string& rpc, const char* code) {
  requests_->Add({{"rpc", rpc}, {"code", code}}).Increment();
}

void ServerMetrics::CountStalledCall(const char* kind) { stalled_->Add({{"kind", kind}}).Increment(); }

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
    row.assign(b.chi2pix.begin() + static_cast<std::ptrdiff_t>(off),
               b.chi2pix.begin() + static_cast<std::ptrdiff_t>(off + b.nwave));
    chi2pix_median_->Observe(core::Median(row));
    double sum = 0;
    for (int w = 0; w < b.nwave; ++w) sum += b.pixmask_fraction[off + w];
    masked_ratio_->Observe(b.nwave > 0 ? sum / b.nwave : 0.0);
  }
}

void ServerMetrics::CountCache(const char* kind, const char* what) {
  const std::string w(what);
  auto* family = w == "hit" ? cache_events_hits_ : w == "miss" ? cache_events_misses_
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

void ServerMetrics::AddHandoffBytes(const char* direction, double bytes) {
  handoff_bytes_->Add({{"direction", direction}}).Increment(bytes);
}

}  // namespace spexd::server
