// What one extraction job reports to the server's metrics: every
// ServerMetrics call of a job goes through here, so that the job's stages say what
// happened without each checking for a server without metrics (tests run without).
#ifndef SPEXD_SERVER_JOB_METRICS_H_
#define SPEXD_SERVER_JOB_METRICS_H_

#include <cstdint>

#include "core/frame/extraction_result.h"
#include "server/platform/metrics.h"

namespace spexd::server {

class JobMetrics {
 public:
  // `metrics` may be null (no metrics: every call does nothing); it outlives the job.
  explicit JobMetrics(ServerMetrics* metrics) : metrics_(metrics) {}

  // The loader read and decoded the frame (or checked its device input).
  void ImageLoaded(double seconds) {
    if (metrics_ != nullptr) metrics_->ObserveImageLoad(seconds);
  }
  // The worker's backend finished a bundle of `patches` extracted patches.
  void WorkerPatches(int worker, int64_t patches) {
    if (metrics_ != nullptr) metrics_->CountWorkerPatches(worker, patches);
  }
  // The worker's backend finished the frame, `seconds` after the worker took the job.
  void WorkerFrame(int worker, double seconds) {
    if (metrics_ != nullptr) metrics_->CountWorkerFrame(worker, seconds);
  }
  // Bytes read from ("in") or written to ("out") a client's CUDA regions.
  void HandoffBytes(const char* direction, double bytes) {
    if (metrics_ != nullptr) metrics_->AddHandoffBytes(direction, bytes);
  }
  // A finalised bundle, `seconds` after the previous one on the worker.
  void Bundle(double seconds, const core::BundleResult& bundle) {
    if (metrics_ != nullptr) metrics_->ObserveBundle(seconds, bundle);
  }
  // A server-written file's end: written, kept_identical or refused_different.
  void OutputFile(const char* outcome) {
    if (metrics_ != nullptr) metrics_->CountOutputFile(outcome);
  }
  // The job ended after running on a worker for `seconds`.
  void Frame(double seconds) {
    if (metrics_ != nullptr) metrics_->ObserveFrame(seconds);
  }

 private:
  ServerMetrics* metrics_;
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_JOB_METRICS_H_
