// Pieces shared by the decorrelation's eigen kernels (tridiag_decorrelation.cu,
// twisted_decorrelation.cu; device-only header): the thread block as a team of
// tridiag_eigen.h, a block's indices and storage, and the QL kernel (a thread per block).
#ifndef SPEXD_CUDA_TRIDIAG_KERNEL_COMMON_CUH_
#define SPEXD_CUDA_TRIDIAG_KERNEL_COMMON_CUH_

#include <cuda_pipeline.h>

#include <cstddef>
#include <cstdint>

#include "cuda/kernels/kernel_args.h"
#include "cuda/kernels/kernel_common.cuh"
#include "core/numerics/tridiag_eigen.h"

namespace spexd::cuda {

// The shared eigen arithmetic (core/numerics/tridiag_eigen.h, tridiag_vectors.h).
using namespace ::spexd::core::tridiag;
namespace {

// QL: one thread per block, d and e in shared memory (in global memory every step waited
// on the L1/L2 round trip of the previous store); 32 chains per warp (one chain per warp or per 8
// lanes was slower).
constexpr int kQlThreads = 32;

// The thread block as a team of tridiag_eigen.h.
struct BlockTeam {
  double* red;  // [2][32] partial sums, alternating between consecutive Sum calls
  int phase = 0;
  SPEXD_HD int rank() const { return static_cast<int>(threadIdx.x); }
  SPEXD_HD int size() const { return static_cast<int>(blockDim.x); }
  SPEXD_HD int lane() const { return static_cast<int>(threadIdx.x) & 31; }
  SPEXD_HD int lanes() const { return 32; }
  SPEXD_HD int group() const { return static_cast<int>(threadIdx.x) >> 5; }
  SPEXD_HD int groups() const { return static_cast<int>(blockDim.x) >> 5; }
  SPEXD_HD void Sync() {
#if defined(__CUDA_ARCH__)
    __syncthreads();
#endif
  }
  // Fixed order (shuffle-down tree, then warps in order): the same value on every thread
  // and on every run. The alternating buffer is safe because two Sum calls are always
  // separated by this barrier of the later one.
  SPEXD_HD double Sum(double x) {
#if defined(__CUDA_ARCH__)
    for (int off = 16; off > 0; off >>= 1) x += __shfl_down_sync(0xffffffffu, x, off);
    double* r = red + 32 * phase;
    phase ^= 1;
    if (lane() == 0) r[group()] = x;
    __syncthreads();
    double s = 0.0;
    for (int w = 0; w < groups(); ++w) s += r[w];
    return s;
#else
    return x;
#endif
  }
  SPEXD_HD double GroupSum(double x) {
#if defined(__CUDA_ARCH__)
    for (int off = 16; off > 0; off >>= 1) x += __shfl_down_sync(0xffffffffu, x, off);
#endif
    return x;
  }
};

// A QL thread's d and e in shared memory: n | 1 doubles each, and one more so that the
// threads' strides are odd in doubles and a warp's 32 accesses to d[i] (or e[i]) hit every
// bank pair twice, not four lanes on each of 8 pairs (two wavefronts instead of four).
__host__ __device__ inline int QlThreadStride(int n) { return 2 * (n | 1) + 1; }
__host__ __device__ inline std::size_t QlSmemBytes(int n) {
  return sizeof(double) * static_cast<std::size_t>(QlThreadStride(n)) * kQlThreads;
}

__device__ inline int64_t BlockIndex(const PlanDims& D) {
  return static_cast<int64_t>(blockIdx.x) * D.nper + blockIdx.y;
}

__device__ inline double* SlotBlock(const RunArgs& a, const RunEntry& e) {
  const int n = a.dims.nwavetot;
  return a.slots.c + (static_cast<int64_t>(e.slot) * a.dims.nper + blockIdx.y) * n * n;
}

// kLog: the rotations logged for RotateKernel (T as reduced: the rotations act on H's
// columns in T's order); without, the eigenvalues alone, of T oriented for QL, the warp's
// chains in step (QlValuesInStep; the twisted path, whose fallback runs QL again in the block).
template <bool kLog>
__global__ void __launch_bounds__(kQlThreads) QlKernel(RunArgs a, int64_t blocks) {
  extern __shared__ double smem[];
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  // The lanes with a block, for QlValuesInStep's warp vote.
  [[maybe_unused]] const unsigned live = __ballot_sync(0xffffffffu, b < blocks);
  if (b >= blocks) return;
  const int n = a.dims.nwavetot, ld = n | 1, rcap = QlRotationCap(n), scap = QlSweepCap(n);
  double* d = smem + QlThreadStride(n) * threadIdx.x;
  double* e = d + ld;
  for (int i = 0; i < n; ++i) {  // asynchronous: all 2n loads in flight at once
    __pipeline_memcpy_async(d + i, a.ql.d + b * n + i, sizeof(double));
    __pipeline_memcpy_async(e + i, a.ql.e + b * n + i, sizeof(double));
  }
  __pipeline_commit();
  __pipeline_wait_prior(0);  // each thread reads only what it copied
  if constexpr (kLog) {
    a.slots.eig_info[b] = QlLogged(d, e, n, a.ql.c + b * rcap, a.ql.s + b * rcap, rcap,
                                   a.ql.sweeps + b * 2 * scap, scap);
  } else {
    OrientForQl(d, e, n);
    a.slots.eig_info[b] =
        QlValuesInStep(d, e, n, [live](bool running) { return __any_sync(live, running) != 0; });
  }
  for (int i = 0; i < n; ++i) a.ql.d[b * n + i] = d[i];
}

template <typename Kernel>
cudaError_t PrepareSmem(Kernel kernel, std::size_t smem) {
  // All of an SM's shared memory for four 50 KB blocks (the carveout is only a hint).
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                         cudaSharedmemCarveoutMaxShared);
  if (err == cudaSuccess) err = AllowSharedMemory(reinterpret_cast<const void*>(kernel), smem);
  return err;
}

}  // namespace
}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_TRIDIAG_KERNEL_COMMON_CUH_
