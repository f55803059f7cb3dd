// Device helpers shared by the extraction kernels, and a launch helper (CUDA-only header).
#ifndef SPEXD_CUDA_KERNEL_COMMON_CUH_
#define SPEXD_CUDA_KERNEL_COMMON_CUH_

#include <cuda_runtime_api.h>

#include <cassert>
#include <cstddef>
#include <cstdint>

#include "cuda/kernels/batch_layout.h"
#include "cuda/kernels/device_limits.h"
#include "cuda/kernels/kernel_args.h"

#ifdef SPEXD_CUDA_DEBUG
#define SPEXD_DEVICE_ASSERT(cond) assert(cond)
#else
#define SPEXD_DEVICE_ASSERT(cond) ((void)0)
#endif

namespace spexd::cuda {

// Index of the stamp of the patch's spectrum s, wavelength w into the plan's [nspec][nfull]
// arrays.
__device__ inline int64_t StampIndex(const PlanDims& D, const DevicePatch& d, int s, int w) {
  SPEXD_DEVICE_ASSERT(s < d.nspectot);
  const int64_t idx = static_cast<int64_t>(d.fiber0 - D.specmin + s) * D.nfull + d.wave0 + w;
  SPEXD_DEVICE_ASSERT(idx >= 0);
  return idx;
}
// The same for patch-local unknown q = s * nwavetot + w.
__device__ inline int64_t StampIndex(const PlanDims& D, const DevicePatch& d, int q) {
  return StampIndex(D, d, q / D.nwavetot, q % D.nwavetot);
}

// A lane's walk over a stamp's pixels pp = lane + 32 k: its first pixel's row and column
// and the row and column steps of 32 pixels. The same for every stamp of a kernel (they
// depend on the lane and the stamp width only), so the divisions run once, not per stamp.
struct StampWalk {
  int lane, pr, pc, step_r, step_c;
};
__device__ __forceinline__ StampWalk MakeStampWalk(int snx, int lane) {
  const int step_r = 32 / snx, pr = lane / snx;
  return StampWalk{lane, pr, lane - pr * snx, step_r, 32 - step_r * snx};
}

// Element idx = col * n + row of a column-major block with n rows, visited by a block's
// threads (start = threadIdx.x, stride = blockDim.x) with one division at the start
// instead of a division and a remainder a step (those bounded the eigen
// kernels' staging loops).
struct ColumnMajorWalk {
  int idx, row, col, drow, dcol;
  __device__ ColumnMajorWalk(int start, int stride, int n)
      : idx(start), row(start % n), col(start / n), drow(stride % n), dcol(stride / n) {}
  __device__ void Next(int stride, int n) {
    idx += stride;
    row += drow;
    col += dcol;
    if (row >= n) {
      row -= n;
      ++col;
    }
  }
};

__device__ inline double WarpSum(double v) {
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// fmax over the warp (the same value in every lane, whatever the order).
__device__ inline double WarpMax(double v) {
  for (int off = 16; off > 0; off /= 2) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Output row (bundle_pos * bundlesize + row in bundle) of core spectrum sp of a patch.
__device__ inline int64_t OutRow(const PlanDims& D, const RunEntry& e, const DevicePatch& d,
                                 int sp) {
  const int row = d.out_row - d.bundle * D.bundlesize + sp;
  SPEXD_DEVICE_ASSERT(row >= 0 && row < D.bundlesize);
  return static_cast<int64_t>(e.bundle_pos) * D.bundlesize + row;
}

// Element of core spectrum sp, kept wavelength w, in a [pos][bundlesize][nwave] array.
__device__ inline int64_t OutIndex(const PlanDims& D, const RunEntry& e, const DevicePatch& d,
                                   int sp, int w) {
  SPEXD_DEVICE_ASSERT(d.out_col + w < D.nwave);
  return OutRow(D, e, d, sp) * D.nwave + d.out_col + w;
}

// Run entry slot's matrix (column-major, leading dimension ld; kernel_args.h).
__device__ inline double* SlotMatrix(const RunArgs& a, int slot) {
  return a.slots.m + static_cast<int64_t>(slot) * a.dims.ld * a.dims.ld;
}

// Block i (nt x nt, column-major) of a slot's GEMM scratch: where the leaf inverses
// X_ii = L_ii^{-1} are kept (batch_layout.h, tiled_cholesky.h).
__device__ inline double* LeafScratch(const RunArgs& a, int slot, int i) {
  const int nt = a.dims.nwavetot;
  return a.slots.t + static_cast<int64_t>(slot) * a.slots.t_stride + static_cast<int64_t>(i) * nt * nt;
}

// Where the tiled factor keeps X_kk = L_kk^{-1} of block k (column-major, leading
// dimension ld): on M's diagonal over L_kk where the trailing-first inversion reads it
// (NeedsLeafInverse; no copy kernel), else the GEMM scratch.
struct LeafBlock {
  double* p;
  int ld;
};
__device__ inline LeafBlock LeafOf(const RunArgs& a, int slot, int k, const DevicePatch& d) {
  if (NeedsLeafInverse(k, d.core_row, d.nspectot)) {
    return {SlotMatrix(a, slot) + static_cast<int64_t>(k) * a.dims.nwavetot * (a.dims.ld + 1), a.dims.ld};
  }
  return {LeafScratch(a, slot, k), a.dims.nwavetot};
}

inline unsigned CeilDiv(long long a, long long b) { return static_cast<unsigned>((a + b - 1) / b); }

// Opts `kernel` into more than 48 KB of dynamic shared memory where it asks for that much;
// cudaErrorInvalidValue for more than the current device allows (device_limits.h: 227 KB
// on an H100, 163 KB on an A100, or a test's cap), before any launch.
inline cudaError_t AllowSharedMemory(const void* kernel, std::size_t bytes) {
  if (bytes <= 48 * 1024) return cudaSuccess;
  if (bytes > SharedMemoryPerBlock()) return cudaErrorInvalidValue;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
}

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_KERNEL_COMMON_CUH_
