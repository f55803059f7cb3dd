// The output side of one extraction job: the FrameHeader, each
// finalised bundle streamed to the client (or written into the client's CUDA output
// region with a completion on the stream), and at the end the products that need the
// whole frame (server-side frame file, the specmask of an output region, the model
// image) and the summary. Prepared on the loader thread, the header sent by the worker,
// the rest on the job's streaming task: one thread at a time, as ExtractJob hands over.
#ifndef SPEXD_SERVER_JOB_OUTPUT_H_
#define SPEXD_SERVER_JOB_OUTPUT_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/backend/backend.h"
#include "core/frame/frame.h"
#include "core/frame/frame_writer.h"
#include "core/frame/progressive_frame_file.h"
#include "core/plan/barycentric.h"
#include "core/plan/geometry.h"
#include "server/platform/data_roots.h"
#include "core/frame/file_row_writer.h"
#include "server/jobs/frame_health.h"
#include "server/jobs/job_metrics.h"
#include "server/jobs/proto_convert.h"
#include "server/jobs/region_output.h"
#include "spexd/v1/spexd.pb.h"

namespace spexd::server {

struct JobEnvironment;
struct JobRequest;
class ResponseStream;
struct ServiceLimits;

class JobOutput {
 public:
  // `env`, `request`, `stream` and `metrics` outlive this object; `stop_status` gives the
  // status of a stopped call (cancelled or past its deadline) when a send fails.
  JobOutput(const JobEnvironment& env, const JobRequest& request, ResponseStream* stream,
            JobMetrics& metrics, std::function<absl::Status()> stop_status);
  ~JobOutput();
  JobOutput(const JobOutput&) = delete;
  JobOutput& operator=(const JobOutput&) = delete;

  // Loader thread, once the image is decoded: serializes the FrameHeader (refused when
  // over the message limit), checks the server-side output path (never one of
  // `read_files`, the input, or the PSF file) and the CUDA output region, and makes the
  // frame assembler when an output needs the whole frame.
  absl::Status Prepare(std::shared_ptr<const core::Geometry> geometry,
                       const std::vector<int>& bundles, const core::PreprocImage& image,
                       const std::string& in_img, const std::vector<DataRoots::FileId>& read_files);

  // Loader thread, before Prepare: desi_extract_spectra --barycentric-correction's HELIOCOR
  // and the uncorrected grid that the FrameHeader and the frame file record in place of
  // the (corrected) plan's. Without it, factor 1 and the plan's grid.
  void SetBarycentric(core::BarycentricGrid bary) { bary_ = std::move(bary); }

  // Worker: sends the FrameHeader with what is known only now. False once the call is
  // cancelled or broken.
  bool SendHeader(double queue_seconds, const std::string& backend);

  // A finished bundle with the work on it that needs no other bundle done: per Angstrom
  // (as core::ExtractFrame), its usable bins, the messages that stream it. Bundles that
  // arrive together (a GPU batch's) are prepared at once on the host pool.
  struct PreparedBundle {
    std::shared_ptr<core::BundleResult> bundle;
    double seconds = 0;  // the backend's time for it
    int64_t usable_bins = 0;
    std::vector<WireMessage> messages;  // sent in order after any output-region write
    absl::Status status;                // not OK: preparing it failed (out of memory)
  };
  // Any thread, several bundles at once (reads only what Prepare set). May throw
  // std::bad_alloc.
  PreparedBundle PrepareBundle(core::BundleResult&& bundle, double seconds) const;
  // Streaming task, in the order the bundles finished: the frame-wide bookkeeping (health,
  // metrics, the assembled frame, the file's rows) and the messages, or the bundle written
  // into the output region and its completion streamed.
  absl::Status Bundle(PreparedBundle&& prepared);
  // Bins of the bundles so far that carry information (core::CountUsableBins).
  int64_t usable_bins() const { return usable_bins_; }
  int nbundles() const { return nbundles_; }

  // The frame's numerical health: started by the worker (StartHealth), fed
  // each served bundle and the assembled frame here, finished into the summary's FrameQa.
  void StartHealth(FrameHealthTracker::Context context, std::vector<int> bundles);
  FrameHealthTracker& health() { return health_; }
  // After StartHealth: the form in which the backend hands the resolution data
  // (core::ExtractionJob::resolution_form). kFileBytes where nothing but the server-written
  // frame file reads it (no arrays streamed), kStreamFloat32 where nothing but the float32
  // stream does (no server-written file, no model); either only without an output region
  // and with the frame not sampled for the shadow check.
  core::ResolutionForm resolution_form() const;

