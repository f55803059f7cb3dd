// Uploads a request's image and ivar into the workspace (float64 on the device, spec
// §2.1). Raw planes (PreprocImage::image_raw: the file's big-endian float32 bytes and the
// MASK bits) are copied from their own memory and decoded and ruled on the device in one
// pass (cuda/kernels/image_import.h). Float32 planes (PreprocImage::image32, what preproc files hold) are copied to the
// device straight from their own memory when it is pinned (a server's PlaneBufferPool with
// PlanePinner), else through the workspace's pinned staging, and widened on the device;
// float64 planes are narrowed to float32 on the way when that is exact, else staged as
// float64.
#ifndef SPEXD_CUDA_IMAGE_UPLOAD_H_
#define SPEXD_CUDA_IMAGE_UPLOAD_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "core/backend/device_region.h"
#include "core/io/preproc.h"
#include "core/base/task_pool.h"
#include "cuda/host/gpu_context.h"
#include "cuda/host/workspace.h"

namespace spexd::cuda {

// CCD columns [x0, x1) (empty when x0 >= x1).
struct ColumnRange {
  int x0 = 0, x1 = 0;
};

struct UploadStats {
  bool float32 = false;       // uploaded as float32 (exact)
  bool direct = false;        // from the planes' own pinned memory, no staging
  bool raw = false;           // raw planes, ruled on the device (counts: RuleCounts)
  double host_seconds = 0;    // copy or conversion into the pinned staging
};

// Pins host memory with cudaHostRegister (portable: every device's context sees it) for
// the backend on `device` (core::GpuCapabilities::PlanePinner).
std::shared_ptr<core::PlaneMemoryPinner> MakePlanePinner(int device);

// Unless the float32 planes are pinned already: fills the pinned staging in chunks on the calling thread and `pool`'s threads (the
// backend's host pool; may be null), then enqueues the copies on ctx.compute(); the pinned staging belongs to the
// workspace and is reused by every request. The float64 fallback synchronises the stream
// between its two copies (staging reuse).
// Records ws.first_columns() once columns `first` (the first batch's) are on the device
// and ws.upload_end() once all are. Pinned planes are copied on ctx.copy(), `first` ahead
// of the rest, so that the first batch starts before the whole frame has arrived.
absl::Status UploadImage(const GpuContext& ctx, Workspace& ws, const core::PreprocImage& image,
                         ColumnRange first, core::TaskPool* pool, UploadStats* stats);

// The pixel rules' counts of the last raw-plane upload (PreprocImage::n_masked,
// n_nonfinite), once ws.upload_end() has completed (waits for it).
absl::Status RuleCounts(Workspace& ws, int64_t* masked, int64_t* nonfinite);

// Reads a frame of `pixels` pixels straight from device memory (a client's CUDA region)
// into the workspace's image and ivar, applying the pixel rules on the way: one
// device-to-device pass, no host staging. Enqueued on ctx.compute(); does not
// synchronise. FAILED_PRECONDITION when the frame is on another device.
absl::Status ImportImage(const GpuContext& ctx, Workspace& ws, const core::DeviceImageInput& input,
                         std::size_t pixels);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_IMAGE_UPLOAD_H_
