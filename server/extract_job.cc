#include "server/extract_job.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/frame/frame_writer.h"
#include "core/base/status_macros.h"
#include "core/frame/usable_data.h"
#include "server/content_id.h"
#include "server/data_roots.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/proto_convert.h"
#include "server/psf_cache.h"

namespace spexd::server {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Room left in a message for everything but the payload arrays (tags, lengths, counts).
constexpr std::size_t kMessageOverhead = 64 * 1024;
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
    : env_(env), request_(std::move(request)), stream_(stream), cancel_(std::move(cancel)) {}

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
  absl::Status status = Stopped() ? StopStatus() : Guarded([this] { return PrepareImage(); });
  // The reader reports a stop (cancel or deadline) as CANCELLED; say which.
  if (absl::IsCancelled(status) && Stopped()) status = StopStatus();
  prepared_ = Clock::now();
  summary_.set_load_seconds(Seconds(prepare_start_, prepared_));
  if (status.ok()) {
    if (env_.metrics != nullptr) env_.metrics->ObserveImageLoad(summary_.load_seconds());
    return true;
  }
  Complete(status);
  return false;
}

absl::StatusOr<core::PreprocReader> ExtractJob::OpenImage() {
  const v1::ExtractHeader& h = request_.header;
  core::PreprocOptions popts;
  popts.mask_policy = params_.mask_policy;
  popts.pool = env_.decode_pool;
  popts.buffers = env_.plane_buffers;
  popts.load_buffers = env_.load_buffers;
  popts.keep_float32 = env_.float32_planes != nullptr && env_.float32_planes->load();
  const core::FitsSizeLimits limits = FitsLimits(env_.limits);
  auto stop = [this] { return Stopped(); };
  absl::StatusOr<core::PreprocReader> reader;
  if (h.has_server_path()) {
    // CFITSIO reads the confined file through its descriptor (no copy of the bytes);
    // errors name the request's path rather than /proc/self/fd/N.
    SPEXD_ASSIGN_OR_RETURN(DataRoots::OpenFile file,
                           env_.roots->Open(h.server_path(), env_.limits.max_upload_bytes));
    if (in_img_.empty()) in_img_ = file.path();
    if (auto id = DataRoots::IdOf(file.fd()); id.ok()) output_policy_.protected_.push_back(*id);
    if (file.size() == 0) return absl::InvalidArgumentError(absl::StrCat(in_img_, ": empty file"));
    read_name_ = file.proc_path();
    shown_name_ = h.server_path();
    reader = core::PreprocReader::Open(read_name_, popts, limits, stop);
  } else {
    if (in_img_.empty()) in_img_.assign("upload");
    if (request_.upload.empty()) return absl::InvalidArgumentError("empty upload");
    // The reader keeps the bytes (gzip ones are replaced by the FITS file they hold).
    reader = core::PreprocReader::OpenMemory(std::exchange(request_.upload, std::string()),
                                             in_img_, popts, limits, stop);
  }
  if (!reader.ok()) return Shown(reader.status());
  return reader;
}

absl::Status ExtractJob::PrepareDeviceInput() {
  const v1::CudaImage& ci = request_.header.cuda_image();
  const int64_t pixels = static_cast<int64_t>(ci.height()) * ci.width();
  if (pixels > env_.limits.max_image_pixels) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "image is ", ci.height(), " x ", ci.width(), " = ", pixels,
        " pixels, over the server's limit of ", env_.limits.max_image_pixels,
        " (--max_image_pixels)"));
  }
  if (in_img_.empty()) in_img_ = absl::StrCat("cuda:", request_.cuda.image->name);
  device_input_ = MakeDeviceInput(ci, request_.cuda, params_.mask_policy);
  return absl::OkStatus();
}

absl::Status ExtractJob::Shown(const absl::Status& status) const {
  std::string message(status.message());
  if (!read_name_.empty()) message = absl::StrReplaceAll(message, {{read_name_, shown_name_}});
  if (absl::IsResourceExhausted(status)) {
    absl::StrAppend(&message, " (server limits: --max_image_pixels=", env_.limits.max_image_pixels,
                    ", --max_upload_bytes=", env_.limits.max_upload_bytes,
                    " for a file, decompressed or not)");
  }
  return absl::Status(status.code(), message);
}

