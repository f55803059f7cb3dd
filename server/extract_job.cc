#include "server/extract_job.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/frame.h"
#include "core/frame_writer.h"
#include "core/geometry.h"
#include "core/preproc.h"
#include "core/status_macros.h"
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

// The model image is sent as raw float64 bytes in host order; clients and servers are
// little-endian (x86-64, aarch64), which the wire format documents.
static_assert(std::endian::native == std::endian::little, "ModelChunk assumes little-endian");

}  // namespace

ExtractJob::ExtractJob(const JobEnvironment& env, JobRequest request, ResponseStream* stream,
                       std::shared_ptr<std::atomic<bool>> cancel)
    : env_(env), request_(std::move(request)), stream_(stream), cancel_(std::move(cancel)) {}

bool ExtractJob::Stopped() const {
  return cancel_->load() || Clock::now() >= request_.deadline;
}

absl::Status ExtractJob::StopStatus() const {
  if (Clock::now() >= request_.deadline) {
    return absl::DeadlineExceededError("deadline exceeded; extraction stopped between bundles");
  }
  return absl::CancelledError("request cancelled; extraction stopped between bundles");
}

void ExtractJob::Abandon(const absl::Status& status) {
  ResponseStream* stream = std::exchange(stream_, nullptr);
  if (stream != nullptr) stream->Finish(status);
}

void ExtractJob::Run(core::Backend& backend, int worker) {
  started_ = Clock::now();
  v1::ExtractSummary summary;
  absl::Status status;
  // Nothing may escape into the worker loop: allocation failures for a huge frame
  // become a status for this request only.
  try {
    status = Execute(backend, &summary);
  } catch (const std::bad_alloc&) {
    status = absl::ResourceExhaustedError("out of host memory for this extraction");
  } catch (const std::exception& e) {
    status = absl::InternalError(absl::StrCat("unexpected error: ", std::string(e.what())));
  }
  const double total = Seconds(started_, Clock::now());
  if (env_.metrics != nullptr) env_.metrics->ObserveFrame(total);
  Log(status.ok() ? LogLevel::kInfo : LogLevel::kWarning, "extract_done",
      {{"peer", request_.peer},
       {"tag", request_.header.client_tag()},
       {"worker", worker},
       {"psf", request_.header.psf_id()},
       {"code", std::string(absl::StatusCodeToString(status.code()))},
       {"error", std::string(status.message())},
       {"bundles", summary.nbundles()},
       {"upload_s", summary.upload_seconds()},
       {"queue_s", summary.queue_seconds()},
       {"load_s", summary.load_seconds()},
       {"extract_s", summary.extract_seconds()},
       {"worker_s", total}});
  env_.cache->Rebalance();  // geometries grew by the spots of this job
  ResponseStream* stream = std::exchange(stream_, nullptr);
  if (stream != nullptr) stream->Finish(status);
}

