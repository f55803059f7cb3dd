// C's core diagonal blocks C_jj = X[j:, j]^T X[j:, j] (X = L^{-1}, batch_layout.h;
// extraction-spec §2.10 step 1, "Decisions": C's diagonal blocks from the Cholesky factor)
// in one kernel on the FP64 tensor cores, instead of one batched cuBLAS GEMM per inner size.
#ifndef SPEXD_CUDA_CORE_GRAM_H_
#define SPEXD_CUDA_CORE_GRAM_H_

#include <cuda_runtime_api.h>

#include "cuda/kernels/kernel_args.h"

namespace spexd::cuda {

// The largest nt (= nwavetot) the kernel handles; above it the caller keeps the GEMMs.
constexpr int kCoreGramMaxNt = 80;

// Writes the lower triangle of every core block C_jj of the run (slots.c) and mirrors it
// above the diagonal (the consumers read the lower triangle). One thread block per
// (run entry, core spectrum); reads column block j of X in place from slots.m.
cudaError_t LaunchCoreGram(const RunArgs& args, cudaStream_t stream);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_CORE_GRAM_H_