absl::Status ExtractJob::PrepareImage() {
  const v1::ExtractHeader& h = request_.header;
  params_ = request_.params;  // validated when the header arrived
  in_img_ = h.in_img_name();
  // Headers first: the image's shape and size checks cost no pixel decoding. A frame in
  // a CUDA region has no headers and is never decoded here: the backend reads it.
  std::optional<core::PreprocReader> reader;
  int height = 0, width = 0;
  if (h.has_cuda_image()) {
    SPEXD_RETURN_IF_ERROR(PrepareDeviceInput());
    height = h.cuda_image().height();
    width = h.cuda_image().width();
  } else {
    SPEXD_ASSIGN_OR_RETURN(core::PreprocReader opened, OpenImage());
    reader.emplace(std::move(opened));
    height = reader->height();
    width = reader->width();
  }
  // Everything that can refuse the request without the pixels comes before decoding
  // them: a refused (or cancelled) job must not cost a frame's decode (~1 s, 270 MB).
  SPEXD_RETURN_IF_ERROR(PrepareGeometry(height, width));
  if (Stopped()) return StopStatus();
  if (reader.has_value()) {
    SPEXD_RETURN_IF_ERROR(DecodeImage(*reader));
  } else {
    // Only the shape: device frames are not scanned on the host (style.md: no device
    // scans in the hot path); one without a valid pixel ends with FAILED_PRECONDITION
    // (no usable bin).
    core::PreprocImage shape;
    shape.height = height;
    shape.width = width;
    shape.source_name = in_img_;
    image_.emplace(std::move(shape));
  }
  image_header_ = image_->image_header;
  fibermap_fits_ = image_->fibermap_fits;
  SPEXD_RETURN_IF_ERROR(PrepareFrameHeader());
  return PrepareOutputs();
}

absl::Status ExtractJob::PrepareGeometry(int height, int width) {
  // Warm geometry for (PSF, grid, image shape).
  SPEXD_ASSIGN_OR_RETURN(geometry_, env_.cache->GetGeometry(request_.header.psf_id(), request_.psf,
                                                            params_, height, width));
  const core::PatchPlan& plan = geometry_->plan();
  bundles_ = request_.bundles;
  const std::size_t max_payload =
      static_cast<std::size_t>(env_.limits.max_message_bytes) - kMessageOverhead;
  if (BundleBytesPerFiber(plan.nwave, plan.ndiag) > max_payload) {
    return absl::InvalidArgumentError(absl::StrCat(
        "wavelength grid of ", plan.nwave, " bins is too long: one fibre would not fit in a ",
        env_.limits.max_message_bytes, "-byte message"));
  }
  return absl::OkStatus();
}

absl::Status ExtractJob::DecodeImage(core::PreprocReader& reader) {
  absl::StatusOr<core::PreprocImage> decoded = reader.Read();
  if (!decoded.ok()) return Shown(decoded.status());
  image_.emplace(*std::move(decoded));
  return core::CheckImageHasValidPixel(*image_);
}

absl::Status ExtractJob::PrepareFrameHeader() {
  // The grid once, and what a client needs to write the desispec frame.
  const core::Psf& psf = *request_.psf;
  const core::GridRequest grid = core::RequestedGrid(params_, psf);
  meta_wmin_ = grid.wmin;
  meta_wmax_ = grid.wmax;
  meta_dw_ = grid.dw;
  const v1::FrameHeader header = FrameHeaderToProto(request_.header.psf_id(), geometry_->plan(),
                                                    bundles_, *image_, psf.in_psf().value_or(""), grid);
  // Serialized here, on the loader thread; Run adds the queue time and the backend.
  header_bytes_ = header.SerializeAsString();
  if (header_bytes_.size() > static_cast<std::size_t>(env_.limits.max_message_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "frame header (image header cards and FIBERMAP) is ", header_bytes_.size(),
        " bytes, over the ", env_.limits.max_message_bytes, "-byte message limit"));
  }
  return absl::OkStatus();
}

