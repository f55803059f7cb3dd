// Launchers of the decorrelation kernels (extraction-spec §2.10 steps 2–3, §2.11): for each
// core spectrum block C_ss of each patch, Q = C_ss^{-1/2} by a shared-memory eigensolver,
// then R = Q / rowsum, ivar = rowsum^2, flux = R x, Rdiags, written to the batch outputs.
#ifndef SPEXD_CUDA_DECORRELATION_H_
#define SPEXD_CUDA_DECORRELATION_H_

#include <cuda_runtime_api.h>

#include <cstddef>

#include "cuda/kernels/kernel_args.h"

namespace spexd::cuda {

// Q = C_ss^{-1/2} by Householder tridiagonalisation and implicit QL
// (core/numerics/tridiag_eigen.h), in two parts. Reduce: slots.c holds C blocks (lower
// triangle read); T goes to args.ql, and for nt <= 80 the reflectors in compact WY form
// (register_tridiag.cuh, StoreCompactReflectors) to the slot, else their product H. Rotate
// (after Reduce, possibly on another stream): for nt <= 80 the eigenvectors from T's
// eigenvalues by twisted factorisations and a Newton-Schulz step
// (core/numerics/tridiag_vectors.h), the reflectors applied to them on the tensor cores (a
// block whose vectors are not orthogonal enough runs QL with its rotations in the block);
// for larger nt QL with logged rotations applied to H. Then the products. slots.eig_info
// receives the QL sweep count per block, and a block whose QL does not converge marks its
// patch kStatusEigenFailed. Both use the workspace's one set of QlBuffers: a run's Reduce
// must follow the previous run's Rotate.
cudaError_t LaunchTridiagReduce(const RunArgs& args, cudaStream_t stream);
cudaError_t LaunchTridiagRotate(const RunArgs& args, cudaStream_t stream);
// Whether LaunchTridiagRotate writes QL's rotation log for blocks of nt (nt > 80); the
// workspace allocates the log only then.
bool TridiagNeedsRotationLog(int nt);
// The twisted path alone (cuda/kernels/twisted_decorrelation.cu; nt <= 80), as LaunchTridiagRotate
// runs it.
cudaError_t LaunchTwistedVectors(const RunArgs& args, cudaStream_t stream);
// Shared memory a block of these kernels takes at most for blocks of nt (the planner checks
// it against the device's, BatchExtractor::CheckSharedMemory); TwistedVectorsSharedBytes:
// LaunchTwistedVectors's alone.
std::size_t DecorrelationSharedBytes(int nt);
std::size_t TwistedVectorsSharedBytes(int nt);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_DECORRELATION_H_
