// CUDA / cuBLAS return codes -> absl::Status with file:line (docs/design.md
// "Conventions"). Out of memory becomes RESOURCE_EXHAUSTED, everything else INTERNAL.
#ifndef SPEXD_CUDA_CUDA_CHECK_H_
#define SPEXD_CUDA_CUDA_CHECK_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace spexd::cuda {

absl::Status ToStatus(cudaError_t err, const char* expr, const char* file, int line);
absl::Status ToStatus(cublasStatus_t err, const char* expr, const char* file, int line);

// True for errors that leave the CUDA context unusable (illegal address, launch failure,
// device assert, ...): the backend then reports itself unhealthy.
bool IsStickyError(cudaError_t err);

}  // namespace spexd::cuda

// Returns from the current function with an absl::Status when `expr` (a CUDA runtime or
// cuBLAS call) fails.
#define SPEXD_CUDA_RETURN_IF_ERROR(expr)                                                 \
  do {                                                                                   \
    auto spexd_cuda_rc_ = (expr);                                                        \
    if (spexd_cuda_rc_ != decltype(spexd_cuda_rc_){}) {                                  \
      return ::spexd::cuda::ToStatus(spexd_cuda_rc_, #expr, __FILE__, __LINE__);         \
    }                                                                                    \
  } while (0)

#endif  // SPEXD_CUDA_CUDA_CHECK_H_