absl::Status ExtractJob::PrepareOutputs() {
  const v1::ExtractHeader& h = request_.header;
  const core::PatchPlan& plan = geometry_->plan();
  if (!h.server_output_path().empty()) SPEXD_RETURN_IF_ERROR(CheckOutputPath());
  if (request_.cuda.output != nullptr) {
    SPEXD_ASSIGN_OR_RETURN(core::OutputLayout layout,
                           CheckCudaOutput(h.cuda_output(), *request_.cuda.output, plan.nspec,
                                           plan.nwave, plan.ndiag));
    output_writer_.emplace(request_.cuda.output, static_cast<uint64_t>(h.cuda_output().region().offset()),
                           layout, plan.specmin);
  }
  // The specmask of an output region needs the assembled frame (spec §2.13).
  if (h.want_model() || !h.server_output_path().empty() || output_writer_.has_value()) {
    assembler_.emplace(*geometry_, h.want_model());
  }
  return absl::OkStatus();
}

absl::Status ExtractJob::CheckOutputPath() {
  output_policy_.overwrite = request_.header.overwrite();
  // The PSF file, when it was loaded from a server path (its source is that path).
  const std::string& psf_source = request_.psf->source_name();
  if (!psf_source.empty() && psf_source[0] == '/') {
    const int fd = ::open(psf_source.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd >= 0) {
      if (auto id = DataRoots::IdOf(fd); id.ok()) output_policy_.protected_.push_back(*id);
      ::close(fd);
    }
  }
  const std::string& out = request_.header.server_output_path();
  SPEXD_RETURN_IF_ERROR(env_.output_roots->CheckOutput(out, output_policy_).status());
  // The same PSF may have been loaded from elsewhere (an upload, another path) first:
  // a file to be replaced that holds exactly the PSF's bytes is that PSF too.
  if (output_policy_.overwrite) {
    auto existing = env_.output_roots->ReadFile(out, env_.limits.max_upload_bytes);
    if (existing.ok() && Sha256Hex(existing->bytes) == request_.header.psf_id()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "output path '", out, "' holds the request's PSF: never overwritten"));
    }
  }
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
  v1::FrameHeader late;
  late.set_queue_seconds(summary_.queue_seconds());
  late.set_backend(backend.description());
  if (!stream_->Send(EncodeFrameHeader(std::move(header_bytes_), late))) {
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
  absl::MutexLock lock(&mu_);
  extraction_done_ = true;
  extraction_status_ = status;
  extract_seconds_ = Seconds(run_start_, Clock::now());
}

void ExtractJob::StartHealth(const core::Backend& backend) {
  FrameHealthTracker::Context c;
  c.metrics = env_.metrics != nullptr ? &env_.metrics->health() : nullptr;
  c.shadow = env_.shadow;
  c.backend = backend.name();
  c.gpu = env_.metrics != nullptr ? env_.metrics->WorkerGpu(worker_) : ServerMetrics::kCpuGpuLabel;
  c.psf_id = request_.header.psf_id();
  c.client_tag = request_.header.client_tag();
  c.psf = request_.psf;
  c.params = geometry_->params();
  c.regularize = params_.regularize;
  c.psferr = core::EffectivePsfErr(params_, *request_.psf);
  c.host_image = !device_input_.has_value();
  std::vector<int> bundles = bundles_;
  if (bundles.empty()) {
    for (int b = 0; b < geometry_->plan().nbundles; ++b) bundles.push_back(b);
  }
  health_.Start(std::move(c), bundles, /*keep_arrays=*/!assembler_.has_value());
}

