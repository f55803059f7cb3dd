// Uploads a request's image and ivar (float64 on the host, spec §2.1) into the
// workspace. Values are staged as float32 through pinned memory and widened on the device
// when that is exact (preproc images are float32 on disk), else staged as float64.
#ifndef SPEXD_CUDA_IMAGE_UPLOAD_H_
#define SPEXD_CUDA_IMAGE_UPLOAD_H_

#include "absl/status/status.h"
#include "core/device_region.h"
#include "core/preproc.h"
#include "cuda/gpu_context.h"
#include "cuda/workspace.h"

namespace spexd::cuda {

struct UploadStats {
  bool float32 = false;       // staged as float32 (exact)
  double host_seconds = 0;    // conversion into the pinned staging
};

// Enqueues the copies on ctx.compute(); the pinned staging belongs to the workspace. The
// float64 fallback synchronises the stream between its two copies (staging reuse).
absl::Status UploadImage(const GpuContext& ctx, Workspace& ws, const core::PreprocImage& image,
                         UploadStats* stats);

// Reads a frame of `pixels` pixels straight from device memory (a client's CUDA region,
// issue 13) into the workspace's image and ivar, applying the pixel rules on the way: one
// device-to-device pass, no host staging. Enqueued on ctx.compute(); does not
// synchronise. FAILED_PRECONDITION when the frame is on another device.
absl::Status ImportImage(const GpuContext& ctx, Workspace& ws, const core::DeviceImageInput& input,
                         std::size_t pixels);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_IMAGE_UPLOAD_H_
