#include "server/jobs/extract_job.h"

#include <exception>
#include <map>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"
#include "core/base/task_pool.h"
#include "core/frame/usable_data.h"
#include "server/platform/log.h"
#include "server/state/psf_cache.h"

namespace spexd::server {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Finished bundles waiting for the streaming task before the worker waits (a full
// r-camera bundle is ~7 MB in float64: ~170 MB, about one frame).
constexpr std::size_t kMaxFinishedBundles = 24;

// Runs `fn`; an exception (std::bad_alloc for a huge frame) becomes a status for this
// request instead of escaping into a worker or loader loop.
template <typename Fn>
absl::Status Guarded(Fn fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("out of host memory for this extraction");
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("unexpected error: ", std::string(e.what())));
  }
}

}  // namespace

ExtractJob::ExtractJob(const JobEnvironment& env, JobRequest request, ResponseStream* stream,
                       std::shared_ptr<std::atomic<bool>> cancel)
    : env_(env),
      request_(std::move(request)),
      stream_(stream),
      cancel_(std::move(cancel)),
      metrics_(env.metrics),
      input_(env_, request_, [this] { return Stopped(); }),
      output_(env_, request_, stream, metrics_, [this] { return StopStatus(); }) {}

bool ExtractJob::Stopped() const {
  return cancel_->load() || Clock::now() >= request_.deadline;
}

absl::Status ExtractJob::StopStatus() const {
  // gRPC cancels the call at its own deadline, which our steady-clock copy of it may
  // trail by the clock conversion: a cancel that close to the deadline is the deadline.
  constexpr auto kSlack = std::chrono::milliseconds(100);
  if (request_.deadline != Clock::time_point::max() && Clock::now() + kSlack >= request_.deadline) {
    return absl::DeadlineExceededError("deadline exceeded; extraction stopped");
  }
  return absl::CancelledError("request cancelled; extraction stopped");
}

void ExtractJob::Abandon(const absl::Status& status) { Complete(status); }

// ---------------------------------------------------------------- loader thread

bool ExtractJob::Prepare() {
  prepare_start_ = Clock::now();
  summary_.set_upload_seconds(Seconds(request_.arrived, request_.admitted));
  absl::Status status = Stopped() ? StopStatus() : Guarded([this] { return PrepareStages(); });
  // The reader reports a stop (cancel or deadline) as CANCELLED; say which.
  if (absl::IsCancelled(status) && Stopped()) status = StopStatus();
  prepared_ = Clock::now();
  summary_.set_load_seconds(Seconds(prepare_start_, prepared_));
  if (status.ok()) {
    metrics_.ImageLoaded(summary_.load_seconds());
    return true;
  }
  Complete(status);
  return false;
}

absl::Status ExtractJob::PrepareStages() {
  if (!request_.plan.has_value()) return absl::InternalError("job without validated parameters");
  StageLaps laps(output_);
  // Headers first: the image's shape and size checks cost no pixel decoding. A frame in
  // a CUDA region has no headers and is never decoded here: the backend reads it.
  SPEXD_RETURN_IF_ERROR(input_.Open());
  // Everything that can refuse the request without the pixels comes before decoding
  // them: a refused (or cancelled) job must not cost a frame's decode (~1 s, 270 MB).
  SPEXD_RETURN_IF_ERROR(PrepareDesiOptions());
  SPEXD_RETURN_IF_ERROR(PrepareGeometry(input_.height(), input_.width()));
  laps.Lap("load_open");
  if (Stopped()) return StopStatus();
  SPEXD_RETURN_IF_ERROR(input_.Decode());
  laps.Lap("load_decode");
  SPEXD_RETURN_IF_ERROR(output_.Prepare(geometry_, request_.bundles, *input_.image(),
                                        input_.in_img(), input_.read_files()));
  laps.Lap("load_output");
  return absl::OkStatus();
}

