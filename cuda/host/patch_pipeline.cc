#include "cuda/host/patch_pipeline.h"

#include "cuda/kernels/cholesky_solve.h"
#include "cuda/kernels/core_gram.h"
#include "cuda/host/cuda_check.h"
#include "cuda/kernels/decorrelation.h"
#include "cuda/host/fault_injection.h"
#include "cuda/kernels/normal_equations.h"
#include "cuda/host/nvtx.h"
#include "cuda/kernels/patch_products.h"
#include "cuda/kernels/tiled_cholesky.h"

namespace spexd::cuda {
namespace {

template <typename T>
T* PtrArray(const uint64_t* base, int64_t off) {
  return reinterpret_cast<T*>(const_cast<uint64_t*>(base + off));
}

absl::Status Mark(const RunResources& res, StageMark mark, cudaStream_t stream) {
  if (!res.record_marks) return absl::OkStatus();
  SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(res.set->marks[mark].get(), stream));
  return absl::OkStatus();
}

// The tridiagonal eigensolver and decorrelation: the reduction on `stream` (or on `tail`
// with RunResources::reduce_on_tail, so that the compute stream goes on to the next
// batch), the rest on `tail`. The workspace's one set of QlBuffers orders consecutive runs:
// a reduction on `tail` follows the previous run's QL there, one on `stream` waits for it.
absl::Status EnqueueTridiag(const RunResources& res, const RunArgs& args, cudaStream_t stream) {
  Workspace& ws = *res.workspace;
  const cudaStream_t reduce = res.reduce_on_tail ? res.tail : stream;
  if (reduce == stream) {
    SPEXD_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, ws.ql_free().get(), 0));
  } else {  // `reduced`: the hand-off to the tail stream, here before the reduction
    SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(ws.reduced().get(), stream));
    SPEXD_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(res.tail, ws.reduced().get(), 0));
  }
  SPEXD_CUDA_RETURN_IF_ERROR(LaunchTridiagReduce(args, reduce));
  if (res.tail != reduce) {
    SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(ws.reduced().get(), reduce));
    SPEXD_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(res.tail, ws.reduced().get(), 0));
  }
  SPEXD_CUDA_RETURN_IF_ERROR(LaunchTridiagRotate(args, res.tail));
  SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(ws.ql_free().get(), res.tail));
  return absl::OkStatus();
}

absl::Status GemmBatched(cublasHandle_t h, const BatchedCall& c, const uint64_t* ptrs) {
  if (c.count == 0) return absl::OkStatus();
  const cublasOperation_t ta = c.transa ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = c.transb ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (!c.strided.empty()) {
    for (const StridedRun& r : c.strided) {
      SPEXD_CUDA_RETURN_IF_ERROR(cublasDgemmStridedBatched(
          h, ta, tb, c.m, c.n, c.k, &c.alpha, reinterpret_cast<const double*>(r.a), c.lda, r.sa,
          reinterpret_cast<const double*>(r.b), c.ldb, r.sb, &c.beta, reinterpret_cast<double*>(r.c),
          c.ldc, r.sc, r.count));
    }
    return absl::OkStatus();
  }
  SPEXD_CUDA_RETURN_IF_ERROR(cublasDgemmBatched(
      h, ta, tb, c.m, c.n, c.k, &c.alpha,
      PtrArray<const double* const>(ptrs, c.a_off), c.lda,
      PtrArray<const double* const>(ptrs, c.b_off), c.ldb, &c.beta,
      PtrArray<double* const>(ptrs, c.c_off), c.ldc, c.count));
  return absl::OkStatus();
}

// Left-looking over block columns (tiled_cholesky.h): update, factor, panel solve.
absl::Status EnqueueTiledCholesky(const RunResources& res, const RunLayout& layout,
                                  const RunArgs& args, cudaStream_t stream) {
  for (int k = 0; k < res.max_blocks; ++k) {
    if (k >= 1) {
      for (const BatchedCall& c : layout.chol_update[static_cast<std::size_t>(k - 1)]) {
        absl::Status s = GemmBatched(res.ctx->cublas(), c, res.d_ptrs);
        if (!s.ok()) return s;
      }
    }
    SPEXD_CUDA_RETURN_IF_ERROR(LaunchTileFactor(args, k, stream));
    SPEXD_CUDA_RETURN_IF_ERROR(LaunchPanelSolve(args, k, res.max_blocks, stream));
  }
  return absl::OkStatus();
}

