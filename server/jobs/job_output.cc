#include "server/jobs/job_output.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/base/task_pool.h"
#include "core/frame/frame_writer.h"
#include "core/frame/usable_data.h"
#include "server/jobs/cuda_request.h"
#include "server/jobs/job_types.h"
#include "server/jobs/proto_convert.h"

namespace spexd::server {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

JobOutput::JobOutput(const JobEnvironment& env, const JobRequest& request, ResponseStream* stream,
                     JobMetrics& metrics, std::function<absl::Status()> stop_status)
    : env_(env),
      request_(request),
      stream_(stream),
      metrics_(metrics),
      stop_status_(std::move(stop_status)) {}

JobOutput::~JobOutput() {
  // After the call has ended (the job goes with it): the next frame's assembler takes them.
  if (env_.frame_arrays != nullptr) env_.frame_arrays->Recycle(&retired_frame_);
}

// ---------------------------------------------------------------- loader thread

absl::Status JobOutput::Prepare(std::shared_ptr<const core::Geometry> geometry,
                                const std::vector<int>& bundles, const core::PreprocImage& image,
                                const std::string& in_img,
                                const std::vector<DataRoots::FileId>& read_files) {
  geometry_ = std::move(geometry);
  image_header_ = image.image_header;
  fibermap_fits_ = image.fibermap_fits;
  in_img_ = in_img;
  SPEXD_RETURN_IF_ERROR(PrepareHeader(bundles, image));
  const OutputTarget& out = request_.output;
  const core::PatchPlan& plan = geometry_->plan();
  if (out.any()) {
    ProtectReadFiles(read_files);
    SPEXD_ASSIGN_OR_RETURN(const std::string frame_path, CheckOutputPath(out.frame.path));
    if (!out.model.path.empty()) {
      SPEXD_ASSIGN_OR_RETURN(const std::string model_path, CheckOutputPath(out.model.path));
      // As when the header arrived (CheckServerOutputFiles), should a directory have been
      // swapped for a symlink since.
      if (model_path == frame_path) {
        return absl::InvalidArgumentError(absl::StrCat(
            "server_model_path and server_output_path are the same file (", frame_path, ")"));
      }
    }
    // The frame file is written bundle by bundle as the bundles arrive
    // (core::ProgressiveFrameFile), leaving the frame-wide rest after the last one; a .gz
    // one is deflated chunk by chunk as its bytes become final, and written at the end.
    SPEXD_RETURN_IF_ERROR(PrepareProgressiveFile(bundles));
  }
  if (request_.cuda.output != nullptr) {
    SPEXD_ASSIGN_OR_RETURN(core::OutputLayout layout,
                           CheckCudaOutput(request_.reply.cuda_output_offset, *request_.cuda.output,
                                           plan.nspec, plan.nwave, plan.ndiag));
    output_writer_.emplace(request_.cuda.output, static_cast<uint64_t>(request_.reply.cuda_output_offset),
                           layout, plan.specmin);
  }
  // The specmask of an output region needs the assembled frame (spec §2.13), but of
  // its arrays only chi2pix, pixmask_fraction and the failed bins unless a frame file,
  // the model or FrameProducts (the mask and scores the server computes from its
  // float64 frame) need the rest.
  const bool want_model = request_.plan->params().want_model;
  const bool file_or_model = want_model || out.any();
  whole_frame_ = file_or_model || sends_products();
  if (whole_frame_ || output_writer_.has_value()) {
    // FrameProducts' mask and scores need flux and ivar but not the resolution (~100 MB
    // of an r frame's 140), which goes to the client from the bundles; nor does a frame
    // file written progressively (it takes the resolution from the bundles), or the model.
    const bool all = file_or_model && progressive_ == nullptr;
    const auto keep = all              ? core::FrameAssembler::Keep::kAll
                      : whole_frame_ ? core::FrameAssembler::Keep::kSpectra
                                     : core::FrameAssembler::Keep::kMaskInputs;
    assembler_.emplace(*geometry_, want_model, keep, env_.frame_arrays);
    // Here, ahead, rather than one page fault per 4 KiB on the streaming task.
    assembler_->Prefault(env_.decode_pool);
  }
  return absl::OkStatus();
}

absl::Status JobOutput::PrepareHeader(const std::vector<int>& bundles,
                                      const core::PreprocImage& image) {
  // What a client needs to write the desispec frame; the grid is the validated request's.
  v1::FrameHeader header =
      FrameHeaderToProto(request_.psf_id, geometry_->plan(), bundles, image,
                         request_.psf->in_psf().value_or(""), RecordedGrid());
  if (bary_.factor != 1.0) {  // --barycentric-correction: the uncorrected grid, and HELIOCOR
    header.mutable_wave()->Assign(bary_.wave.begin(), bary_.wave.end());
    header.set_heliocor(bary_.factor);
  }
  // Serialized here, on the loader thread; the worker adds the queue time and the backend.
  header_bytes_ = header.SerializeAsString();
  if (header_bytes_.size() > static_cast<std::size_t>(env_.limits.max_message_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "frame header (image header cards and FIBERMAP) is ", header_bytes_.size(),
        " bytes, over the ", env_.limits.max_message_bytes, "-byte message limit"));
  }
  return absl::OkStatus();
}

