// Launchers of the block-triangular-inverse helpers around the batched GEMMs of
// batch_layout.h (extraction-spec §2.10 step 1, "Decisions": C's diagonal blocks from the
// Cholesky factor). Enqueue on `stream`, no synchronisation, return the launch status.
#ifndef SPEXD_CUDA_BLOCK_INVERSE_H_
#define SPEXD_CUDA_BLOCK_INVERSE_H_

#include <cuda_runtime_api.h>

#include "cuda/kernels/kernel_args.h"

namespace spexd::cuda {

// X_ii = L_ii^{-1} in place for the diagonal blocks that need it (NeedsLeafInverse),
// writing the full block (zeros above the diagonal). One thread block per (patch, i). The
// potrfBatched path's leaves (the tiled factor writes its own in place).
cudaError_t LaunchLeafInverse(const RunArgs& args, int max_blocks, cudaStream_t stream);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_BLOCK_INVERSE_H_
