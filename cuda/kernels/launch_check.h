// Launch checking for kernel launchers (usable from .cu files: no Abseil here).
// Release builds peek at the launch error; SPEXD_CUDA_DEBUG builds synchronise the stream
// after every launch so that an asynchronous fault is reported at its kernel.
#ifndef SPEXD_CUDA_LAUNCH_CHECK_H_
#define SPEXD_CUDA_LAUNCH_CHECK_H_

#include <cuda_runtime_api.h>

namespace spexd::cuda::internal {

inline cudaError_t CheckLaunch(cudaStream_t stream) {
  cudaError_t err = cudaPeekAtLastError();
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // clear a non-sticky error so it is not reported twice
    return err;
  }
#ifdef SPEXD_CUDA_DEBUG
  err = cudaStreamSynchronize(stream);
#else
  (void)stream;
#endif
  return err;
}

}  // namespace spexd::cuda::internal

// Returns the launch status of the kernel just launched on `stream`.
#define SPEXD_CHECK_LAUNCH(stream) ::spexd::cuda::internal::CheckLaunch(stream)

#endif  // SPEXD_CUDA_LAUNCH_CHECK_H_