bool JobOutput::float32_arrays() const {
  return request_.reply.float32_arrays && !request_.reply.file_only && !output_writer_.has_value();
}

bool JobOutput::sends_products() const {
  return float32_arrays() || (request_.reply.frame_products && !request_.reply.file_only &&
                              !output_writer_.has_value());
}

// ---------------------------------------------------------------- worker thread

bool JobOutput::SendHeader(double queue_seconds, const std::string& backend) {
  v1::FrameHeader late;
  late.set_queue_seconds(queue_seconds);
  late.set_backend(backend);
  return stream_->Send(EncodeFrameHeader(std::move(header_bytes_), late));
}

// ---------------------------------------------------------------- streaming task

JobOutput::PreparedBundle JobOutput::PrepareBundle(core::BundleResult&& finished,
                                                   double seconds) const {
  PreparedBundle p;
  p.seconds = seconds;
  // The messages borrow the bundle's arrays (no copy into protobuf messages); they keep it
  // alive until gRPC has written them.
  p.bundle = std::make_shared<core::BundleResult>(std::move(finished));
  core::BundleResult& b = *p.bundle;
  // Per Angstrom, as core::ExtractFrame does: the streamed values equal a local run's.
  core::FinalizeBundle(geometry_->dwave(), &b);
  p.usable_bins = core::CountUsableBins(b);
  if (output_writer_.has_value() || request_.reply.file_only) {
    // Into the output region, or the server writes the file: the client sees progress.
    p.messages.push_back(EncodeBundleDone(b, seconds));
  } else if (float32_arrays()) {
    p.messages =
        EncodeBundlePartsFloat32(p.bundle, seconds, MaxPayloadBytes(env_.limits), env_.wire_buffers);
  } else {
    p.messages = EncodeBundleParts(p.bundle, seconds, MaxPayloadBytes(env_.limits));
  }
  return p;
}

