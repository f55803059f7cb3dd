// The back substitution with the tiled Cholesky factors (the forward pass runs in the factor
// kernel, blocked_forward.cuh), one thread block per patch.
#include "cuda/kernels/cholesky_solve.h"

#include "core/numerics/patch_numerics.h"
#include "cuda/kernels/blocked_forward.cuh"
#include "cuda/kernels/kernel_common.cuh"
#include "cuda/kernels/launch_check.h"

namespace spexd::cuda {
namespace {

// Blocked by spectrum with the tile inverses X_k = L_kk^{-1} the tiled factor left
// (tiled_cholesky.h, LeafOf), inside the entry's band B (L's blocks more than B below the
// diagonal are zero):
//   forward   y_k = X_k (b_k - sum_{j=k-B}^{k-1} L_kj y_j),        k = 0 .. nb-1
//   backward  x_k = X_k^T (y_k - sum_{j=k+1}^{k+B} L_jk^T x_j),    k = nb-1 .. 0
// Each step is a few small GEMVs (14 dependent steps for nb = 7 instead of 2n serial
// column steps). The tiled factor has done the forward pass (blocked_forward.cuh, with
// products of L's row block k and X: lanes over rows, warps over columns): x holds y, and
// the backward pass runs here, its products with a transpose: warps over outputs, lanes
// down the column, reduced with shuffles.
__global__ void __launch_bounds__(32 * kSubstWarps) BlockedSolveKernel(RunArgs a) {
  extern __shared__ double smem[];
  const RunEntry e = a.entries[blockIdx.x];
  const DevicePatch d = a.in.patches[e.patch];
  const int nt = a.dims.nwavetot, ld = a.dims.ld, nb = d.nspectot, n = d.n;
  SPEXD_DEVICE_ASSERT(n == nb * nt);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  double* xs = smem;             // [ld] b -> y -> x
  double* r = xs + ld;           // [nt] right-hand side of the current block
  double* xg = a.slots.x + static_cast<int64_t>(e.slot) * ld;
  const double* L = SlotMatrix(a, e.slot);
  for (int i = threadIdx.x; i < n; i += blockDim.x) xs[i] = xg[i];
  __syncthreads();
  for (int k = nb - 1; k >= 0; --k) {
    const int j1 = core::BandLast(k, e.band, nb);
    const int len = (j1 - k) * nt;  // rows (k+1)*nt .. of column block k
    const double* lcol = L + static_cast<int64_t>(k + 1) * nt + static_cast<int64_t>(k) * nt * ld;
    for (int c = warp; c < nt; c += kSubstWarps) {
      const double* col = lcol + static_cast<int64_t>(c) * ld;
      double s = 0.0;
      for (int i = lane; i < len; i += 32) s = fma(col[i], xs[(k + 1) * nt + i], s);
      s = WarpSum(s);
      if (lane == 0) r[c] = xs[k * nt + c] - s;
    }
    __syncthreads();
    const LeafBlock xk = LeafOf(a, e.slot, k, d);
    for (int c = warp; c < nt; c += kSubstWarps) {
      const double* col = xk.p + static_cast<int64_t>(c) * xk.ld;
      double s = 0.0;
      for (int i = c + lane; i < nt; i += 32) s = fma(col[i], r[i], s);  // X_k lower
      s = WarpSum(s);
      if (lane == 0) xs[k * nt + c] = s;
    }
    __syncthreads();
  }
  for (int i = threadIdx.x; i < n; i += blockDim.x) xg[i] = xs[i];
}

}  // namespace

cudaError_t LaunchBlockedCholeskySolve(const RunArgs& args, cudaStream_t stream) {
  if (args.count == 0) return cudaSuccess;
  const std::size_t smem = sizeof(double) * (args.dims.ld + args.dims.nwavetot);
  if (cudaError_t err = AllowSharedMemory(reinterpret_cast<const void*>(BlockedSolveKernel), smem); err != cudaSuccess) {
    return err;
  }
  BlockedSolveKernel<<<static_cast<unsigned>(args.count), 32 * kSubstWarps, smem, stream>>>(args);
  return SPEXD_CHECK_LAUNCH(stream);
}

}  // namespace spexd::cuda
