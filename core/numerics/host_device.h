// SPEXD_HD marks the numerical rules that both the host compiler and nvcc build: the one
// definition of each formula that the CPU backend, the CUDA kernels and the host tests of
// those kernels share. Core stays free of CUDA headers: for the host compiler the macro
// is just `inline`.
#ifndef SPEXD_CORE_HOST_DEVICE_H_
#define SPEXD_CORE_HOST_DEVICE_H_

#if defined(__CUDACC__)
#define SPEXD_HD __host__ __device__ inline
#else
#define SPEXD_HD inline
#endif

#endif  // SPEXD_CORE_HOST_DEVICE_H_