absl::Status JobOutput::Bundle(PreparedBundle&& prepared) {
  SPEXD_RETURN_IF_ERROR(prepared.status);
  // The stage times say where a bundle's time on the streaming task goes (the summary's
  // stage_seconds).
  StageLaps laps(*this);
  std::shared_ptr<core::BundleResult> bundle = std::move(prepared.bundle);
  const core::BundleResult& b = *bundle;
  health_.OnBundle(b);  // numerical health, bundle by bundle
  metrics_.Bundle(prepared.seconds, b);
  usable_bins_ += prepared.usable_bins;
  laps.Lap("output_finalize");
  if (output_writer_.has_value()) {
    SPEXD_RETURN_IF_ERROR(output_writer_->WriteBundle(b));
    laps.Lap("output_copies");
  }
  for (WireMessage& message : prepared.messages) {
    if (!stream_->Send(std::move(message))) return stop_status_();
  }
  laps.Lap("output_send");
  if (progressive_ != nullptr) {
    auto row = file_row_.find(b.bundle);
    if (row == file_row_.end()) {
      return absl::InternalError(absl::StrCat("bundle ", b.bundle, " is not in the frame file"));
    }
    // Written on the host pool: the next bundle need not wait for this one's rows.
    SPEXD_RETURN_IF_ERROR(row_writer_->Add(row->second, bundle));
    laps.Lap("output_file_rows_queue");
  }
  ++nbundles_;
  nfibers_ += b.nfibers;
  if (assembler_.has_value()) {
    SPEXD_RETURN_IF_ERROR(assembler_->Add(b));
    laps.Lap("output_assemble");
  }
  bundle.reset();  // the last reference unless gRPC still writes the parts
  laps.Lap("output_release");
  return absl::OkStatus();
}

core::ResolutionForm JobOutput::resolution_form() const {
  // An output region and the shadow check of a sampled frame take the float64 values.
  if (output_writer_.has_value() || health_.sampled()) return core::ResolutionForm::kFloat64;
  // The assembler of a progressively written file keeps no resolution (Prepare), and a
  // file-only reply streams only each bundle's progress.
  if (progressive_ != nullptr && request_.reply.file_only) return core::ResolutionForm::kFileBytes;
  // Nor does the assembler of FrameProducts' mask and scores, where no server-written file
  // or model needs the whole frame.
  if (float32_arrays() && !request_.output.any() && !request_.plan->params().want_model) {
    return core::ResolutionForm::kStreamFloat32;
  }
  return core::ResolutionForm::kFloat64;
}

std::vector<int> JobOutput::ListedBundles(std::vector<int> bundles) const {
  if (bundles.empty()) {  // none listed: the whole frame
    for (int b = 0; b < geometry_->plan().nbundles; ++b) bundles.push_back(b);
  }
  return bundles;
}

void JobOutput::StartHealth(FrameHealthTracker::Context context, std::vector<int> bundles) {
  bundles = ListedBundles(std::move(bundles));
  // Without a whole assembled frame the tracker keeps the chi2pix that the specmask's
  // frame-wide rule needs; with one, it reads the frame in place (CountFrame). An output
  // region's assembler keeps only the mask's inputs (no ivar for the median's weights).
  health_.Start(std::move(context), bundles, /*keep_chi2pix=*/!whole_frame_);
}