absl::Status ExtractJob::PrepareGeometry(int height, int width) {
  // Warm geometry for (PSF, grid, image shape).
  SPEXD_ASSIGN_OR_RETURN(geometry_, env_.cache->GetGeometry(request_.psf_id, request_.psf,
                                                            *request_.plan, height, width));
  return absl::OkStatus();
}

// ---------------------------------------------------------------- worker thread

void ExtractJob::Run(core::Backend& backend, int worker, core::TaskPool& streaming) {
  run_start_ = Clock::now();
  worker_ = worker;
  StartHealth(backend);
  summary_.set_queue_seconds(Seconds(request_.admitted, prepare_start_) +
                             Seconds(prepared_, run_start_));
  if (Stopped()) {
    Complete(StopStatus());
    return;
  }
  if (!output_.SendHeader(summary_.queue_seconds(), backend.description())) {
    Complete(StopStatus());
    return;
  }
  // The streaming stage owns the rest of the call once the task is posted; the task holds
  // a reference so the job outlives the scheduler's. Posted before the backend starts:
  // bundles stream while later ones are extracted.
  if (!streaming.Post([self = shared_from_this()] { self->StreamLoop(); })) {
    Complete(absl::UnavailableError("server is shutting down"));
    return;
  }
  const absl::Status status = Guarded([&] { return Extract(backend); });
  // The decoded planes (~270 MB for an r frame) are freed by the streaming task: the
  // unmapping takes tens of milliseconds that the worker should spend on the next job.
  const Clock::time_point end = Clock::now();
  absl::MutexLock lock(&mu_);
  extraction_done_ = true;
  extraction_status_ = status;
  extraction_end_ = end;
  extract_seconds_ = Seconds(run_start_, end);
}

void ExtractJob::StartHealth(const core::Backend& backend) {
  const core::ExtractionPlan& plan = *request_.plan;
  FrameHealthTracker::Context c;
  c.metrics = env_.metrics != nullptr ? &env_.metrics->health() : nullptr;
  c.shadow = env_.shadow;
  c.backend = backend.name();
  c.gpu = env_.metrics != nullptr ? env_.metrics->WorkerGpu(worker_) : ServerMetrics::kCpuGpuLabel;
  c.psf_id = request_.psf_id;
  c.client_tag = request_.client_tag;
  c.psf = request_.psf;
  c.plan = plan;
  c.regularize = plan.params().regularize;
  c.psferr = plan.psferr();
  c.host_image = input_.device_input() == nullptr;
  output_.StartHealth(std::move(c), request_.bundles);
}

absl::Status ExtractJob::Extract(core::Backend& backend) {
  // Planes kept raw or as float32 for workers that take them, met by one that does not (a
  // mixed server): decoded and ruled, or widened, here, exactly.
  core::PreprocImage& image = *input_.image();
  if (image.has_raw_planes() && !core::TakesRawPlanes(backend)) {
    core::DecodeRawPlanes(&image, env_.decode_pool);
  }
  if (image.has_float32_planes() && !core::TakesFloat32Planes(backend)) {
    core::WidenPlanes(&image, env_.decode_pool);
  }
  const core::ExtractionPlan& plan = *request_.plan;
  core::ExtractionJob job;
  job.geometry = geometry_;
  job.image = &image;
  job.device_image = input_.device_input();
  job.regularize = plan.params().regularize;
  job.psferr = plan.psferr();
  job.want_model = plan.params().want_model;
  job.resolution_form = output_.resolution_form();
  job.bundles = request_.bundles;
  job.cancel = cancel_.get();
  Clock::time_point last = Clock::now();
  auto sink = [&](core::BundleResult&& b) -> absl::Status {
    const Clock::time_point now = Clock::now();
    // The worker's work, counted as the backend finishes it (streamed or not).
    metrics_.WorkerPatches(worker_, b.counts.extracted);
    absl::MutexLock lock(&mu_);
    // Bounded hand-off; wake up now and then to notice a deadline (the cancel flag is set
    // without this mutex, so a change of it alone wakes no one either).
    auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return finished_.size() < kMaxFinishedBundles || stream_broken_;
    };
    while (!mu_.AwaitWithTimeout(absl::Condition(&room), absl::Milliseconds(200))) {
      if (Stopped()) break;
    }
    if (stream_broken_ || Stopped()) return StopStatus();
    const Clock::time_point handed = Clock::now();
    sink_wait_seconds_ += Seconds(now, handed);  // the streaming task was behind
    finished_.push_back(Finished{std::move(b), Seconds(last, now)});
    last = now;
    return absl::OkStatus();
  };
  absl::StatusOr<core::ExtractionSummary> extracted = backend.Extract(job, sink);
  if (!extracted.ok()) {
    // The backend reports the cancel flag as CANCELLED; say why it was set.
    if (absl::IsCancelled(extracted.status()) && Stopped()) return StopStatus();
    return extracted.status();
  }
  metrics_.WorkerFrame(worker_, Seconds(run_start_, Clock::now()));
  if (input_.device_input() != nullptr) {
    metrics_.HandoffBytes("in", static_cast<double>(CudaImageBytes(request_.image, request_.cuda)));
  }
  absl::MutexLock lock(&mu_);
  backend_summary_ = *std::move(extracted);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- streaming task

