// The kernels behind the fault hooks (cuda/host/fault_injection.h). sticky_at_request: a trap ends
// the grid with cudaErrorLaunchFailure and leaves the context unusable, as a real device
// fault would. fail_patch_once: NaN on the diagonal of one patch's normal matrix, so that
// the tiled factor refuses the patch's system (its info) or its solution is
// not finite, and CheckSolve flags it for the retry.
#include <cmath>

#include "cuda/kernels/fault_kernels.h"
#include "cuda/kernels/launch_check.h"

namespace spexd::cuda {
namespace {

__global__ void TrapKernel() { __trap(); }

__global__ void PoisonNormalMatrixKernel(RunArgs a, int entry) {
  const RunEntry e = a.entries[entry];
  const int n = a.in.patches[e.patch].n;
  double* m = a.slots.m + static_cast<int64_t>(e.slot) * a.dims.ld * a.dims.ld;
  for (int q = static_cast<int>(threadIdx.x); q < n; q += static_cast<int>(blockDim.x)) {
    m[static_cast<int64_t>(q) * a.dims.ld + q] = NAN;
  }
}

}  // namespace

void LaunchTrapKernel(cudaStream_t stream) { TrapKernel<<<1, 1, 0, stream>>>(); }

cudaError_t LaunchPoisonNormalMatrix(const RunArgs& args, int entry, cudaStream_t stream) {
  PoisonNormalMatrixKernel<<<1, 256, 0, stream>>>(args, entry);
  return SPEXD_CHECK_LAUNCH(stream);
}

}  // namespace spexd::cuda
