// The CUDA extraction backend (issue 4): a core::Backend that extracts whole frames in
// large batches on one GPU. Plain C++: no CUDA type appears here. The module built from
// cuda/ exports it to executables through the C ABI of core/cuda_module_loader.h.
#ifndef SPEXD_CUDA_CUDA_BACKEND_H_
#define SPEXD_CUDA_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "core/backend.h"

namespace spexd::cuda {

// Creates a backend on options.device. The device, its stream and its cuBLAS/cuSOLVER
// handles are owned by the backend; warm per-Geometry state (spots) and the workspace
// are created on first use and kept. UNAVAILABLE without a usable device.
//
// Switches (environment, read here once; for cross-checks and benchmarks):
//   SPEXD_CUDA_SOLVER=library  cusolverDnDpotrsBatched, cublasDtrsmBatched and
//                              cusolverDnXsyevBatched instead of the custom kernels;
//   SPEXD_CUDA_EIGEN=jacobi|library  the 74x74 eigensolver only;
//   SPEXD_CUDA_STATS=1         Jacobi sweep counts on stderr (synchronises per batch).
absl::StatusOr<std::unique_ptr<core::Backend>> CreateCudaBackend(
    const core::BackendOptions& options);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_CUDA_BACKEND_H_
