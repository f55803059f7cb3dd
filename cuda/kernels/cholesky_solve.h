// Launcher of the batched solve with the Cholesky factors (extraction-spec §2.9).
#ifndef SPEXD_CUDA_CHOLESKY_SOLVE_H_
#define SPEXD_CUDA_CHOLESKY_SOLVE_H_

#include <cuda_runtime_api.h>

#include "cuda/kernels/kernel_args.h"

namespace spexd::cuda {

// x = L^-T L^-1 b in place in slots.x, blocked by spectrum inside each entry's band, with
// the tile inverses that LaunchTileFactor leaves (kernel_common.cuh's LeafOf): only after
// the tiled Cholesky, which did the forward pass, and before anything else writes the
// scratch or the leaves (the block inversion does). Enqueues on `stream`, does not
// synchronise.
cudaError_t LaunchBlockedCholeskySolve(const RunArgs& args, cudaStream_t stream);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_CHOLESKY_SOLVE_H_
