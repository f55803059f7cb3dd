// The CUDA regions an extraction request names: resolved when the header arrives
// (server/rpc/request_decode.h), held by the job until it ends (so that the mappings
// outlive the extraction), and turned into the backend's device input.
#ifndef SPEXD_SERVER_CUDA_REQUEST_H_
#define SPEXD_SERVER_CUDA_REQUEST_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "core/backend/device_region.h"
#include "core/frame/output_layout.h"
#include "server/state/region_registry.h"

namespace spexd::server {

struct ImageSource;

struct CudaRequestRegions {
  std::shared_ptr<const RegisteredRegion> image, ivar, mask, output;
  bool any() const { return image != nullptr || output != nullptr; }
  // The GPU all of them are on; -1 when the request names none.
  int device() const;
};

// Bytes read from the regions by one extraction of a device frame (image, ivar, mask).
uint64_t CudaImageBytes(const ImageSource& image, const CudaRequestRegions& regions);

// The backend's view of the request's device frame (addresses in this process).
core::DeviceImageInput MakeDeviceInput(const ImageSource& image, const CudaRequestRegions& regions,
                                       core::MaskPolicy policy);

// The output layout for the plan's shape, checked against the output region from
// `offset`: FAILED_PRECONDITION when it does not fit (the message gives the bytes needed).
absl::StatusOr<core::OutputLayout> CheckCudaOutput(int64_t offset, const RegisteredRegion& region,
                                                   int nspec, int nwave, int ndiag);

}  // namespace spexd::server

#endif  // SPEXD_SERVER_CUDA_REQUEST_H_
