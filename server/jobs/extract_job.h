// One extraction request as a scheduler job, in three stages so that a worker (a GPU)
// spends its time extracting only:
//   Prepare (a loader thread): the input (JobInput: read the image from a server path
//     or an upload, or take a frame in CUDA regions), the warm geometry through the PSF
//     cache, then the decode and the outputs (JobOutput: FrameHeader, output checks);
//   Run (the worker): send the header, run the backend; each finished bundle is handed
//     to the job's streaming task, and the worker is free as soon as the backend returns;
//   streaming task (the scheduler's streaming stage, core::TaskPool): JobOutput
//     finalises each bundle (photons/Angstrom) and streams it (or writes it into a CUDA
//     output region), then the products that need the whole frame and the summary; the
//     job ends the call.
// What the job reports to the metrics goes through JobMetrics. gRPC-free: it talks to
// the call through ResponseStream.
#ifndef SPEXD_SERVER_EXTRACT_JOB_H_
#define SPEXD_SERVER_EXTRACT_JOB_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/backend/backend.h"
#include "core/io/preproc.h"
#include "core/io/psf.h"
#include "core/plan/extraction_params.h"
#include "core/plan/geometry.h"
#include "server/jobs/cuda_request.h"
#include "server/platform/data_roots.h"
#include "server/jobs/frame_health.h"
#include "server/jobs/job_input.h"
#include "server/jobs/job_metrics.h"
#include "server/jobs/job_output.h"
#include "server/jobs/job_types.h"
#include "server/jobs/proto_convert.h"
#include "server/state/scheduler.h"
#include "server/jobs/service_limits.h"
#include "spexd/v1/spexd.pb.h"

namespace spexd::server {

class ExtractJob : public Job, public std::enable_shared_from_this<ExtractJob> {
 public:
  // `stream` stays valid until Finish is called on it; `cancel` is set by the call when
  // the client cancels or the deadline passes, and is polled by the backend before
  // each patch (CPU) or patch batch (CUDA). Create with std::make_shared (the streaming
  // task shares ownership). `request.plan` must be set.
  ExtractJob(const JobEnvironment& env, JobRequest request, ResponseStream* stream,
             std::shared_ptr<std::atomic<bool>> cancel);

  bool Prepare() override;
  int device() const override { return request_.cuda.device(); }
  std::chrono::steady_clock::time_point deadline() const override { return request_.deadline; }
  // Set by Prepare (a loader thread) before the scheduler queues the job for a worker.
  const core::Geometry* warm_geometry() const override { return geometry_.get(); }
  void Run(core::Backend& backend, int worker, core::TaskPool& streaming) override;
  void Abandon(const absl::Status& status) override;

 private:
  struct Finished {
    core::BundleResult bundle;
    double seconds = 0;  // since the previous bundle (or the start) on the worker
  };

  // Prepare's work: input headers, geometry, decode, outputs.
  absl::Status PrepareStages();
  // The warm geometry for the image's shape.
  absl::Status PrepareGeometry(int height, int width);
  // desi_extract_spectra's -f and --barycentric-correction (server/jobs/extract_job_desi.cc):
  // checks the request's FIBERMAP and, with --barycentric-correction, re-plans the request
  // on the corrected grid (request_.plan) before the geometry is planned, and hands the
  // uncorrected grid and HELIOCOR to output_. Needs input_ opened.
  absl::Status PrepareDesiOptions();
  absl::Status Extract(core::Backend& backend);
  // The worker's half of the numerical-health hook.
  void StartHealth(const core::Backend& backend);
  void StreamLoop();
  // Logs, records metrics and ends the call; the last use of the stream.
  void Complete(const absl::Status& status);
  // Status for a stopped extraction: DEADLINE_EXCEEDED or CANCELLED.
  absl::Status StopStatus() const;
  bool Stopped() const;

  const JobEnvironment& env_;
  JobRequest request_;
  ResponseStream* stream_;
  std::shared_ptr<std::atomic<bool>> cancel_;
  JobMetrics metrics_;
  JobInput input_;
  JobOutput output_;
  int worker_ = -1;
  // What the pixel rules did to the image (the host's counts, or the backend's for raw
  // planes); -1 when not known (an image read from a CUDA region, raw planes a backend
  // did not count). For the log.
  int64_t pixels_masked_ = -1, pixels_nonfinite_ = -1;

  // Prepared state (loader thread, then read by the worker and the streaming task).
  std::shared_ptr<const core::Geometry> geometry_;
  v1::ExtractSummary summary_;
  std::chrono::steady_clock::time_point prepare_start_, prepared_, run_start_;

  // Worker -> streaming task hand-off (bounded: a slow client slows the worker down
  // only after kMaxFinishedBundles finished bundles wait). The state above and below
  // that is not guarded (input_ and output_ included) is owned by one thread at a time:
  // the loader (Prepare), then the worker (Run), then the streaming task once it has seen
  // extraction_done_ under mu_.
  absl::Mutex mu_;
  std::deque<Finished> finished_ ABSL_GUARDED_BY(mu_);
  bool extraction_done_ ABSL_GUARDED_BY(mu_) = false;
  bool stream_broken_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status extraction_status_ ABSL_GUARDED_BY(mu_);
  core::ExtractionSummary backend_summary_ ABSL_GUARDED_BY(mu_);
  double extract_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  std::chrono::steady_clock::time_point extraction_end_ ABSL_GUARDED_BY(mu_);
  double sink_wait_seconds_ ABSL_GUARDED_BY(mu_) = 0;  // the worker waited for room
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_EXTRACT_JOB_H_
