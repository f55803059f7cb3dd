// The forward substitution of the blocked Cholesky solve, one block column at a time
// (extraction-spec §2.9; device-only header): y_k = X_k (b_k - sum_{j=k-B}^{k-1} L_kj y_j)
// with X_k = L_kk^{-1} the tiled factor's leaf, run by the tiled factor at the end of its
// step k (the blocked solve, cholesky_solve.cu, does the backward pass). 256 threads
// (kSubstWarps warps).
#ifndef SPEXD_CUDA_BLOCKED_FORWARD_CUH_
#define SPEXD_CUDA_BLOCKED_FORWARD_CUH_

#include "core/numerics/patch_numerics.h"
#include "cuda/kernels/kernel_common.cuh"

namespace spexd::cuda {

inline constexpr int kSubstWarps = 8;
inline constexpr int kMaxRowsPerLane = 4;  // nt <= 128 rows of a block per warp (geometry: nt <= 112)

// part[warp][i] = sum over columns c = warp, warp + 8, ... < ncol of A[i + c * lda] * v[c],
// i < nt: lanes over rows, warps over columns (coalesced, column-major).
__device__ inline void RowsTimes(const double* A, int lda, const double* v, int ncol, int nt,
                                 double* part) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  double acc[kMaxRowsPerLane] = {};
  for (int c = warp; c < ncol; c += kSubstWarps) {
    const double vc = v[c];
    const double* col = A + static_cast<int64_t>(c) * lda;
#pragma unroll
    for (int q = 0; q < kMaxRowsPerLane; ++q) {
      const int i = lane + 32 * q;
      if (i < nt) acc[q] = fma(col[i], vc, acc[q]);
    }
  }
#pragma unroll
  for (int q = 0; q < kMaxRowsPerLane; ++q) {
    const int i = lane + 32 * q;
    if (i < nt) part[warp * nt + i] = acc[q];
  }
}

// Sum over the warps' partial sums part[w][i] (i < nt) into out[i] = base[i] - sum or sum.
__device__ inline void ReducePartials(const double* part, int nt, const double* base, double* out) {
  for (int i = threadIdx.x; i < nt; i += blockDim.x) {
    double s = 0.0;
#pragma unroll
    for (int w = 0; w < kSubstWarps; ++w) s += part[w * nt + i];
    out[i] = base != nullptr ? base[i] - s : s;
  }
}

// Step k of the forward pass: y holds y_j for j < k and b_k at block k, which gets y_k.
// part: kSubstWarps * nt doubles, r: nt (shared memory). Block-wide (barriers inside).
__device__ inline void ForwardStep(const RunArgs& a, const RunEntry& e, const DevicePatch& d, int k,
                                   double* y, double* part, double* r) {
  const int nt = a.dims.nwavetot, ld = a.dims.ld;
  const int j0 = core::BandFirst(k, e.band);
  const double* lrow = SlotMatrix(a, e.slot) + static_cast<int64_t>(k) * nt + static_cast<int64_t>(j0) * nt * ld;
  RowsTimes(lrow, ld, y + j0 * nt, (k - j0) * nt, nt, part);
  __syncthreads();
  ReducePartials(part, nt, y + k * nt, r);
  __syncthreads();
  const LeafBlock xk = LeafOf(a, e.slot, k, d);
  RowsTimes(xk.p, xk.ld, r, nt, nt, part);
  __syncthreads();
  ReducePartials(part, nt, nullptr, y + k * nt);
  __syncthreads();
}

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_BLOCKED_FORWARD_CUH_
