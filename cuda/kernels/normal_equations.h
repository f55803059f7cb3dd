// Launchers of the per-run setup kernels: sparse weighted normal equations (extraction-
// spec §2.7–2.8), regularisation, solve checks, flag resets and the image widening.
// Every launcher enqueues on `stream`, does not synchronise, and returns the launch status.
#ifndef SPEXD_CUDA_NORMAL_EQUATIONS_H_
#define SPEXD_CUDA_NORMAL_EQUATIONS_H_

#include <cuda_runtime_api.h>

#include <cstddef>

#include "cuda/kernels/kernel_args.h"

namespace spexd::cuda {

// status[slot] = mflags[slot] = 0 for every run entry.
cudaError_t LaunchResetSlotFlags(const RunArgs& args, cudaStream_t stream);
// Lower triangle of M = A^T N A (upper triangle untouched), b (into x) and the
// fluxweight, from stamp overlaps: by 8 x 8 tiles on the FP64 tensor cores
// (LaunchBuildNormalEquationsDmma, normal_equations_dmma.cu), which hands a patch with more
// candidate tiles than its kernel holds to the entry-by-entry kernel on the CUDA cores
// (LaunchBuildNormalEquations). The same M up to rounding.
cudaError_t LaunchBuildNormalEquations(const RunArgs& args, cudaStream_t stream);
cudaError_t LaunchBuildNormalEquationsDmma(const RunArgs& args, cudaStream_t stream);
// M_qq += core::DiagonalRegularization(...) for every q (spec §2.8, §2.17).
cudaError_t LaunchRegularize(const RunArgs& args, cudaStream_t stream);
// Flags entries whose factor info is non-zero or whose solution is not finite.
cudaError_t LaunchCheckSolve(const RunArgs& args, cudaStream_t stream);
// dst[i] = src[i] for i < n (float32 -> float64 is exact).
cudaError_t LaunchWiden(const float* src, double* dst, std::size_t n, cudaStream_t stream);
// The same for columns [x0, x1) of every row of [height][width] planes.
cudaError_t LaunchWidenColumns(const float* src, double* dst, int width, int height, int x0, int x1,
                               cudaStream_t stream);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_NORMAL_EQUATIONS_H_