void ExtractJob::StreamLoop() {
  absl::Status stream_status;
  double wait_seconds = 0;     // for the worker's bundles
  double prepare_seconds = 0;  // preparing them, several at once
  std::vector<Finished> items;
  std::vector<JobOutput::PreparedBundle> prepared;
  // Once the last bundles are in hand the client waits only for the host: from then on
  // this frame's pool work goes ahead of the other frames' loads and rows.
  const std::size_t expected = output_.ListedBundles(request_.bundles).size();
  std::size_t taken = 0;
  std::optional<core::UrgentTasks> frame_end;
  for (;;) {
    items.clear();
    {
      const Clock::time_point t0 = Clock::now();
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !finished_.empty() || extraction_done_;
      };
      mu_.Await(absl::Condition(&ready));
      wait_seconds += Seconds(t0, Clock::now());
      if (finished_.empty()) break;  // extraction done and everything streamed
      // Every bundle waiting: a GPU batch's bundles arrive together.
      while (!finished_.empty()) {
        items.push_back(std::move(finished_.front()));
        finished_.pop_front();
      }
    }
    taken += items.size();
    if (taken >= expected && !frame_end.has_value()) frame_end.emplace();
    if (!stream_status.ok()) continue;  // drain what the worker still hands over
    // Their own work on the host pool at once (this thread takes part), then the
    // frame-wide rest and the sends one by one, in order.
    const Clock::time_point t0 = Clock::now();
    prepared.assign(items.size(), JobOutput::PreparedBundle{});
    core::ParallelFor(env_.decode_pool, static_cast<int>(items.size()),
                      static_cast<int>(items.size()), [&](int, int i) {
      Finished& f = items[static_cast<std::size_t>(i)];
      JobOutput::PreparedBundle& p = prepared[static_cast<std::size_t>(i)];
      p.status = Guarded([&] {  // on the host pool: nothing may escape
        p = output_.PrepareBundle(std::move(f.bundle), f.seconds);
        return absl::OkStatus();
      });
    });
    prepare_seconds += Seconds(t0, Clock::now());
    for (JobOutput::PreparedBundle& p : prepared) {
      stream_status = Guarded([&] { return output_.Bundle(std::move(p)); });
      if (!stream_status.ok()) {
        absl::MutexLock lock(&mu_);
        stream_broken_ = true;  // the worker stops at its next bundle
        break;
      }
    }
    prepared.clear();  // a bundle not streamed after an error goes now
  }
  output_.AddStage("output_prepare", prepare_seconds);
  absl::Status status;
  core::ExtractionSummary backend_summary;
  Clock::time_point extraction_end;
  {
    absl::MutexLock lock(&mu_);
    status = extraction_status_;
    backend_summary = backend_summary_;
    summary_.set_extract_seconds(extract_seconds_);
    extraction_end = extraction_end_;
    output_.AddStage("worker_sink_wait", sink_wait_seconds_);
  }
  output_.AddStage("stream_wait", wait_seconds);
  const Clock::time_point release_start = Clock::now();
  if (backend_summary.pixels_masked >= 0) {
    pixels_masked_ = backend_summary.pixels_masked;
    pixels_nonfinite_ = backend_summary.pixels_nonfinite;
  } else if (input_.image().has_value() && input_.device_input() == nullptr &&
             !input_.image()->has_raw_planes()) {  // raw: the host applied no rule
    pixels_masked_ = static_cast<int64_t>(input_.image()->n_masked);
    pixels_nonfinite_ = static_cast<int64_t>(input_.image()->n_nonfinite);
  }
  // A frame sampled for shadow parity keeps its planes.
  output_.health().KeepImage(&input_.image());
  input_.image().reset();  // the backend is done with it (extraction_done_ was seen above)
  output_.AddStage("input_release", Seconds(release_start, Clock::now()));
  // A failed send means the client is gone or the deadline passed: report that rather
  // than the CANCELLED the backend saw when the worker stopped.
  if (!stream_status.ok() && (status.ok() || absl::IsCancelled(status))) status = stream_status;
  // Nothing usable (every patch failed, or saw no valid pixel) must not look like a
  // success: no summary, no server-side frame (core/frame/usable_data.h).
  if (status.ok()) status = core::CheckUsableResult(output_.usable_bins(), backend_summary.counts);
  if (status.ok()) {
    status = Guarded([&] { return output_.Finish(backend_summary, &summary_, extraction_end); });
  }
  Complete(status);
}