absl::Status JobOutput::Finish(const core::ExtractionSummary& backend_summary,
                               v1::ExtractSummary* summary, Clock::time_point extraction_end) {
  // The client waits for everything from here on, while the host pool also holds the next
  // frames' loads and rows: this frame's pool work (the mask's medians, the file's last
  // parts and digest, the products) goes ahead of theirs.
  core::UrgentTasks urgent;
  ExtractionSummaryToProto(backend_summary, summary);
  summary->set_nbundles(nbundles_);
  summary->set_usable_bins(usable_bins_);
  summary->set_nfibers(nfibers_);
  const Clock::time_point finish_start = Clock::now();
  if (extraction_end != Clock::time_point()) {
    stages_["output_tail_bundles"] = Seconds(extraction_end, finish_start);
  }
  core::Frame frame;
  if (assembler_.has_value()) {
    // desispec-exact: desispec's exact ALLBADPIX rule; the medians on the host pool.
    frame = assembler_->Finish(request_.plan->params().mask_policy, env_.decode_pool);
    assembler_.reset();
    const Clock::time_point t1 = Clock::now();
    stages_["output_specmask"] += Seconds(finish_start, t1);
    // After the final specmask: the counts are the served bits.
    if (whole_frame_) health_.CountFrame(frame);
    if (output_writer_.has_value()) {
      SPEXD_RETURN_IF_ERROR(output_writer_->WriteMask(frame));
      stages_["output_copies"] += Seconds(t1, Clock::now());
      metrics_.HandoffBytes("out", static_cast<double>(output_writer_->bytes_written()));
    }
    // The outputs record the uncorrected grid under --barycentric-correction (the
    // FrameHeader's), and the scores are computed on it, as a client computes them.
    if (bary_.factor != 1.0) frame.wave = bary_.wave;
    if (sends_products()) SPEXD_RETURN_IF_ERROR(SendProducts(frame));
    if (request_.output.any()) {
      const Clock::time_point t2 = Clock::now();
      SPEXD_RETURN_IF_ERROR(WriteFiles(frame, summary));
      stages_["output_file"] += Seconds(t2, Clock::now());
    }
    if (request_.reply.stream_model && !frame.model.empty()) {
      SPEXD_RETURN_IF_ERROR(SendModel(std::move(frame.model)));
    }
  }
  health_.Finish(summary->mutable_qa());
  const Clock::time_point end = Clock::now();
  if (extraction_end != Clock::time_point()) stages_["output_tail"] = Seconds(extraction_end, end);
  for (const auto& [stage, secs] : stages_) (*summary->mutable_stage_seconds())[stage] = secs;
  summary->set_total_seconds(Seconds(request_.arrived, end));
  v1::ExtractResponse last;
  *last.mutable_summary() = *summary;
  const bool sent = stream_->Send(EncodeResponse(last));
  // Freed with the job, once the call has ended: unmapping a frame's arrays takes tens of
  // milliseconds that the client would otherwise wait for its call's status.
  retired_frame_ = std::move(frame);
  if (!sent) return stop_status_();
  return absl::OkStatus();
}

const core::GridRequest& JobOutput::RecordedGrid() const {
  return bary_.factor != 1.0 ? bary_.grid : request_.plan->grid();
}

absl::Status JobOutput::SendProducts(const core::Frame& frame) {
  v1::ExtractResponse first;
  v1::FrameProducts* p = first.mutable_products();
  if (request_.plan->params().scores) {
    for (core::FrameScore& score :
         core::RawScores(frame, env_.decode_pool, core::DefaultFitsWriteThreads())) {
      v1::ScoreColumn* c = p->add_scores();
      c->set_name(std::move(score.name));
      c->set_comment(std::move(score.comment));
      c->mutable_values()->Add(score.values.begin(), score.values.end());
    }
  }
  // Whole rows per part; a mask value takes at most 5 bytes as a varint.
  const std::size_t max_payload = MaxPayloadBytes(env_.limits);
  const std::size_t nw = static_cast<std::size_t>(std::max(1, frame.nwave));
  int row = 0;
  do {
    v1::ExtractResponse msg;
    if (row == 0) msg = std::move(first);
    v1::FrameProducts* part = msg.mutable_products();
    const std::size_t used = part->ByteSizeLong();
    const std::size_t room = max_payload > used ? max_payload - used : 0;
    const int rows = std::min(frame.nspec - row, std::max(1, static_cast<int>(room / (nw * 5))));
    part->set_row_begin(row);
    part->set_nrows(rows);
    const auto begin = frame.mask.begin() + static_cast<std::ptrdiff_t>(row) * frame.nwave;
    part->mutable_mask()->Add(begin, begin + static_cast<std::ptrdiff_t>(rows) * frame.nwave);
    if (!stream_->Send(EncodeResponse(msg))) return stop_status_();
    row += rows;
  } while (row < frame.nspec);
  return absl::OkStatus();
}

absl::Status JobOutput::SendModel(std::vector<double> image) {
  const std::size_t max_payload = MaxPayloadBytes(env_.limits);
  // The chunks borrow the image (no copy); they keep it alive until written.
  auto model = std::make_shared<const std::vector<double>>(std::move(image));
  const std::size_t total = model->size() * sizeof(double);
  for (std::size_t off = 0; off < total; off += max_payload) {
    if (!stream_->Send(EncodeModelChunk(model, off, std::min(max_payload, total - off)))) {
      return stop_status_();
    }
  }
  return absl::OkStatus();
}

}  // namespace spexd::server
