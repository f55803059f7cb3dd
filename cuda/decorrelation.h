// Launchers of the decorrelation kernels (extraction-spec §2.10 steps 2–3, §2.11): for each
// core spectrum block C_ss of each patch, Q = C_ss^{-1/2} by a shared-memory eigensolver
// (Householder + QL, or Jacobi) or from eigenvectors computed by cusolverDnXsyevBatched, then
// R = Q / rowsum, ivar = rowsum^2, flux = R x, Rdiags, written to the batch outputs.
#ifndef SPEXD_CUDA_DECORRELATION_H_
#define SPEXD_CUDA_DECORRELATION_H_

#include <cuda_runtime_api.h>

#include "cuda/kernel_args.h"

namespace spexd::cuda {

// from_eigenvectors = 0: slots.c holds C blocks (lower triangle read), Jacobi runs here.
// from_eigenvectors = 1: slots.c holds eigenvectors (columns) and slots.evals the
// eigenvalues, with per-matrix info in slots.eig_info (by run entry * nper + block).
// Enqueues on `stream`; does not synchronise.
cudaError_t LaunchDecorrelate(const RunArgs& args, int from_eigenvectors, cudaStream_t stream);

// The same products with the eigen-decomposition done by Householder tridiagonalisation
// and implicit QL (core/numerics/tridiag_eigen.h), in two parts. Reduce: slots.c holds C blocks
// (lower triangle read), receives the reflector product H; T goes to args.ql. Rotate
// (after Reduce, possibly on another stream): QL with logged rotations, the rotations
// applied to H, the products; slots.eig_info receives the QL sweep count per block, and
// a block whose QL does not converge marks its patch kStatusEigenFailed. Both use the
// workspace's one set of QlBuffers: a run's Reduce must follow the previous run's Rotate.
// `use_registers`: the register kernels where nt allows (production); false keeps the
// shared-memory ones for any nt (SPEXD_CUDA_TRIDIAG_REDUCE/_ROTATE, cuda/diagnostics.h).
// `twisted` (the default; SPEXD_CUDA_EIGENVECTORS=rotate turns it off; nt <= 80): the
// eigenvectors from T's eigenvalues by twisted factorisations and a Newton-Schulz step
// (core/numerics/tridiag_vectors.h) instead of the logged rotations; a block whose vectors are not
// orthogonal enough runs QL with its rotations in the block.
// `compact` (TridiagStoresReflectors): Reduce writes H's reflectors in compact WY form
// (register_tridiag.cuh, StoreCompactReflectors) instead of H, and the twisted kernel
// applies them to its vectors (SPEXD_CUDA_REFLECTORS=product keeps H).
cudaError_t LaunchTridiagReduce(const RunArgs& args, bool use_registers, bool compact,
                                cudaStream_t stream);
cudaError_t LaunchTridiagRotate(const RunArgs& args, bool use_registers, bool twisted,
                                bool compact, cudaStream_t stream);
// Whether the reduction stores the compact reflectors: the register reduction on the
// twisted path (nt <= 80), with `compact` (SPEXD_CUDA_REFLECTORS) asked for.
bool TridiagStoresReflectors(int nt, bool use_registers, bool twisted, bool compact);
// Whether LaunchTridiagRotate writes QL's rotation log for blocks of nt (the rotate path:
// not twisted, or nt > 80); the workspace allocates the log only then.
bool TridiagNeedsRotationLog(int nt, bool twisted);
// The twisted path alone (cuda/twisted_decorrelation.cu; nt <= 80), as LaunchTridiagRotate
// runs it; `compact`: the slots hold the compact reflectors, else H.
cudaError_t LaunchTwistedVectors(const RunArgs& args, bool compact, cudaStream_t stream);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_DECORRELATION_H_
