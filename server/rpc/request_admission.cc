#include "server/rpc/request_admission.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "server/rpc/request_decode.h"
#include "server/state/psf_cache.h"

namespace spexd::server {

absl::StatusOr<JobRequest> AdmitHeader(const JobEnvironment& env, const v1::ExtractHeader& header,
                                       bool subset, std::vector<std::string>* outputs) {
  // What needs no PSF first, so the answer does not depend on the cache.
  SPEXD_ASSIGN_OR_RETURN(DecodedRequest decoded, DecodeRequest(header, subset, env.limits));
  JobRequest& request = decoded.request;
  // The output and model paths too, not after the frame is uploaded and decoded, and
  // compared as canonical paths. The job checks them again, with the input's and the
  // PSF's inodes, before writing.
  SPEXD_ASSIGN_OR_RETURN(std::vector<std::string> canonical,
                         CheckServerOutputFiles(request.output, *env.output_roots));
  if (outputs != nullptr) *outputs = std::move(canonical);
  SPEXD_ASSIGN_OR_RETURN(request.psf, env.cache->Get(request.psf_id));
  // The rest, against the PSF, into the plan the job carries.
  SPEXD_ASSIGN_OR_RETURN(request.plan, CheckRequest(decoded.params, *request.psf, env.limits));
  return std::move(request);
}

namespace {

std::size_t PixelBytesOf(const v1::CudaImage& image) {
  return image.pixel_type() == v1::FLOAT64 ? 8 : 4;
}

absl::Status CheckRef(const char* what, const v1::CudaRegionRef& ref, std::size_t alignment) {
  if (ref.region_id().empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": region_id is empty"));
  if (ref.offset() < 0 || ref.offset() % static_cast<int64_t>(alignment) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": offset ", ref.offset(),
                                                   " must be >= 0 and a multiple of ", alignment));
  }
  return absl::OkStatus();
}

// Looks `ref` up and checks that `bytes` from its offset fit the region.
absl::StatusOr<std::shared_ptr<const RegisteredRegion>> Resolve(const char* what,
                                                                const v1::CudaRegionRef& ref,
                                                                uint64_t bytes,
                                                                const RegionRegistry& registry) {
  SPEXD_ASSIGN_OR_RETURN(std::shared_ptr<const RegisteredRegion> region, registry.Find(ref.region_id()));
  const uint64_t offset = static_cast<uint64_t>(ref.offset());
  if (offset > region->size() || bytes > region->size() - offset) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": region '", region->name, "' too small: ", bytes, " bytes from offset ", offset,
        " end at byte ", offset + bytes, ", the region has ", region->size()));
  }
  return region;
}

}  // namespace

absl::StatusOr<CudaRequestRegions> ResolveCudaRegions(const v1::ExtractHeader& header,
                                                      const RegionRegistry& registry) {
  CudaRequestRegions out;
  if (header.has_cuda_image()) {
    const v1::CudaImage& im = header.cuda_image();
    if (im.height() <= 0 || im.width() <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cuda_image: height and width must be > 0, not ", im.height(), " x ", im.width()));
    }
    if (im.pixel_type() != v1::PIXEL_TYPE_UNSPECIFIED && im.pixel_type() != v1::FLOAT32 &&
        im.pixel_type() != v1::FLOAT64) {
      return absl::InvalidArgumentError(absl::StrCat("cuda_image: unknown pixel_type ", im.pixel_type()));
    }
    const std::size_t elem = PixelBytesOf(im);
    const uint64_t pixels = static_cast<uint64_t>(im.height()) * static_cast<uint64_t>(im.width());
    SPEXD_RETURN_IF_ERROR(CheckRef("cuda_image.image", im.image(), elem));
    SPEXD_RETURN_IF_ERROR(CheckRef("cuda_image.ivar", im.ivar(), elem));
    SPEXD_ASSIGN_OR_RETURN(out.image, Resolve("cuda_image.image", im.image(), pixels * elem, registry));
    SPEXD_ASSIGN_OR_RETURN(out.ivar, Resolve("cuda_image.ivar", im.ivar(), pixels * elem, registry));
    if (!im.mask().region_id().empty()) {
      SPEXD_RETURN_IF_ERROR(CheckRef("cuda_image.mask", im.mask(), 2));
      SPEXD_ASSIGN_OR_RETURN(out.mask, Resolve("cuda_image.mask", im.mask(), pixels * 2, registry));
    }
  }
  if (header.has_cuda_output()) {
    const v1::CudaRegionRef& ref = header.cuda_output().region();
    SPEXD_RETURN_IF_ERROR(CheckRef("cuda_output", ref, core::kOutputAlignment));
    // The size needed is known once the plan is (CheckCudaOutput).
    SPEXD_ASSIGN_OR_RETURN(out.output, Resolve("cuda_output", ref, 0, registry));
  }
  const int device = out.device();
  for (const auto* r : {&out.image, &out.ivar, &out.mask, &out.output}) {
    if (*r != nullptr && (*r)->device() != device) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the request's CUDA regions are on different GPUs (", device, " and ", (*r)->device(), ")"));
    }
  }
  return out;
}

}  // namespace spexd::server
