#include "server/jobs/job_input.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/base/status_macros.h"
#include "core/frame/usable_data.h"
#include "server/jobs/cuda_request.h"
#include "server/jobs/job_types.h"

namespace spexd::server {

JobInput::JobInput(const JobEnvironment& env, JobRequest& request, std::function<bool()> stopped)
    : env_(env), request_(request), stopped_(std::move(stopped)) {}

absl::Status JobInput::Open() {
  const ImageSource& image = request_.image;
  in_img_ = image.name;
  if (image.kind == ImageSource::Kind::kCuda) {
    SPEXD_RETURN_IF_ERROR(OpenDevice());
    height_ = image.height;
    width_ = image.width;
    return absl::OkStatus();
  }
  SPEXD_ASSIGN_OR_RETURN(core::PreprocReader opened, OpenReader());
  reader_.emplace(std::move(opened));
  height_ = reader_->height();
  width_ = reader_->width();
  return absl::OkStatus();
}

absl::StatusOr<core::PreprocReader> JobInput::OpenReader() {
  ImageSource& image = request_.image;
  core::PreprocOptions popts;
  popts.mask_policy = request_.plan->params().mask_policy;
  popts.pool = env_.decode_pool;
  popts.buffers = env_.plane_buffers;
  popts.load_buffers = env_.load_buffers;
  popts.keep_float32 = env_.float32_planes != nullptr && env_.float32_planes->load();
  popts.keep_raw = env_.raw_planes != nullptr && env_.raw_planes->load();
  const core::FitsSizeLimits limits = FitsLimits(env_.limits);
  absl::StatusOr<core::PreprocReader> reader;
  if (image.kind == ImageSource::Kind::kServerPath) {
    // CFITSIO reads the confined file through its descriptor (no copy of the bytes);
    // errors name the request's path rather than /proc/self/fd/N.
    SPEXD_ASSIGN_OR_RETURN(DataRoots::OpenFile file,
                           env_.roots->Open(image.server_path, env_.limits.max_upload_bytes));
    if (in_img_.empty()) in_img_ = file.path();
    if (auto id = DataRoots::IdOf(file.fd()); id.ok()) read_files_.push_back(*id);
    if (file.size() == 0) return absl::InvalidArgumentError(absl::StrCat(in_img_, ": empty file"));
    read_name_ = file.proc_path();
    shown_name_ = image.server_path;
    reader = core::PreprocReader::Open(read_name_, popts, limits, stopped_);
  } else {
    if (in_img_.empty()) in_img_.assign("upload");
    if (image.upload.empty()) return absl::InvalidArgumentError("empty upload");
    // The reader keeps the bytes (gzip ones are replaced by the FITS file they hold).
    reader = core::PreprocReader::OpenMemory(std::exchange(image.upload, std::string()),
                                             in_img_, popts, limits, stopped_);
  }
  if (!reader.ok()) return Shown(reader.status());
  return reader;
}

absl::Status JobInput::OpenDevice() {
  const ImageSource& ci = request_.image;
  const int64_t pixels = static_cast<int64_t>(ci.height) * ci.width;
  if (pixels > env_.limits.max_image_pixels) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "image is ", ci.height, " x ", ci.width, " = ", pixels,
        " pixels, over the server's limit of ", env_.limits.max_image_pixels,
        " (--max_image_pixels)"));
  }
  if (in_img_.empty()) in_img_ = absl::StrCat("cuda:", request_.cuda.image->name);
  device_input_ = MakeDeviceInput(ci, request_.cuda, request_.plan->params().mask_policy);
  return absl::OkStatus();
}

absl::Status JobInput::Decode() {
  if (!reader_.has_value()) {
    core::PreprocImage shape;
    shape.height = height_;
    shape.width = width_;
    shape.source_name = in_img_;
    image_.emplace(std::move(shape));
  } else {
    absl::StatusOr<core::PreprocImage> decoded = reader_->Read();
    reader_.reset();
    if (!decoded.ok()) return Shown(decoded.status());
    image_.emplace(*std::move(decoded));
    SPEXD_RETURN_IF_ERROR(core::CheckImageHasValidPixel(*image_));
  }
  const std::string& fibermap = request_.image.fibermap_fits;
  if (!fibermap.empty()) image_->fibermap_fits = fibermap;  // -f
  return absl::OkStatus();
}

absl::Status JobInput::Shown(const absl::Status& status) const {
  std::string message(status.message());
  if (!read_name_.empty()) message = absl::StrReplaceAll(message, {{read_name_, shown_name_}});
  if (absl::IsResourceExhausted(status)) {
    absl::StrAppend(&message, " (server limits: --max_image_pixels=", env_.limits.max_image_pixels,
                    ", --max_upload_bytes=", env_.limits.max_upload_bytes,
                    " for a file, decompressed or not)");
  }
  return absl::Status(status.code(), message);
}

}  // namespace spexd::server
