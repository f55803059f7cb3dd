#include "server/rpc/exposure_decode.h"

#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/error_text.h"
#include "server/rpc/request_admission.h"

namespace spexd::server {

absl::Status CheckExposureRequest(const v1::ExposureRequest& request) {
  if (request.frames_size() == 0) {
    return absl::InvalidArgumentError("an exposure needs at least one frame");
  }
  if (request.frames_size() > kMaxExposureFrames) {
    return absl::InvalidArgumentError(absl::StrCat("an exposure of ", request.frames_size(),
                                                   " frames is over the limit of ",
                                                   kMaxExposureFrames, "; split it"));
  }
  std::set<std::string> outputs;
  for (int i = 0; i < request.frames_size(); ++i) {
    const v1::ExtractHeader& h = request.frames(i);
    const std::string entry = absl::StrCat("frames[", i, "]: ");
    if (h.image_case() != v1::ExtractHeader::kServerPath || h.server_path().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          entry, "an exposure's frames are read from server paths (server_path); uploads "
                 "and CUDA regions go through ExtractFrame"));
    }
    if (h.server_output_path().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          entry, "no server_output_path: an exposure's frames are written by the server"));
    }
    if (h.has_cuda_output() || h.want_model() || h.bundles_size() > 0 || h.fibers_size() > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          entry, "an exposure extracts whole frames into files: no cuda_output, want_model, "
                 "bundles or fibers"));
    }
    if (!outputs.insert(h.server_output_path()).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          entry, "server_output_path '", core::EchoValue(h.server_output_path()),
          "' is also an earlier frame's"));
    }
  }
  return absl::OkStatus();
}

ExposureRun::Frame DecodeExposureFrame(const JobEnvironment& env, v1::ExtractHeader header,
                                       bool realtime) {
  ExposureRun::Frame f;
  f.input_path = header.server_path();
  f.output_path = header.server_output_path();
  header.set_priority(realtime ? v1::REALTIME : v1::REPROCESSING);
  // The server writes every frame and the exposure reports summaries only: no arrays are
  // encoded for the stream that the exposure would drop.
  header.set_results_to_file_only(true);
  // As ExtractFrame admits a header, so that a frame gets the answer it would get alone.
  absl::StatusOr<JobRequest> request = AdmitHeader(env, header, /*subset=*/false, &f.outputs);
  if (!request.ok()) {
    f.refused = request.status();
    return f;
  }
  f.request = *std::move(request);
  return f;
}

}  // namespace spexd::server
