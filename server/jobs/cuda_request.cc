#include "server/jobs/cuda_request.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace spexd::server {
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

int CudaRequestRegions::device() const {
  if (image != nullptr) return image->device();
  if (output != nullptr) return output->device();
  return -1;
}

uint64_t CudaImageBytes(const v1::CudaImage& image) {
  const uint64_t pixels = static_cast<uint64_t>(image.height()) * static_cast<uint64_t>(image.width());
  return pixels * (2 * PixelBytesOf(image) + (image.mask().region_id().empty() ? 0 : 2));
}

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

core::DeviceImageInput MakeDeviceInput(const v1::CudaImage& image, const CudaRequestRegions& regions,
                                       core::MaskPolicy policy) {
  auto at = [](const std::shared_ptr<const RegisteredRegion>& r, int64_t offset) -> const void* {
    if (r == nullptr) return nullptr;
    return static_cast<const unsigned char*>(r->memory->data()) + offset;
  };
  core::DeviceImageInput in;
  in.device = regions.image->device();
  in.image = at(regions.image, image.image().offset());
  in.ivar = at(regions.ivar, image.ivar().offset());
  in.mask = at(regions.mask, image.mask().offset());
  in.type = image.pixel_type() == v1::FLOAT64 ? core::DevicePixelType::kFloat64
                                              : core::DevicePixelType::kFloat32;
  in.mask_policy = policy;
  return in;
}

absl::StatusOr<core::OutputLayout> CheckCudaOutput(const v1::CudaOutput& output,
                                                   const RegisteredRegion& region, int nspec,
                                                   int nwave, int ndiag) {
  const core::OutputLayout layout = core::MakeOutputLayout(nspec, nwave, ndiag);
  const uint64_t offset = static_cast<uint64_t>(output.region().offset());
  if (offset > region.size() || layout.total_bytes > region.size() - offset) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cuda_output: region '", region.name, "' too small: the results (", nspec, " fibres x ",
        nwave, " wavelengths, ", 2 * ndiag + 1, " diagonals) need ", layout.total_bytes,
        " bytes at offset ", offset, ", the region has ", region.size()));
  }
  return layout;
}

}  // namespace spexd::server