absl::Status ExtractJob::Extract(core::Backend& backend) {
  // Planes decoded as float32 for workers that take them, met by one that does not (a
  // mixed server): widened here, exactly.
  if (image_->has_float32_planes() && !backend.TakesFloat32Planes()) {
    core::WidenPlanes(&*image_, env_.decode_pool);
  }
  core::ExtractionJob job;
  job.geometry = geometry_;
  job.image = &*image_;
  job.device_image = device_input_.has_value() ? &*device_input_ : nullptr;
  job.regularize = params_.regularize;
  job.psferr = core::EffectivePsfErr(params_, *request_.psf);
  job.want_model = params_.want_model;
  job.bundles = bundles_;
  job.cancel = cancel_.get();
  Clock::time_point last = Clock::now();
  auto sink = [&](core::BundleResult&& b) -> absl::Status {
    const Clock::time_point now = Clock::now();
    // The worker's work, counted as the backend finishes it (streamed or not).
    if (env_.metrics != nullptr) env_.metrics->CountWorkerPatches(worker_, b.counts.extracted);
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
  if (env_.metrics != nullptr) {
    env_.metrics->CountWorkerFrame(worker_, Seconds(run_start_, Clock::now()));
    if (device_input_.has_value()) {
      env_.metrics->AddHandoffBytes("in", static_cast<double>(CudaImageBytes(request_.header.cuda_image())));
    }
  }
  absl::MutexLock lock(&mu_);
  backend_summary_ = *std::move(extracted);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- streaming task

void ExtractJob::StreamLoop() {
  absl::Status stream_status;
  for (;;) {
    Finished item;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !finished_.empty() || extraction_done_;
      };
      mu_.Await(absl::Condition(&ready));
      if (finished_.empty()) break;  // extraction done and everything streamed
      item = std::move(finished_.front());
      finished_.pop_front();
    }
    if (!stream_status.ok()) continue;  // drain what the worker still hands over
    stream_status = Guarded([&] { return StreamBundle(item); });
    if (!stream_status.ok()) {
      absl::MutexLock lock(&mu_);
      stream_broken_ = true;  // the worker stops at its next bundle
    }
  }
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    status = extraction_status_;
    summary_.set_extract_seconds(extract_seconds_);
  }
  health_.KeepImage(&image_);  // a frame sampled for shadow parity keeps its planes
  image_.reset();  // the backend is done with it (extraction_done_ was seen above)
  // A failed send means the client is gone or the deadline passed: report that rather
  // than the CANCELLED the backend saw when the worker stopped.
  if (!stream_status.ok() && (status.ok() || absl::IsCancelled(status))) status = stream_status;
  // Nothing usable (every patch failed, or saw no valid pixel) must not look like a
  // success: no summary, no server-side frame (issue 15 item 13, core/frame/usable_data.h).
  if (status.ok()) {
    absl::MutexLock lock(&mu_);
    status = core::CheckUsableResult(usable_bins_, backend_summary_.counts);
  }
  if (status.ok()) status = Guarded([this] { return FinishProducts(); });
  Complete(status);
}

absl::Status ExtractJob::StreamBundle(Finished& item) {
  // The parts borrow the bundle's arrays (no copy into protobuf messages); they keep it
  // alive until gRPC has written them.
  auto bundle = std::make_shared<core::BundleResult>(std::move(item.bundle));
  core::BundleResult& b = *bundle;
  // Per Angstrom, as core::ExtractFrame does: the streamed values equal a local run's.
  core::FinalizeBundle(geometry_->dwave(), &b);
  health_.OnBundle(b);  // issue 23
  if (env_.metrics != nullptr) env_.metrics->ObserveBundle(item.seconds, b);
  if (output_writer_.has_value()) {
    SPEXD_RETURN_IF_ERROR(HandOverBundle(b, item.seconds));
  } else {
    const std::size_t max_payload =
        static_cast<std::size_t>(env_.limits.max_message_bytes) - kMessageOverhead;
    for (WireMessage& part : EncodeBundleParts(bundle, item.seconds, max_payload)) {
      if (!stream_->Send(std::move(part))) return StopStatus();
    }
  }
  ++nbundles_;
  nfibers_ += b.nfibers;
  usable_bins_ += core::CountUsableBins(b);
  if (assembler_.has_value()) SPEXD_RETURN_IF_ERROR(assembler_->Add(b));
  return absl::OkStatus();
}

absl::Status ExtractJob::HandOverBundle(const core::BundleResult& b, double seconds) {
  const Clock::time_point t0 = Clock::now();
  SPEXD_RETURN_IF_ERROR(output_writer_->WriteBundle(b));
  output_copy_seconds_ += Seconds(t0, Clock::now());
  if (!stream_->Send(EncodeBundleDone(b, seconds))) return StopStatus();
  return absl::OkStatus();
}

