// SPEXD_HD marks functions compiled for both the host and the device, so that the math of
// a kernel can be unit-tested on a machine without a GPU.
#ifndef SPEXD_CUDA_HOST_DEVICE_H_
#define SPEXD_CUDA_HOST_DEVICE_H_

#if defined(__CUDACC__)
#define SPEXD_HD __host__ __device__ inline
#else
#define SPEXD_HD inline
#endif

#endif  // SPEXD_CUDA_HOST_DEVICE_H_
