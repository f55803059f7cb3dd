// Forward and back substitution with the batched Cholesky factors, one warp per patch.
// Both passes walk the columns of L (coalesced): the forward pass as column updates
// (axpy), the backward pass (L^T x = y) as dot products down the columns.
#include "cuda/cholesky_solve.h"
#include "cuda/kernel_common.cuh"
#include "cuda/launch_check.h"

namespace spexd::cuda {
namespace {

constexpr int kSolveWarps = 4;

__global__ void CholeskySolveKernel(RunArgs a) {
  extern __shared__ double smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int ei = static_cast<int>(blockIdx.x) * kSolveWarps + warp;
  if (ei >= a.count) return;  // warp-uniform; no block barrier below
  const RunEntry e = a.entries[ei];
  const int n = a.in.patches[e.patch].n, ld = a.dims.ld;
  double* xs = smem + warp * ld;
  double* xg = a.slots.x + static_cast<int64_t>(e.slot) * ld;
  const double* L = a.slots.m + static_cast<int64_t>(e.slot) * ld * ld;
  for (int i = lane; i < n; i += 32) xs[i] = xg[i];
  __syncwarp();
  for (int j = 0; j < n; ++j) {  // L y = b
    const double* col = L + static_cast<int64_t>(j) * ld;
    const double yj = xs[j] / col[j];
    __syncwarp();
    for (int i = j + 1 + lane; i < n; i += 32) xs[i] -= col[i] * yj;
    if (lane == 0) xs[j] = yj;
    __syncwarp();
  }
  for (int j = n - 1; j >= 0; --j) {  // L^T x = y
    const double* col = L + static_cast<int64_t>(j) * ld;
    double part = 0.0;
    for (int i = j + 1 + lane; i < n; i += 32) part += col[i] * xs[i];
    part = WarpSum(part);
    const double xj = (xs[j] - part) / col[j];
    __syncwarp();
    if (lane == 0) xs[j] = xj;
    __syncwarp();
  }
  for (int i = lane; i < n; i += 32) xg[i] = xs[i];
}

}  // namespace

cudaError_t LaunchCholeskySolve(const RunArgs& args, cudaStream_t stream) {
  if (args.count == 0) return cudaSuccess;
  const std::size_t smem = sizeof(double) * kSolveWarps * args.dims.ld;
  if (smem > 48 * 1024) {
    cudaError_t err = cudaFuncSetAttribute(CholeskySolveKernel,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem));
    if (err != cudaSuccess) return err;
  }
  CholeskySolveKernel<<<CeilDiv(args.count, kSolveWarps), 32 * kSolveWarps, smem, stream>>>(args);
  return SPEXD_CHECK_LAUNCH(stream);
}

}  // namespace spexd::cuda
