#include "core/backend/backend.h"

#include "absl/strings/str_cat.h"
#include "core/cpu/cpu_backend.h"
#include "core/backend/cuda_module_loader.h"
#include "core/backend/test_faults.h"

namespace spexd::core {

absl::Status ValidateJob(const ExtractionJob& job, bool float32_planes_ok, bool raw_planes_ok) {
  if (job.geometry == nullptr) return absl::InvalidArgumentError("job has no geometry");
  if (job.image == nullptr) return absl::InvalidArgumentError("job has no image");
  const PatchPlan& plan = job.geometry->plan();
  if (job.image->height != plan.image_height || job.image->width != plan.image_width) {
    return absl::InvalidArgumentError(absl::StrCat(
        "image is ", job.image->height, " x ", job.image->width, " but the geometry was planned for ",
        plan.image_height, " x ", plan.image_width));
  }
  const std::size_t npix = static_cast<std::size_t>(plan.image_height) * plan.image_width;
  if (job.device_image == nullptr) {
    const PreprocImage& im = *job.image;
    if (im.has_float32_planes() && !float32_planes_ok) {
      return absl::FailedPreconditionError(
          "the image has float32 planes and this backend takes float64 ones (core::WidenPlanes)");
    }
    if (im.has_raw_planes() && !raw_planes_ok) {
      return absl::FailedPreconditionError(
          "the image has raw planes and this backend takes decoded ones (core::DecodeRawPlanes)");
    }
    const bool sizes_ok =
        im.has_raw_planes()
            ? im.image_raw.size() == npix && im.ivar_raw.size() == npix &&
                  (im.mask_raw.empty() || im.mask_raw.size() == npix)
        : im.has_float32_planes() ? im.image32.size() == npix && im.ivar32.size() == npix
                                  : im.image.size() == npix && im.ivar.size() == npix;
    if (!sizes_ok) return absl::InvalidArgumentError("image or ivar array does not match the image shape");
  }
  int prev = -1;
  for (int b : job.bundles) {
    if (b < 0 || b >= plan.nbundles) {
      return absl::InvalidArgumentError(
          absl::StrCat("bundle ", b, " is outside [0, ", plan.nbundles, ")"));
    }
    if (b <= prev) return absl::InvalidArgumentError("bundles must be ascending and unique");
    prev = b;
  }
  if (!(job.psferr >= 0) || !(job.regularize >= 0)) {
    return absl::InvalidArgumentError("psferr and regularize must be >= 0");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ImportedRegion>> GpuCapabilities::ImportRegion(
    const std::string& ipc_handle, int device, uint64_t size) {
  (void)ipc_handle;
  (void)size;
  return absl::FailedPreconditionError(
      absl::StrCat("this backend cannot use CUDA regions (device ", device, ")"));
}

bool TakesFloat32Planes(Backend& backend) { return backend.TakesFloat32Planes(); }

bool TakesRawPlanes(Backend& backend) { return backend.TakesRawPlanes(); }

absl::StatusOr<std::unique_ptr<ImportedRegion>> ImportRegion(Backend& backend,
                                                             const std::string& ipc_handle,
                                                             int device, uint64_t size) {
  if (GpuCapabilities* gpu = backend.gpu(); gpu != nullptr) {
    return gpu->ImportRegion(ipc_handle, device, size);
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "the ", backend.name(), " backend cannot use CUDA regions (device ", device,
      "): a region needs a server whose worker runs the CUDA backend on that GPU"));
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options) {
  switch (options.kind) {
    case BackendKind::kCpu: return WithCpuTestFaults(CreateCpuBackend(options.threads, options.pool), options.cpu_test_faults);
    case BackendKind::kCuda: return LoadCudaBackend(options);
  }
  return absl::InvalidArgumentError("unknown backend kind");
}

}  // namespace spexd::core
