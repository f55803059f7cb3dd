// Launcher of the batched solve with the Cholesky factors (extraction-spec §2.9):
// x = L^-T L^-1 b for every run entry.
#ifndef SPEXD_CUDA_CHOLESKY_SOLVE_H_
#define SPEXD_CUDA_CHOLESKY_SOLVE_H_

#include <cuda_runtime_api.h>

#include "cuda/kernels/kernel_args.h"

namespace spexd::cuda {

// Solves in place in slots.x with the lower factor in slots.m. Enqueues on `stream`,
// does not synchronise. (cusolverDnDpotrsBatched does the same but is latency bound.) The
// potrfBatched path's solve.
cudaError_t LaunchCholeskySolve(const RunArgs& args, cudaStream_t stream);

// The same solve blocked by spectrum inside each entry's band, using the tile inverses
// that LaunchTileFactor leaves (kernel_common.cuh's LeafOf): only after the tiled
// Cholesky, and before anything else writes the scratch or the leaves (the block
// inversion does). With RunArgs::forward_in_factor only the backward pass (the factor
// did the forward one).
cudaError_t LaunchBlockedCholeskySolve(const RunArgs& args, cudaStream_t stream);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_CHOLESKY_SOLVE_H_
