#include "cuda/image_upload.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cuda/cuda_check.h"
#include "cuda/image_import.h"
#include "cuda/normal_equations.h"

namespace spexd::cuda {
namespace {

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

}  // namespace

absl::Status UploadImage(const GpuContext& ctx, Workspace& ws, const core::PreprocImage& image,
                         UploadStats* stats) {
  const std::size_t n = image.image.size();
  cudaStream_t stream = ctx.compute();
  const auto t0 = std::chrono::steady_clock::now();
  float* h = ws.stage_host();
  std::atomic<bool> exact{true};
  const unsigned nthreads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  auto work = [&](unsigned t) {
    const std::size_t lo = n * t / nthreads, hi = n * (t + 1) / nthreads;
    bool ok = NarrowExact(image.image.data(), h, lo, hi);
    ok &= NarrowExact(image.ivar.data(), h + n, lo, hi);
    if (!ok) exact = false;
  };
  for (unsigned t = 1; t < nthreads; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
  stats->float32 = exact.load();
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
  SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(ws.upload_end().get(), stream));
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
  SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(ws.upload_end().get(), stream));
  return absl::OkStatus();
}

}  // namespace spexd::cuda