// The trailing-first block inversion and the Grams (batch_layout.h).
absl::Status EnqueueTrailingInverse(const RunResources& res, const RunLayout& layout,
                                    const RunArgs& args, cudaStream_t stream) {
  absl::Status s;  // the blocks it multiplies as zeros were zeroed with the normal equations
  // (the tiled factor left the leaves X_ii = L_ii^{-1} on the diagonal).
  for (const auto& step : layout.trtri) {
    for (const BatchedCall& c : step) {
      if (!(s = GemmBatched(res.ctx->cublas(), c, res.d_ptrs)).ok()) return s;
    }
  }
  if (args.dims.nwavetot <= kCoreGramMaxNt) {
    SPEXD_CUDA_RETURN_IF_ERROR(LaunchCoreGram(args, stream));
  } else {
    for (const BatchedCall& c : layout.gram) {
      if (!(s = GemmBatched(res.ctx->cublas(), c, res.d_ptrs)).ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status EnqueueNormalEquations(const RunResources& res, const std::vector<RunEntry>& entries,
                                    const RunArgs& args, cudaStream_t stream) {
  if (args.count == 0) return absl::OkStatus();
  absl::Status s = Mark(res, kMarkStart, stream);
  if (!s.ok()) return s;
  // Weighted normal equations and regularisation (spec §2.7–2.8).
  NvtxRange range{"normal equations"};
  SPEXD_CUDA_RETURN_IF_ERROR(LaunchResetSlotFlags(args, stream));
  SPEXD_CUDA_RETURN_IF_ERROR(LaunchBuildNormalEquationsDmma(args, stream));
  SPEXD_CUDA_RETURN_IF_ERROR(LaunchRegularize(args, stream));
  // Test-only (fault_injection.h, fail_patch_once): nothing is armed in production.
  if (!(s = InjectPatchFault(entries, args, stream)).ok()) return s;
  return Mark(res, kMarkNormalEquations, stream);
}

absl::Status EnqueueRun(const RunResources& res, const RunLayout& layout, const RunArgs& args) {
  absl::Status s = EnqueueNormalEquations(res, layout.entries, args, res.ctx->compute());
  if (!s.ok()) return s;
  return EnqueueAfterNormalEquations(res, layout, args);
}

// The run's kernels and library calls are enqueued in stream order in one place, so that
// the order (and where each launch is checked) reads top to bottom.
absl::Status EnqueueAfterNormalEquations(const RunResources& res, const RunLayout& layout,
                                         const RunArgs& args) {
  if (args.count == 0) return absl::OkStatus();
  cudaStream_t stream = res.ctx->compute();
  absl::Status s;
  {
    // Cholesky and solve (spec §2.9). The solve comes first: the block inversion below
    // overwrites L.
    NvtxRange range{"cholesky"};
    if (!(s = EnqueueTiledCholesky(res, layout, args, stream)).ok()) return s;
    if (!(s = Mark(res, kMarkCholesky, stream)).ok()) return s;
    SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(res.workspace->factored().get(), stream));
  }
  {
    NvtxRange range{"solve"};
    SPEXD_CUDA_RETURN_IF_ERROR(LaunchBlockedCholeskySolve(args, stream));
    SPEXD_CUDA_RETURN_IF_ERROR(LaunchCheckSolve(args, stream));
    if (!(s = Mark(res, kMarkSolve, stream)).ok()) return s;
  }
  {
    // C's core diagonal blocks from the factor (batch_layout.h).
    NvtxRange range{"inverse blocks"};
    if (!(s = EnqueueTrailingInverse(res, layout, args, stream)).ok()) return s;
    if (!(s = Mark(res, kMarkInverseBlocks, stream)).ok()) return s;
  }
  const cudaStream_t tail = res.tail;
  {
    // Q = C_ss^{-1/2}, R, flux, ivar, Rdiags (spec §2.10).
    NvtxRange range{"inverse sqrt and decorrelation"};
    if (!(s = EnqueueTridiag(res, args, stream)).ok()) return s;
    if (!(s = Mark(res, kMarkInverseSqrt, tail)).ok()) return s;
    // The batch's download of flux, ivar and resolution starts here (BatchExtractor).
    SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(res.set->decorrelated.get(), tail));
  }
  // Model, chi2pix, pixmask_fraction (spec §2.11).
  NvtxRange range{"finalise"};
  SPEXD_CUDA_RETURN_IF_ERROR(LaunchPixelModel(args, tail));
  SPEXD_CUDA_RETURN_IF_ERROR(LaunchColumnSums(args, tail));
  return Mark(res, kMarkFinalise, tail);
}

}  // namespace spexd::cuda