void ExtractJob::Complete(const absl::Status& status) {
  const Clock::time_point end = Clock::now();
  const bool ran = run_start_ != Clock::time_point();
  if (ran) metrics_.Frame(Seconds(run_start_, end));
  const FrameHealthTracker& health = output_.health();
  const core::FrameHealth& qa = health.health();
  Log(status.ok() ? LogLevel::kInfo : LogLevel::kWarning, "extract_done",
      {{"request", health.request_id()},
       {"peer", request_.peer},
       {"tag", request_.client_tag},
       {"worker", worker_},
       {"psf", request_.psf_id},
       {"code", std::string(absl::StatusCodeToString(status.code()))},
       {"error", std::string(status.message())},
       {"bundles", output_.nbundles()},
       {"upload_s", summary_.upload_seconds()},
       {"queue_s", summary_.queue_seconds()},
       {"load_s", summary_.load_seconds()},
       {"extract_s", summary_.extract_seconds()},
       {"total_s", Seconds(request_.arrived, end)},
       // Numerical health (docs/operations.md).
       {"worst_condition", qa.worst_condition},
       {"retried", qa.counts.retried},
       {"failed", qa.counts.failed},
       {"somebadpix", qa.somebadpix},
       {"allbadpix", qa.allbadpix},
       {"bad2dfit", qa.bad2dfit},
       {"median_chi2pix", qa.median_chi2pix},
       {"pixels_masked", pixels_masked_},
       {"pixels_nonfinite", pixels_nonfinite_},
       {"shadow", health.shadow_state()},
       // Where the request's time went, stage by stage (docs/service.md).
       {"stages", std::map<std::string, double>(summary_.stage_seconds().begin(),
                                                summary_.stage_seconds().end())}});
  if (geometry_ != nullptr) env_.cache->Rebalance();  // the geometry grew by this job's spots
  ResponseStream* stream = std::exchange(stream_, nullptr);
  if (stream != nullptr) stream->Finish(status);
}

}  // namespace spexd::server
