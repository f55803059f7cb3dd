// The left-looking tiled Cholesky of the patch matrices (extraction-spec §2.9). A patch's
// unknowns are blocked by spectrum
// (nb = nspectot blocks of nt = nwavetot), and M = L L^T is factored one block column k
// at a time:
//   1. M[k:, k] -= L[k:, :k] · L[k, :k]^T     batched DGEMM (batch_layout.h, chol_update)
//   2. L_kk = chol(M_kk), and X_k = L_kk^{-1}  LaunchTileFactor, in shared memory (with
//      RunArgs::diag_update, step 1's row block k too, on the tensor cores)
//   3. L[k+1:, k] = M[k+1:, k] · X_k^T         LaunchPanelSolve, in place (with
//      RunArgs::panel_update, step 1's rows below block k too, on the tensor cores: where
//      nt <= 80 both are set, and step 1 has no call left)
// Steps 1 and 3 stay inside the entry's band B (RunEntry::band, PatchPlan::coupled_band):
// the blocks of M, and so of L, more than B blocks below the diagonal are zero.
// X_k is kept where the block inversion of C's diagonal blocks reads its leaf inverses
// (kernel_common.cuh's LeafOf): over L_kk on M's diagonal where the trailing-first
// inversion needs it (L's diagonal then goes to SlotBuffers::ldiag), else in the GEMM
// scratch (block k of the slot's t, column-major nt x nt). Step 2 also does the blocked
// solve's forward step k (blocked_forward.cuh).
// Step 2 writes the factor's info (as LAPACK's potrf): 0, or the 1-based column of the first
// non-positive pivot.
#ifndef SPEXD_CUDA_TILED_CHOLESKY_H_
#define SPEXD_CUDA_TILED_CHOLESKY_H_

#include <cuda_runtime_api.h>

#include <cstddef>

#include "cuda/kernels/kernel_args.h"

namespace spexd::cuda {

// Largest nt of the tiled Cholesky (geometry_state.cc refuses larger).
inline constexpr int kTiledMaxNt = 112;
// Largest nt of the panel on the tensor cores (which RunArgs::panel_p needs).
inline constexpr int kPanelDmmaMaxNt = 80;
// Largest nt of the factor's own diagonal update (RunArgs::diag_update).
inline constexpr int kFactorUpdateMaxNt = 80;

// Shared memory a block of LaunchTileFactor and of LaunchPanelSolve takes for nt x nt blocks
// (the planner checks them against the device's, BatchExtractor::CheckSharedMemory).
std::size_t TiledCholeskySharedBytes(int nt);
std::size_t PanelSolveSharedBytes(int nt);

// Step 2 for block column k of every run entry with nspectot > k.
cudaError_t LaunchTileFactor(const RunArgs& args, int k, cudaStream_t stream);
// Step 3 for block column k (entries with nspectot > k + 1; tiled_panel.cu).
cudaError_t LaunchPanelSolve(const RunArgs& args, int k, int max_blocks, cudaStream_t stream);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_TILED_CHOLESKY_H_
