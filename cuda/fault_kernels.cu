// The kernel behind sticky_at_request (fault_injection.h): a trap ends the grid with
// cudaErrorLaunchFailure and leaves the context unusable, as a real device fault would.
#include "cuda/fault_injection.h"

namespace spexd::cuda {
namespace {

__global__ void TrapKernel() { __trap(); }

}  // namespace

void LaunchTrapKernel(cudaStream_t stream) { TrapKernel<<<1, 1, 0, stream>>>(); }

}  // namespace spexd::cuda