absl::Status ExtractJob::Execute(core::Backend& backend, v1::ExtractSummary* summary) {
  const v1::ExtractHeader& h = request_.header;
  summary->set_upload_seconds(Seconds(request_.arrived, request_.admitted));
  summary->set_queue_seconds(Seconds(request_.admitted, started_));
  if (Stopped()) return StopStatus();

  // --- Image: a confined server-side file or the uploaded bytes.
  SPEXD_ASSIGN_OR_RETURN(core::ExtractionParams params,
                         ParamsFromProto(h.params(), h.want_model()));
  std::string in_img = h.in_img_name();
  core::PreprocOptions popts;
  popts.mask_policy = params.mask_policy;
  absl::StatusOr<core::PreprocImage> decoded;
  if (h.has_server_path()) {
    // CFITSIO reads the confined file through its descriptor (no copy of the bytes);
    // errors name the request's path rather than /proc/self/fd/N.
    SPEXD_ASSIGN_OR_RETURN(DataRoots::OpenFile file,
                           env_.roots->Open(h.server_path(), env_.limits.max_upload_bytes));
    if (in_img.empty()) in_img = file.path();
    if (file.size() == 0) return absl::InvalidArgumentError(absl::StrCat(in_img, ": empty file"));
    decoded = core::ReadPreproc(file.proc_path(), popts);
    if (!decoded.ok()) {
      return absl::Status(decoded.status().code(),
                          absl::StrReplaceAll(decoded.status().message(),
                                              {{file.proc_path(), h.server_path()}}));
    }
    decoded->source_name = in_img;
  } else {
    if (in_img.empty()) in_img.assign("upload");
    if (request_.upload.empty()) return absl::InvalidArgumentError("empty upload");
    decoded = core::ReadPreprocFromMemory(request_.upload.data(), request_.upload.size(), in_img,
                                          popts);
    std::string().swap(request_.upload);  // the decoded planes are all we need from here on
    if (!decoded.ok()) return decoded.status();
  }
  core::PreprocImage image = *std::move(decoded);
  const int64_t pixels = static_cast<int64_t>(image.height) * image.width;
  if (pixels > env_.limits.max_image_pixels) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "image is ", image.height, " x ", image.width, " = ", pixels,
        " pixels, over the server's limit of ", env_.limits.max_image_pixels,
        " (--max_image_pixels)"));
  }

  // --- Warm geometry for (PSF, grid, image shape).
  SPEXD_ASSIGN_OR_RETURN(std::shared_ptr<const core::Geometry> geometry,
                         env_.cache->GetGeometry(h.psf_id(), request_.psf, params, image.height,
                                                 image.width));
  const core::PatchPlan& plan = geometry->plan();
  SPEXD_ASSIGN_OR_RETURN(std::vector<int> bundles, SelectBundles(h, plan));
  if (request_.subset && bundles.empty()) {
    return absl::InvalidArgumentError("ExtractBundles needs bundles or fibers");
  }
  const std::size_t max_payload =
      static_cast<std::size_t>(env_.limits.max_message_bytes) - kMessageOverhead;
  if (BundleBytesPerFiber(plan.nwave, plan.ndiag) > max_payload) {
    return absl::InvalidArgumentError(absl::StrCat(
        "wavelength grid of ", plan.nwave, " bins is too long: one fibre would not fit in a ",
        env_.limits.max_message_bytes, "-byte message"));
  }
  const Clock::time_point loaded = Clock::now();
  summary->set_load_seconds(Seconds(started_, loaded));
  if (env_.metrics != nullptr) env_.metrics->ObserveImageLoad(summary->load_seconds());

  // --- Header: the grid once, and what a client needs to write the desispec frame.
  const core::Psf& psf = *request_.psf;
  v1::ExtractResponse header_msg;
  v1::FrameHeader* fh = header_msg.mutable_header();
  fh->set_psf_id(h.psf_id());
  fh->set_specmin(plan.specmin);
  fh->set_nspec(plan.nspec);
  fh->set_bundlesize(plan.bundlesize);
  fh->set_nwave(plan.nwave);
  fh->set_ndiag(plan.ndiag);
  fh->mutable_wave()->Add(plan.wave.begin(), plan.wave.end());
  if (bundles.empty()) {
    for (int b = 0; b < plan.nbundles; ++b) fh->add_bundles(b);
  } else {
    for (int b : bundles) fh->add_bundles(b);
  }
  for (const std::string& card : image.image_header) fh->add_image_header(card);
  fh->set_fibermap_fits(image.fibermap_fits);
  fh->set_orig_psf(psf.in_psf().value_or(""));
  // The requested grid of the WAVEMIN/WAVEMAX/WAVESTEP cards: the PSF domain and 0.8
  // when none was given (extraction-spec §2.2), as the local CLI writes them.
  fh->set_wavemin(params.has_wavelength ? params.wmin : psf.wavemin());
  fh->set_wavemax(params.has_wavelength ? params.wmax : psf.wavemax());
  fh->set_wavestep(params.has_wavelength ? params.dw : 0.8);
  fh->set_queue_seconds(summary->queue_seconds());
  fh->set_backend(backend.description());
  fh->set_image_height(image.height);
  fh->set_image_width(image.width);
  if (header_msg.ByteSizeLong() > static_cast<std::size_t>(env_.limits.max_message_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "frame header (image header cards and FIBERMAP) is ", header_msg.ByteSizeLong(),
        " bytes, over the ", env_.limits.max_message_bytes, "-byte message limit"));
  }
  if (!stream_->Send(std::move(header_msg))) return StopStatus();

  // --- Extraction: each finished bundle is finalised (photons/Angstrom) and streamed
  // before the next one starts; the same FinalizeBundle + FrameAssembler sequence as
  // core::ExtractFrame, so that the streamed values equal a local run's.
  const bool assemble = h.want_model() || !h.server_output_path().empty();
  std::optional<core::FrameAssembler> assembler;
  if (assemble) assembler.emplace(*geometry, h.want_model());
  core::ExtractionJob job;
  job.geometry = geometry;
  job.image = &image;
  job.regularize = params.regularize;
  job.psferr = core::EffectivePsfErr(params, psf);
  job.want_model = h.want_model();
  job.bundles = bundles;
  job.cancel = cancel_.get();
  Clock::time_point last = Clock::now();
  int nbundles = 0, nfibers = 0;
  auto sink = [&](core::BundleResult&& b) -> absl::Status {
    core::FinalizeBundle(geometry->dwave(), &b);
    const Clock::time_point now = Clock::now();
    const double secs = Seconds(last, now);
    last = now;
    if (env_.metrics != nullptr) env_.metrics->ObserveBundle(secs, b);
    for (v1::BundleData& part : BundleToParts(b, secs, max_payload)) {
      v1::ExtractResponse msg;
      *msg.mutable_bundle() = std::move(part);
      if (!stream_->Send(std::move(msg))) return StopStatus();
    }
    ++nbundles;
    nfibers += b.nfibers;
    if (assembler.has_value()) SPEXD_RETURN_IF_ERROR(assembler->Add(b));
    if (Stopped()) return StopStatus();
    return absl::OkStatus();
  };
  absl::StatusOr<core::ExtractionSummary> extracted = backend.Extract(job, sink);
  if (!extracted.ok()) {
    // The backend reports the cancel flag as CANCELLED; say why it was set.
    if (absl::IsCancelled(extracted.status()) && Stopped()) return StopStatus();
    return extracted.status();
  }
  summary->set_extract_seconds(Seconds(loaded, Clock::now()));
  CountsToProto(extracted->counts, summary->mutable_counts());
  for (const auto& [stage, secs] : extracted->stage_seconds) {
    (*summary->mutable_stage_seconds())[stage] = secs;
  }
  summary->set_nbundles(nbundles);
  summary->set_nfibers(nfibers);

  // --- Optional products: the server-side frame file and the model image.
  if (assembler.has_value()) {
    core::Frame frame = assembler->Finish();
    if (!h.server_output_path().empty()) {
      SPEXD_ASSIGN_OR_RETURN(std::string out_path,
                             env_.roots->ResolveForWrite(h.server_output_path()));
      core::FrameMetadata meta;
      meta.image_header = image.image_header;
      meta.fibermap_fits = image.fibermap_fits;
      meta.in_psf = h.in_psf_name().empty() ? psf.source_name() : h.in_psf_name();
      meta.in_img = in_img;
      meta.orig_psf = psf.in_psf().value_or("");
      meta.wmin = fh->wavemin();
      meta.wmax = fh->wavemax();
      meta.dw = fh->wavestep();
      SPEXD_ASSIGN_OR_RETURN(std::string fits, core::FrameToFits(frame, meta));
      SPEXD_RETURN_IF_ERROR(core::WriteFileAtomically(out_path, fits));
      summary->set_server_output_path(out_path);
    }
    if (h.want_model() && !frame.model.empty()) {
      const char* data = reinterpret_cast<const char*>(frame.model.data());
      const std::size_t total = frame.model.size() * sizeof(double);
      for (std::size_t off = 0; off < total; off += max_payload) {
        v1::ExtractResponse msg;
        v1::ModelChunk* chunk = msg.mutable_model();
        chunk->set_offset(static_cast<int64_t>(off));
        chunk->set_total_bytes(static_cast<int64_t>(total));
        chunk->set_data(data + off, std::min(max_payload, total - off));
        if (!stream_->Send(std::move(msg))) return StopStatus();
      }
    }
  }
  summary->set_total_seconds(Seconds(request_.arrived, Clock::now()));
  v1::ExtractResponse last_msg;
  *last_msg.mutable_summary() = *summary;
  if (!stream_->Send(std::move(last_msg))) return StopStatus();
  return absl::OkStatus();
}

}  // namespace spexd::server