  // Streaming task, after the last bundle of a successful extraction: the products that
  // need the whole frame, then the summary message (`summary` completed here, with this
  // job's stage times: AddStage's, the output stages, and "output_tail", the time from
  // `extraction_end` (when the worker finished) to the summary).
  absl::Status Finish(const core::ExtractionSummary& backend_summary, v1::ExtractSummary* summary,
                      std::chrono::steady_clock::time_point extraction_end);
  // `bundles`, or every bundle of the plan when none is listed (after Prepare).
  std::vector<int> ListedBundles(std::vector<int> bundles) const;
  // Adds `seconds` to the summary's stage `name` (docs/service.md, "stage_seconds").
  void AddStage(const std::string& name, double seconds) { stages_[name] += seconds; }

 private:
  absl::Status PrepareHeader(const std::vector<int>& bundles, const core::PreprocImage& image);
  // Checks a server-side output path (server_output_path or server_model_path); returns
  // its canonical path.
  absl::StatusOr<std::string> CheckOutputPath(const std::string& out);
  void ProtectReadFiles(const std::vector<DataRoots::FileId>& read_files);
  // The server-side desispec frame file and, with server_model_path, the model file
  // (OutputFiles: a file already there is kept when it is the same frame, else the
  // request is ALREADY_EXISTS with nothing written); their paths, sizes and SHA-256 go
  // into `summary`. The wavelengths become the uncorrected grid under
  // --barycentric-correction.
  absl::Status WriteFiles(const core::Frame& frame, v1::ExtractSummary* summary);
  // The frame file (.fits, or .fits.gz deflated as its bytes become final) written while
  // the frame is extracted:
  // laid out and its temporary created here (loader thread), each bundle's rows written
  // by Bundle, the frame-wide rest (FinishProgressiveFile), then from WriteFiles a .gz
  // member's write, fsync and rename, beside its digest.
  absl::Status PrepareProgressiveFile(const std::vector<int>& bundles);
  absl::Status FinishProgressiveFile(const core::Frame& frame);
  // The frame file's header cards (and scores rule) for this request.
  core::FrameMetadata FileMetadata() const;
  // The specmask and RAW scores of the float64 frame (FrameProducts).
  absl::Status SendProducts(const core::Frame& frame);
  bool float32_arrays() const;
  // FrameProducts follow the bundles: ARRAY_FLOAT32 or want_frame_products, with arrays
  // streamed.
  bool sends_products() const;
  // The grid the outputs record: uncorrected under --barycentric-correction.
  const core::GridRequest& RecordedGrid() const;
  absl::Status SendModel(std::vector<double> model);

  const JobEnvironment& env_;
  const JobRequest& request_;
  ResponseStream* stream_;
  JobMetrics& metrics_;
  std::function<absl::Status()> stop_status_;

  std::shared_ptr<const core::Geometry> geometry_;
  core::BarycentricGrid bary_;  // factor 1 without --barycentric-correction
  std::string header_bytes_;  // the FrameHeader, serialized by Prepare
  // What the frame file records of the input (the decoded image is freed earlier).
  std::vector<std::string> image_header_;
  std::string fibermap_fits_;
  std::string in_img_;
  // What the server-side output may replace: never the input or the PSF file.
  DataRoots::WritePolicy output_policy_;
  std::optional<RegionOutputWriter> output_writer_;  // results into a CUDA region
  // Server-side stage times of this job (streaming task), into the summary's stage_seconds.
  std::map<std::string, double> stages_;
  std::optional<core::FrameAssembler> assembler_;
  // The progressive frame file: its temporary (declared first, so that it outlives the
  // writer, which borrows its descriptor; dropped uncommitted, it leaves nothing), the
  // writer, and the file row of each plan bundle.
  std::optional<DataRoots::PendingOutput> frame_file_;
  std::unique_ptr<core::ProgressiveFrameFile> progressive_;
  // Its rows, written beside this streaming task (declared after the file: it waits for
  // its writes when destroyed, before the file goes).
  std::unique_ptr<core::FileRowWriter> row_writer_;
  std::map<int, int> file_row_;
  // The assembler keeps every array (a frame file or the model), not only the mask's inputs.
  bool whole_frame_ = false;
  core::Frame retired_frame_;  // Finish's frame, freed with this object (after the call ends)
  int nbundles_ = 0, nfibers_ = 0;
  int64_t usable_bins_ = 0;
  FrameHealthTracker health_;
};
// Times consecutive stages of one job: each Lap adds the time since the previous Lap (or
// since construction) to that stage of `output` (JobOutput::AddStage).
class StageLaps {
 public:
  explicit StageLaps(JobOutput& output)
      : output_(output), last_(std::chrono::steady_clock::now()) {}
  void Lap(const std::string& stage) {
    const std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();
    output_.AddStage(stage, std::chrono::duration<double>(now - last_).count());
    last_ = now;
  }

 private:
  JobOutput& output_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_JOB_OUTPUT_H_
