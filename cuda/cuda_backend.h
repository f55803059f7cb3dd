// The CUDA extraction backend: a core::Backend that extracts whole frames in
// large batches on one GPU. Plain C++: no CUDA type appears here. The module built from
// cuda/ exports it to executables through the C ABI of core/cuda_module_loader.h.
#ifndef SPEXD_CUDA_CUDA_BACKEND_H_
#define SPEXD_CUDA_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "core/backend/backend.h"

namespace spexd::cuda {

// Creates a backend on options.device. The device, its stream and its cuBLAS/cuSOLVER
// handles are owned by the backend; warm per-Geometry state (spots) and the workspace
// are created on first use and kept. UNAVAILABLE without a usable device.
//
// Solver choices come from options.cuda_solver / cuda_eigen / cuda_stats (for
// cross-checks and benchmarks; tests and benchmarks parse SPEXD_CUDA_SOLVER,
// SPEXD_CUDA_EIGEN and SPEXD_CUDA_STATS into them, see tests/test_support.h).
absl::StatusOr<std::unique_ptr<core::Backend>> CreateCudaBackend(
    const core::BackendOptions& options);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_CUDA_BACKEND_H_
