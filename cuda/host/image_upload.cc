#include "cuda/host/image_upload.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"
#include "cuda/host/cuda_check.h"
#include "cuda/kernels/image_import.h"
#include "cuda/kernels/normal_equations.h"

namespace spexd::cuda {
namespace {

// Pixels per chunk of the staging fill: 1 MiB of float32 per plane.
constexpr std::size_t kChunkPixels = std::size_t{1} << 18;

// Converts [lo, hi) of src into float32; false if any value is not exactly representable.
bool NarrowExact(const double* src, float* dst, std::size_t lo, std::size_t hi) {
  bool exact = true;
  for (std::size_t i = lo; i < hi; ++i) {
    const float f = static_cast<float>(src[i]);
    dst[i] = f;
    exact &= static_cast<double>(f) == src[i];
  }
  return exact;
}

// Fills the staging with [image | ivar] as float32; false when a float64 plane holds a
// value float32 cannot (the caller stages float64 instead).
bool StageFloat32(const core::PreprocImage& image, float* h, std::size_t n, core::TaskPool* pool) {
  const int chunks = static_cast<int>((n + kChunkPixels - 1) / kChunkPixels);
  std::atomic<bool> exact{true};
  core::ParallelFor(pool, core::HardwareThreads(), chunks, [&](int /*worker*/, int c) {
    const std::size_t lo = static_cast<std::size_t>(c) * kChunkPixels;
    const std::size_t hi = std::min(n, lo + kChunkPixels);
    if (image.has_float32_planes()) {
      std::memcpy(h + lo, image.image32.data() + lo, (hi - lo) * sizeof(float));
      std::memcpy(h + n + lo, image.ivar32.data() + lo, (hi - lo) * sizeof(float));
      return;
    }
    if (!exact.load(std::memory_order_relaxed)) return;  // float64 staging follows anyway
    bool ok = NarrowExact(image.image.data(), h, lo, hi);
    ok &= NarrowExact(image.ivar.data(), h + n, lo, hi);
    if (!ok) exact = false;
  });
  return exact.load();
}

// Whether [p, p + bytes) lies in page-locked memory registered with CUDA.
bool IsPinned(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

class CudaPlanePinner : public core::PlaneMemoryPinner {
 public:
  explicit CudaPlanePinner(int device) : device_(device) {}
  bool Pin(void* data, std::size_t bytes) override {
    // On the backend's device: a decode thread has no current device, and the runtime
    // would otherwise create a context on device 0.
    if (cudaSetDevice(device_) != cudaSuccess ||
        cudaHostRegister(data, bytes, cudaHostRegisterPortable) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return true;
  }
  void Unpin(void* data) override {
    if (cudaSetDevice(device_) != cudaSuccess || cudaHostUnregister(data) != cudaSuccess) {
      (void)cudaGetLastError();
    }
  }

 private:
  const int device_;
};

// Columns [x0, x1) of both pinned planes into the device staging, widened into the
// workspace's float64 planes, on `stream`.
absl::Status CopyColumns(Workspace& ws, const core::PreprocImage& image, int x0, int x1,
                         cudaStream_t stream) {
  if (x0 >= x1) return absl::OkStatus();
  const std::size_t w = static_cast<std::size_t>(image.width), h = static_cast<std::size_t>(image.height);
  const std::size_t n = w * h, pitch = w * sizeof(float);
  const float* planes[2] = {image.image32.data(), image.ivar32.data()};
  double* targets[2] = {ws.image(), ws.ivar()};
  for (int a = 0; a < 2; ++a) {
    float* stage = ws.stage_device() + static_cast<std::size_t>(a) * n;
    SPEXD_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(stage + x0, pitch, planes[a] + x0, pitch,
                                                 static_cast<std::size_t>(x1 - x0) * sizeof(float), h,
                                                 cudaMemcpyHostToDevice, stream));
    SPEXD_CUDA_RETURN_IF_ERROR(LaunchWidenColumns(stage, targets[a], image.width, image.height, x0, x1, stream));
  }
  return absl::OkStatus();
}

// Columns [x0, x1) of the raw planes and their mask into the device staging, then byte
// order, widening and the pixel rules into the workspace's float64 planes, on `stream`.
// The host memory may be pageable (a pool without a pinner): the copies are then
// synchronous, and as correct.
absl::Status CopyRawColumns(Workspace& ws, const core::PreprocImage& image, int x0, int x1,
                            cudaStream_t stream) {
  if (x0 >= x1) return absl::OkStatus();
  const std::size_t w = static_cast<std::size_t>(image.width), h = static_cast<std::size_t>(image.height);
  const std::size_t n = w * h, cols = static_cast<std::size_t>(x1 - x0);
  uint32_t* stage = reinterpret_cast<uint32_t*>(ws.stage_device());
  const uint32_t* planes[2] = {image.image_raw.data(), image.ivar_raw.data()};
  for (int a = 0; a < 2; ++a) {
    uint32_t* to = stage + static_cast<std::size_t>(a) * n;
    SPEXD_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(to + x0, w * 4, planes[a] + x0, w * 4, cols * 4, h,
                                                 cudaMemcpyHostToDevice, stream));
  }
  const bool has_mask = !image.mask_raw.empty();
  if (has_mask) {
    SPEXD_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(ws.mask_stage() + x0, w * 2,
                                                 image.mask_raw.data() + x0, w * 2, cols * 2, h,
                                                 cudaMemcpyHostToDevice, stream));
  }
  RawPlaneColumns in;
  in.image = stage;
  in.ivar = stage + n;
  in.mask = has_mask ? ws.mask_stage() : nullptr;
  in.bad_bits = image.raw_bad_bits;
  in.width = image.width;
  in.height = image.height;
  in.x0 = x0;
  in.x1 = x1;
  in.counts = ws.rule_counts();
  SPEXD_CUDA_RETURN_IF_ERROR(LaunchImportRawColumns(in, ws.image(), ws.ivar(), stream));
  return absl::OkStatus();
}

// Planes copied straight from their own memory on the copy stream, `copy_columns` a range
// of columns at a time: the first batch's columns, then the rest. Raw planes' rule counts
// are zeroed first and downloaded last.
template <typename CopyFn>
absl::Status CopyPlanes(const GpuContext& ctx, Workspace& ws, const core::PreprocImage& image,
                        ColumnRange first, CopyFn copy_columns) {
  cudaStream_t stream = ctx.copy();
  const int w = image.width;
  const bool raw = image.has_raw_planes();
  first.x0 = std::clamp(first.x0, 0, w);
  first.x1 = std::clamp(first.x1, first.x0, w);
  if (first.x0 == first.x1) first = ColumnRange{0, w};  // nothing to put first
  SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(ws.upload_start().get(), stream));
  if (raw) {
    SPEXD_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(ws.rule_counts(), 0, 2 * sizeof(unsigned long long), stream));
  }
  SPEXD_RETURN_IF_ERROR(copy_columns(ws, image, first.x0, first.x1, stream));
  SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(ws.first_columns().get(), stream));
  SPEXD_RETURN_IF_ERROR(copy_columns(ws, image, 0, first.x0, stream));
  SPEXD_RETURN_IF_ERROR(copy_columns(ws, image, first.x1, w, stream));
  if (raw) {
    SPEXD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ws.rule_counts_host(), ws.rule_counts(),
                                               2 * sizeof(unsigned long long),
                                               cudaMemcpyDeviceToHost, stream));
  }
  SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(ws.upload_end().get(), stream));
  return absl::OkStatus();
}

}  // namespace

