// The input side of one extraction job: where its frame comes from
// (a server path, an upload, or CUDA regions), reading the headers first so that every
// refusal that needs no pixels comes before the decode, then the decode itself. Runs on
// the job's loader thread; gRPC-free.
#ifndef SPEXD_SERVER_JOB_INPUT_H_
#define SPEXD_SERVER_JOB_INPUT_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/backend/device_region.h"
#include "core/io/preproc.h"
#include "server/platform/data_roots.h"

namespace spexd::server {

struct JobEnvironment;
struct JobRequest;

class JobInput {
 public:
  // `env` and `request` outlive this object; `stopped` says whether the call was
  // cancelled or its deadline passed (checked by the reader while it decodes).
  JobInput(const JobEnvironment& env, JobRequest& request, std::function<bool()> stopped);

  // Opens the request's image and reads its headers (or, for a frame in CUDA regions,
  // checks its size and makes the backend's device input). Takes the upload's bytes.
  // Errors name the request's path, never /proc/self/fd/N.
  absl::Status Open();
  int height() const { return height_; }
  int width() const { return width_; }
  // Decodes the pixels (INVALID_ARGUMENT when none is valid); for a device frame only
  // records the shape: device frames are not scanned on the host (docs/design.md), and one
  // without a valid pixel ends with FAILED_PRECONDITION (no usable bin). The request's
  // fibermap_fits (desi_extract_spectra -f) replaces the image's FIBERMAP.
  absl::Status Decode();

  // The reader of a file or upload between Open and Decode (its headers: RA, MJD-OBS and
  // the FIBERMAP for --barycentric-correction); null for a frame in CUDA regions.
  core::PreprocReader* reader() { return reader_.has_value() ? &*reader_ : nullptr; }
  // The decoded image (the shape alone for a device frame): set by Decode.
  std::optional<core::PreprocImage>& image() { return image_; }
  // The frame in CUDA regions, when the request names one.
  const core::DeviceImageInput* device_input() const {
    return device_input_.has_value() ? &*device_input_ : nullptr;
  }
  // The image's name for the frame file's IN_IMG and the logs.
  const std::string& in_img() const { return in_img_; }
  // The file read, when it came from a server path: an output may never replace it.
  const std::vector<DataRoots::FileId>& read_files() const { return read_files_; }

 private:
  absl::StatusOr<core::PreprocReader> OpenReader();
  absl::Status OpenDevice();
  // `status` with the server path in place of /proc/self/fd/N, and the server's limits
  // named when it is RESOURCE_EXHAUSTED.
  absl::Status Shown(const absl::Status& status) const;

  const JobEnvironment& env_;
  JobRequest& request_;
  std::function<bool()> stopped_;
  std::optional<core::PreprocReader> reader_;
  std::optional<core::PreprocImage> image_;
  std::optional<core::DeviceImageInput> device_input_;
  int height_ = 0, width_ = 0;
  std::string in_img_;
  std::string read_name_, shown_name_;  // server path: the name read, the name shown
  std::vector<DataRoots::FileId> read_files_;
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_JOB_INPUT_H_
