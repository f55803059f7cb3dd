#include "server/jobs/cuda_request.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "server/jobs/request_values.h"

namespace spexd::server {

int CudaRequestRegions::device() const {
  if (image != nullptr) return image->device();
  if (output != nullptr) return output->device();
  return -1;
}

uint64_t CudaImageBytes(const ImageSource& image, const CudaRequestRegions& regions) {
  const uint64_t pixels = static_cast<uint64_t>(image.height) * static_cast<uint64_t>(image.width);
  return pixels * (2 * (image.float64 ? 8 : 4) + (regions.mask == nullptr ? 0 : 2));
}

core::DeviceImageInput MakeDeviceInput(const ImageSource& image, const CudaRequestRegions& regions,
                                       core::MaskPolicy policy) {
  auto at = [](const std::shared_ptr<const RegisteredRegion>& r, int64_t offset) -> const void* {
    if (r == nullptr) return nullptr;
    return static_cast<const unsigned char*>(r->memory->data()) + offset;
  };
  core::DeviceImageInput in;
  in.device = regions.image->device();
  in.image = at(regions.image, image.image_offset);
  in.ivar = at(regions.ivar, image.ivar_offset);
  in.mask = at(regions.mask, image.mask_offset);
  in.type = image.float64 ? core::DevicePixelType::kFloat64 : core::DevicePixelType::kFloat32;
  in.mask_policy = policy;
  return in;
}

absl::StatusOr<core::OutputLayout> CheckCudaOutput(int64_t offset_in, const RegisteredRegion& region,
                                                   int nspec, int nwave, int ndiag) {
  const core::OutputLayout layout = core::MakeOutputLayout(nspec, nwave, ndiag);
  const uint64_t offset = static_cast<uint64_t>(offset_in);
  if (offset > region.size() || layout.total_bytes > region.size() - offset) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cuda_output: region '", region.name, "' too small: the results (", nspec, " fibres x ",
        nwave, " wavelengths, ", 2 * ndiag + 1, " diagonals) need ", layout.total_bytes,
        " bytes at offset ", offset, ", the region has ", region.size()));
  }
  return layout;
}

}  // namespace spexd::server
