// The CUDA extraction backend: a core::Backend that extracts whole frames in
// large batches on one GPU. Plain C++: no CUDA type appears here. The module built from
// cuda/ exports it to executables through the C ABI of core/cuda_module_loader.h.
#ifndef SPEXD_CUDA_CUDA_BACKEND_H_
#define SPEXD_CUDA_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "core/backend/backend.h"

namespace spexd::cuda {

// Creates a backend on options.device. The device, its streams and its cuBLAS
// handle are owned by the backend; warm per-Geometry state (spots) and the workspace
// are created on first use and kept. UNAVAILABLE without a usable device (a GPU older than
// sm_80 among them: the caller falls back to the CPU). Each algorithm has one path, chosen
// from the plan and the device's limits (cuda/kernels/device_limits.h).
absl::StatusOr<std::unique_ptr<core::Backend>> CreateCudaBackend(
    const core::BackendOptions& options);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_CUDA_BACKEND_H_