std::shared_ptr<core::PlaneMemoryPinner> MakePlanePinner(int device) {
  return std::make_shared<CudaPlanePinner>(device);
}

absl::Status UploadImage(const GpuContext& ctx, Workspace& ws, const core::PreprocImage& image,
                         ColumnRange first, core::TaskPool* pool, UploadStats* stats) {
  const std::size_t n = core::PlanePixels(image);
  cudaStream_t stream = ctx.compute();
  if (image.has_raw_planes()) {
    // The file's bytes, as they are: no host pass over them at all. They stay alive and
    // unchanged until Extract returns, after every batch has read them.
    stats->float32 = true;
    stats->raw = true;
    stats->direct = IsPinned(image.image_raw.data()) && IsPinned(image.ivar_raw.data());
    return CopyPlanes(ctx, ws, image, first, CopyRawColumns);
  }
  if (image.has_float32_planes() && IsPinned(image.image32.data()) && IsPinned(image.ivar32.data())) {
    // Straight from the decoded planes, which stay alive and unchanged until Extract
    // returns, after every batch has read them.
    stats->float32 = true;
    stats->direct = true;
    return CopyPlanes(ctx, ws, image, first, CopyColumns);
  }
  const auto t0 = std::chrono::steady_clock::now();
  float* h = ws.stage_host();
  stats->float32 = StageFloat32(image, h, n, pool);
  stats->host_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(ws.upload_start().get(), stream));
  if (stats->float32) {
    SPEXD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ws.stage_device(), h, 2 * n * sizeof(float),
                                               cudaMemcpyHostToDevice, stream));
    SPEXD_CUDA_RETURN_IF_ERROR(LaunchWiden(ws.stage_device(), ws.image(), n, stream));
    SPEXD_CUDA_RETURN_IF_ERROR(LaunchWiden(ws.stage_device() + n, ws.ivar(), n, stream));
  } else {
    // The staging holds 2n floats = n doubles: one array at a time.
    double* hd = ws.stage_host_double();
    const std::vector<double>* arrays[2] = {&image.image, &image.ivar};
    double* targets[2] = {ws.image(), ws.ivar()};
    for (int a = 0; a < 2; ++a) {
      SPEXD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));  // staging free again
      std::memcpy(hd, arrays[a]->data(), n * sizeof(double));
      SPEXD_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(targets[a], hd, n * sizeof(double), cudaMemcpyHostToDevice, stream));
    }
  }
  SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(ws.first_columns().get(), stream));
  SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(ws.upload_end().get(), stream));
  return absl::OkStatus();
}

absl::Status RuleCounts(Workspace& ws, int64_t* masked, int64_t* nonfinite) {
  SPEXD_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(ws.upload_end().get()));
  *masked = static_cast<int64_t>(ws.rule_counts_host()[0]);
  *nonfinite = static_cast<int64_t>(ws.rule_counts_host()[1]);
  return absl::OkStatus();
}

absl::Status ImportImage(const GpuContext& ctx, Workspace& ws, const core::DeviceImageInput& input,
                         std::size_t pixels) {
  if (input.device != ctx.device()) {
    return absl::FailedPreconditionError(absl::StrCat("the frame is on device ", input.device,
                                                      ", this worker runs on device ", ctx.device()));
  }
  cudaStream_t stream = ctx.compute();
  ImportPlanes planes;
  planes.image = input.image;
  planes.ivar = input.ivar;
  planes.mask = static_cast<const uint16_t*>(input.mask);
  planes.float64 = input.type == core::DevicePixelType::kFloat64;
  planes.bad_bits = core::MaskBadBits(input.mask_policy);
  SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(ws.upload_start().get(), stream));
  SPEXD_CUDA_RETURN_IF_ERROR(LaunchImportPixels(planes, ws.image(), ws.ivar(), pixels, stream));
  SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(ws.first_columns().get(), stream));
  SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(ws.upload_end().get(), stream));
  return absl::OkStatus();
}

}  // namespace spexd::cuda
