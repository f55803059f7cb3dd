// The CUDA regions an extraction request names: checked and resolved when the
// header arrives, held by the job until it ends (so that the mappings outlive the
// extraction), and turned into the backend's device input.
#ifndef SPEXD_SERVER_CUDA_REQUEST_H_
#define SPEXD_SERVER_CUDA_REQUEST_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "core/backend/device_region.h"
#include "core/frame/output_layout.h"
#include "server/state/region_registry.h"
#include "spexd/v1/spexd.pb.h"

namespace spexd::server {

struct CudaRequestRegions {
  std::shared_ptr<const RegisteredRegion> image, ivar, mask, output;
  bool any() const { return image != nullptr || output != nullptr; }
  // The GPU all of them are on; -1 when the request names none.
  int device() const;
};

// Checks the header's cuda_image and cuda_output (shape, offsets, alignment), looks the
// regions up and checks that the image planes fit their regions and that all regions are
// on one GPU. INVALID_ARGUMENT for malformed fields; FAILED_PRECONDITION for a region
// that is not registered, too small, or on another GPU than the others.
absl::StatusOr<CudaRequestRegions> ResolveCudaRegions(const v1::ExtractHeader& header,
                                                      const RegionRegistry& registry);

// Bytes read from the regions by one extraction of `image` (image, ivar, mask).
uint64_t CudaImageBytes(const v1::CudaImage& image);

// The backend's view of the request's device frame (addresses in this process).
core::DeviceImageInput MakeDeviceInput(const v1::CudaImage& image, const CudaRequestRegions& regions,
                                       core::MaskPolicy policy);

// The output layout for the plan's shape, checked against the output region:
// FAILED_PRECONDITION when it does not fit (the message gives the bytes needed).
absl::StatusOr<core::OutputLayout> CheckCudaOutput(const v1::CudaOutput& output,
                                                   const RegisteredRegion& region, int nspec,
                                                   int nwave, int ndiag);

}  // namespace spexd::server

#endif  // SPEXD_SERVER_CUDA_REQUEST_H_
