// Launchers of the block-triangular-inverse helpers around the batched GEMMs of
// batch_layout.h (extraction-spec §2.10 step 1, "Decisions": C's diagonal blocks from the
// Cholesky factor). Enqueue on `stream`, no synchronisation, return the launch status.
#ifndef SPEXD_CUDA_BLOCK_INVERSE_H_
#define SPEXD_CUDA_BLOCK_INVERSE_H_

#include <cuda_runtime_api.h>

#include "cuda/kernel_args.h"

namespace spexd::cuda {

// X_ii = L_ii^{-1} in place for the diagonal blocks that need it (NeedsLeafInverse),
// writing the full block (zeros above the diagonal). One thread block per (patch, i).
cudaError_t LaunchLeafInverse(const RunArgs& args, int max_blocks, cudaStream_t stream);
// Library path: identity into the GEMM scratch block i of each needed (patch, i)...
cudaError_t LaunchSetLeafIdentity(const RunArgs& args, int max_blocks, cudaStream_t stream);
// ...and, after trsmBatched, the solved blocks back onto the diagonal.
cudaError_t LaunchCopyLeafBlocks(const RunArgs& args, int max_blocks, cudaStream_t stream);

// The band inversion's prologue before step r's GEMMs (r = 0 .. max_blocks; the last
// after all steps): batch_layout.h.
cudaError_t LaunchBandInversePrologue(const RunArgs& args, int r, int max_blocks, cudaStream_t stream);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_BLOCK_INVERSE_H_
