// The per-device limits the CUDA backend plans with, read from the device once: the dynamic
// shared memory a thread block may opt into (cudaDevAttrMaxSharedMemoryPerBlockOptin:
// 227 KB on an H100 or H200, 163 KB on an A100), under a test's cap. The planner refuses a
// request whose kernels' blocks do not fit (batch_config.cc's CheckSharedMemory), and every
// launcher opts its kernel into more than 48 KB through AllowSharedMemory
// (kernel_common.cuh), which refuses a block over the limit with cudaErrorInvalidValue
// instead of a launch failure. The cap (SPEXD_TEST_CUDA_FAULTS=shared_memory_cap=BYTES,
// cuda/host/fault_injection.h) lets an H100 plan and launch as a GPU with less shared
// memory would: 166912 is the A100's limit. Host code only.
#ifndef SPEXD_CUDA_DEVICE_LIMITS_H_
#define SPEXD_CUDA_DEVICE_LIMITS_H_

#include <cstddef>

namespace spexd::cuda {

// Process-wide (set when each backend is created, as the other test settings); 0: none.
void SetSharedMemoryCap(std::size_t bytes);

// The dynamic shared memory a block may use on `device` (the current device with -1);
// 0 if the device cannot be queried.
std::size_t SharedMemoryPerBlock(int device = -1);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_DEVICE_LIMITS_H_
