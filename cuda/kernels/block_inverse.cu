// Helpers of the in-place block triangular inversion (see batch_layout.h).
#include "cuda/kernels/batch_layout.h"
#include "cuda/kernels/block_inverse.h"
#include "cuda/kernels/kernel_common.cuh"
#include "cuda/kernels/launch_check.h"

namespace spexd::cuda {
namespace {

constexpr int kLeafThreads = 128;

// Forward substitution, one thread per column of the inverse; L and X in shared memory.
__global__ void LeafInverseKernel(RunArgs a) {
  extern __shared__ double smem[];
  const RunEntry e = a.entries[blockIdx.x];
  const DevicePatch d = a.in.patches[e.patch];
  const int i = blockIdx.y;
  if (!NeedsLeafInverse(i, d.core_row, d.nspectot)) return;
  const int nt = a.dims.nwavetot, ld = a.dims.ld, ldp = nt + 1;
  double* ls = smem;             // [nt][ldp] row-major
  double* xs = smem + nt * ldp;  // [nt][ldp]
  double* base = SlotMatrix(a, e.slot) + static_cast<int64_t>(i) * nt * (ld + 1);
  for (int idx = threadIdx.x; idx < nt * nt; idx += blockDim.x) {
    const int r = idx % nt, c = idx / nt;
    ls[r * ldp + c] = r >= c ? base[r + static_cast<int64_t>(c) * ld] : 0.0;
  }
  __syncthreads();
  for (int c = threadIdx.x; c < nt; c += blockDim.x) {
    for (int r = 0; r < c; ++r) xs[r * ldp + c] = 0.0;
    xs[c * ldp + c] = 1.0 / ls[c * ldp + c];
    for (int r = c + 1; r < nt; ++r) {
      double sum = 0.0;
      for (int k = c; k < r; ++k) sum += ls[r * ldp + k] * xs[k * ldp + c];
      xs[r * ldp + c] = -sum / ls[r * ldp + r];
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < nt * nt; idx += blockDim.x) {
    const int r = idx % nt, c = idx / nt;
    base[r + static_cast<int64_t>(c) * ld] = xs[r * ldp + c];
  }
}

}  // namespace

cudaError_t LaunchLeafInverse(const RunArgs& args, int max_blocks, cudaStream_t stream) {
  if (args.count == 0 || max_blocks < 1) return cudaSuccess;
  const int nt = args.dims.nwavetot;
  const std::size_t smem = sizeof(double) * 2 * nt * (nt + 1);
  if (cudaError_t err = AllowSharedMemory(reinterpret_cast<const void*>(LeafInverseKernel), smem); err != cudaSuccess) {
    return err;
  }
  const dim3 grid(static_cast<unsigned>(args.count), static_cast<unsigned>(max_blocks));
  LeafInverseKernel<<<grid, kLeafThreads, smem, stream>>>(args);
  return SPEXD_CHECK_LAUNCH(stream);
}

}  // namespace spexd::cuda
