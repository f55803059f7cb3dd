// The kernels behind the fault hooks of cuda/host/fault_injection.h (fault_kernels.cu):
// launched by the host's hooks, declared here so that the device code needs no host header.
#ifndef SPEXD_CUDA_FAULT_KERNELS_H_
#define SPEXD_CUDA_FAULT_KERNELS_H_

#include <cuda_runtime_api.h>

#include "cuda/kernels/kernel_args.h"

namespace spexd::cuda {

// Sets the diagonal of run entry `entry`'s normal matrix to NaN (fault_kernels.cu).
cudaError_t LaunchPoisonNormalMatrix(const RunArgs& args, int entry, cudaStream_t stream);

// Launches a one-thread kernel that executes a trap instruction (fault_kernels.cu).
void LaunchTrapKernel(cudaStream_t stream);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_FAULT_KERNELS_H_