absl::Status ExtractJob::FinishProducts() {
  const v1::ExtractHeader& h = request_.header;
  {
    absl::MutexLock lock(&mu_);
    ExtractionSummaryToProto(backend_summary_, &summary_);
  }
  summary_.set_nbundles(nbundles_);
  summary_.set_usable_bins(usable_bins_);
  summary_.set_nfibers(nfibers_);
  if (assembler_.has_value()) {
    const Clock::time_point t0 = Clock::now();
    core::Frame frame = assembler_->Finish();
    assembler_.reset();
    health_.CountFrame(frame);
    if (output_writer_.has_value()) {
      const Clock::time_point t1 = Clock::now();
      SPEXD_RETURN_IF_ERROR(output_writer_->WriteMask(frame));
      output_copy_seconds_ += Seconds(t1, Clock::now());
      // Where the results' hand-off spends its time (docs/perf.md, issue 13).
      (*summary_.mutable_stage_seconds())["output_specmask"] = Seconds(t0, t1);
      (*summary_.mutable_stage_seconds())["output_copies"] = output_copy_seconds_;
      if (env_.metrics != nullptr) {
        env_.metrics->AddHandoffBytes("out", static_cast<double>(output_writer_->bytes_written()));
      }
    }
    if (!h.server_output_path().empty()) {
      const core::Psf& psf = *request_.psf;
      core::FrameMetadata meta;
      meta.image_header = image_header_;
      meta.fibermap_fits = fibermap_fits_;
      meta.in_psf = h.in_psf_name().empty() ? psf.source_name() : h.in_psf_name();
      meta.in_img = in_img_;
      meta.orig_psf = psf.in_psf().value_or("");
      meta.wmin = meta_wmin_;
      meta.wmax = meta_wmax_;
      meta.dw = meta_dw_;
      SPEXD_ASSIGN_OR_RETURN(std::string fits, core::FrameToFits(frame, meta));
      // A .gz name gets gzip, as CFITSIO and desispec write it.
      SPEXD_ASSIGN_OR_RETURN(fits, core::FitsBytesForPath(h.server_output_path(), std::move(fits)));
      SPEXD_ASSIGN_OR_RETURN(
          std::string out_path,
          env_.output_roots->WriteFile(h.server_output_path(), fits, output_policy_));
      summary_.set_server_output_path(out_path);
    }
    if (h.want_model() && !frame.model.empty()) {
      const std::size_t max_payload =
          static_cast<std::size_t>(env_.limits.max_message_bytes) - kMessageOverhead;
      // The chunks borrow the image (no copy); they keep it alive until written.
      auto model = std::make_shared<const std::vector<double>>(std::move(frame.model));
      const std::size_t total = model->size() * sizeof(double);
      for (std::size_t off = 0; off < total; off += max_payload) {
        if (!stream_->Send(EncodeModelChunk(model, off, std::min(max_payload, total - off)))) {
          return StopStatus();
        }
      }
    }
  }
  health_.Finish(summary_.mutable_qa());
  summary_.set_total_seconds(Seconds(request_.arrived, Clock::now()));
  v1::ExtractResponse last;
  *last.mutable_summary() = summary_;
  if (!stream_->Send(EncodeResponse(last))) return StopStatus();
  return absl::OkStatus();
}

void ExtractJob::Complete(const absl::Status& status) {
  const Clock::time_point end = Clock::now();
  const bool ran = run_start_ != Clock::time_point();
  if (env_.metrics != nullptr && ran) env_.metrics->ObserveFrame(Seconds(run_start_, end));
  const core::FrameHealth& qa = health_.health();
  Log(status.ok() ? LogLevel::kInfo : LogLevel::kWarning, "extract_done",
      {{"request", health_.request_id()},
       {"peer", request_.peer},
       {"tag", request_.header.client_tag()},
       {"worker", worker_},
       {"psf", request_.header.psf_id()},
       {"code", std::string(absl::StatusCodeToString(status.code()))},
       {"error", std::string(status.message())},
       {"bundles", nbundles_},
       {"upload_s", summary_.upload_seconds()},
       {"queue_s", summary_.queue_seconds()},
       {"load_s", summary_.load_seconds()},
       {"extract_s", summary_.extract_seconds()},
       {"total_s", Seconds(request_.arrived, end)},
       // Numerical health (issue 23; docs/operations.md).
       {"worst_condition", qa.worst_condition},
       {"retried", qa.counts.retried},
       {"failed", qa.counts.failed},
       {"somebadpix", qa.somebadpix},
       {"allbadpix", qa.allbadpix},
       {"bad2dfit", qa.bad2dfit},
       {"median_chi2pix", qa.median_chi2pix},
       {"shadow", health_.shadow_state()}});
  if (geometry_ != nullptr) env_.cache->Rebalance();  // the geometry grew by this job's spots
  ResponseStream* stream = std::exchange(stream_, nullptr);
  if (stream != nullptr) stream->Finish(status);
}

}  // namespace spexd::server
