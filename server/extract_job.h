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
#include "server/cuda_request.h"
#include "server/data_roots.h"
#include "server/frame_health.h"
#include "server/job_input.h"
#include "server/job_metrics.h"
#include "server/job_output.h"
#include "server/proto_convert.h"
#include "server/scheduler.h"
#include "server/service_limits.h"
#include "spexd/v1/spexd.pb.h"

namespace spexd::server {

class PsfCache;
class ServerMetrics;
class ShadowParity;

// The call side of a job (implemented by the gRPC reactor, or by tests).
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  // Queues a serialized ExtractResponse for the client (its borrowed pieces stay alive
  // through message.owner until written). Blocks while too many messages wait to be
  // written (back-pressure from a slow client). Returns false once the call is cancelled
  // or broken: the job should stop.
  virtual bool Send(WireMessage message) = 0;
  // Ends the call after the queued messages. Called exactly once; the stream must not
  // be used afterwards (it may be destroyed).
  virtual void Finish(const absl::Status& status) = 0;
};

// Shared server state a job uses; owned by the server, outlives every job.
struct JobEnvironment {
  PsfCache* cache = nullptr;
  ServerMetrics* metrics = nullptr;  // may be null
  const DataRoots* roots = nullptr;         // inputs (--data_roots)
  const DataRoots* output_roots = nullptr;  // server-side output (--output_roots)
  ServiceLimits limits;
  // Host decoding (all may be null): threads that decode a frame's planes with its loader
  // (and encode server-written frame files with the streaming task, JobOutput), the
  // memory float32 planes reuse from frame to frame, and whether the workers take float32
  // planes (set once the backends exist; PreprocOptions::keep_float32).
  core::TaskPool* decode_pool = nullptr;
  core::PlaneBufferPool* plane_buffers = nullptr;
  core::PlaneBufferPool* load_buffers = nullptr;  // PreprocOptions::load_buffers
  const std::atomic<bool>* float32_planes = nullptr;
  ShadowParity* shadow = nullptr;  // shadow parity sampling; null when off
};

struct JobRequest {
  v1::ExtractHeader header;
  // The parameters, validated once when the header arrived, with their grid
  // (server/request_validation.h); never re-validated downstream.
  std::optional<core::ExtractionPlan> plan;
  std::vector<int> bundles;  // selected plan bundles; empty: all
  bool subset = false;  // ExtractBundles: header must select bundles or fibres
  std::shared_ptr<const core::Psf> psf;  // held from admission: eviction cannot race
  std::string upload;                    // image bytes when uploaded
  CudaRequestRegions cuda;               // CUDA regions it names, held until the job ends
  std::string peer;                      // for logs
  std::chrono::steady_clock::time_point arrived;   // call started
  std::chrono::steady_clock::time_point admitted;  // header (and upload) received, queued
  // Absolute deadline of the call (steady clock); max() when none.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

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
  // The warm geometry for the image's shape; refuses a grid too long for one message.
  absl::Status PrepareGeometry(int height, int width);
  // desi_extract_spectra's -f and --barycentric-correction (server/extract_job_desi.cc):
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
