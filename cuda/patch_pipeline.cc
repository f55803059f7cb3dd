#include "cuda/patch_pipeline.h"

#include "cuda/block_inverse.h"
#include "cuda/cholesky_solve.h"
#include "cuda/core_gram.h"
#include "cuda/cuda_check.h"
#include "cuda/decorrelation.h"
#include "cuda/fault_injection.h"
#include "cuda/normal_equations.h"
#include "cuda/nvtx.h"
#include "cuda/patch_products.h"
#include "cuda/tiled_cholesky.h"

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
  const bool compact = TridiagStoresReflectors(args.dims.nwavetot, res.tridiag_register_reduce,
                                               res.twisted_vectors, res.compact_reflectors);
  const cudaStream_t reduce = res.reduce_on_tail ? res.tail : stream;
  if (reduce == stream) {
    SPEXD_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, ws.ql_free().get(), 0));
  } else {  // `reduced`: the hand-off to the tail stream, here before the reduction
    SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(ws.reduced().get(), stream));
    SPEXD_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(res.tail, ws.reduced().get(), 0));
  }
  SPEXD_CUDA_RETURN_IF_ERROR(LaunchTridiagReduce(args, res.tridiag_register_reduce, compact, reduce));
  if (res.tail != reduce) {
    SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(ws.reduced().get(), reduce));
    SPEXD_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(res.tail, ws.reduced().get(), 0));
  }
  SPEXD_CUDA_RETURN_IF_ERROR(LaunchTridiagRotate(args, res.tridiag_register_rotate, res.twisted_vectors, compact, res.tail));
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

bool SlotsAreEntryIndices(const RunLayout& layout) {
  for (std::size_t i = 0; i < layout.entries.size(); ++i) {
    if (layout.entries[i].slot != static_cast<int32_t>(i)) return false;
  }
  return true;
}

absl::Status LibraryEigen(const RunResources& res, const RunLayout& layout, const RunArgs& args) {
  const GpuContext& ctx = *res.ctx;
  const int nt = args.dims.nwavetot, nper = args.dims.nper;
  const int64_t nt2 = static_cast<int64_t>(nt) * nt;
  Workspace& ws = *res.workspace;
  auto call = [&](int64_t first_block, int64_t count, int64_t info_off) -> absl::Status {
    SPEXD_CUDA_RETURN_IF_ERROR(cusolverDnXsyevBatched(
        ctx.cusolver(), ctx.cusolver_params(), CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, nt,
        CUDA_R_64F, args.slots.c + first_block * nt2, nt, CUDA_R_64F,
        args.slots.evals + first_block * nt, CUDA_R_64F, ws.eigen_device(), ws.eigen_device_bytes(),
        ws.eigen_host(), ws.eigen_host_bytes(), args.slots.eig_info + info_off, count));
    return absl::OkStatus();
  };
  if (SlotsAreEntryIndices(layout)) {
    return call(0, static_cast<int64_t>(layout.entries.size()) * nper, 0);
  }
  for (std::size_t i = 0; i < layout.entries.size(); ++i) {
    absl::Status s = call(static_cast<int64_t>(layout.entries[i].slot) * nper, nper,
                          static_cast<int64_t>(i) * nper);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// Library path: X_ii = L_ii^{-1} by trsmBatched into the GEMM scratch.
absl::Status LibraryLeaves(const RunResources& res, const RunLayout& layout, const RunArgs& args,
                           cudaStream_t stream) {
  SPEXD_CUDA_RETURN_IF_ERROR(LaunchSetLeafIdentity(args, res.max_blocks, stream));
  const BatchedCall& c = layout.leaf_trsm;
  if (c.count == 0) return absl::OkStatus();
  const double one = 1.0;
  SPEXD_CUDA_RETURN_IF_ERROR(cublasDtrsmBatched(
      res.ctx->cublas(), CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT,
      c.m, c.n, &one, PtrArray<const double* const>(res.d_ptrs, c.a_off), c.lda,
      PtrArray<double* const>(res.d_ptrs, c.b_off), c.ldb, c.count));
  return absl::OkStatus();
}

// The trailing-first block inversion and the Grams (batch_layout.h).
absl::Status EnqueueTrailingInverse(const RunResources& res, const RunLayout& layout,
                                    const RunArgs& args, cudaStream_t stream) {
  absl::Status s;  // the blocks it multiplies as zeros were zeroed with the normal equations
  if (res.solver == core::CudaTriangularSolver::kCusolverBatched) {
    if (!(s = LibraryLeaves(res, layout, args, stream)).ok()) return s;
    SPEXD_CUDA_RETURN_IF_ERROR(LaunchCopyLeafBlocks(args, res.max_blocks, stream));
  } else if (res.tiled_cholesky) {
    // The factor kernel left X_ii = L_ii^{-1} on the diagonal (leaf_in_place), or in the
    // scratch, where trsm would have.
    if (!args.leaf_in_place) SPEXD_CUDA_RETURN_IF_ERROR(LaunchCopyLeafBlocks(args, res.max_blocks, stream));
  } else {
    SPEXD_CUDA_RETURN_IF_ERROR(LaunchLeafInverse(args, res.max_blocks, stream));
  }
  for (const auto& step : layout.trtri) {
    for (const BatchedCall& c : step) {
      if (!(s = GemmBatched(res.ctx->cublas(), c, res.d_ptrs)).ok()) return s;
    }
  }
  if (res.dmma_gram && args.dims.nwavetot <= kCoreGramMaxNt) {
    SPEXD_CUDA_RETURN_IF_ERROR(LaunchCoreGram(args, stream));
  } else {
    for (const BatchedCall& c : layout.gram) {
      if (!(s = GemmBatched(res.ctx->cublas(), c, res.d_ptrs)).ok()) return s;
    }
  }
  return absl::OkStatus();
}

// The selected inversion inside the band (batch_layout.h): the leaves stay in the GEMM
// scratch, where the tiled factor (or trsm) left them.
absl::Status EnqueueBandInverse(const RunResources& res, const RunLayout& layout,
                                const RunArgs& args, cudaStream_t stream) {
  if (res.solver == core::CudaTriangularSolver::kCusolverBatched) {
    absl::Status s = LibraryLeaves(res, layout, args, stream);
    if (!s.ok()) return s;
  }
  for (std::size_t r = 0; r <= layout.band_inverse.size(); ++r) {
    SPEXD_CUDA_RETURN_IF_ERROR(
        LaunchBandInversePrologue(args, static_cast<int>(r), res.max_blocks, stream));
    if (r == layout.band_inverse.size()) break;
    for (const BatchedCall& c : layout.band_inverse[r]) {
      absl::Status s = GemmBatched(res.ctx->cublas(), c, res.d_ptrs);
      if (!s.ok()) return s;
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
  SPEXD_CUDA_RETURN_IF_ERROR(res.dmma_normal_equations
                                 ? LaunchBuildNormalEquationsDmma(args, stream)
                                 : LaunchBuildNormalEquations(args, stream));
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

// Over 100 lines: the run's kernels and library calls are enqueued in stream order in one
// place, so that the order (and where each launch is checked) reads top to bottom.
absl::Status EnqueueAfterNormalEquations(const RunResources& res, const RunLayout& layout,
                                         const RunArgs& args) {
  if (args.count == 0) return absl::OkStatus();
  const GpuContext& ctx = *res.ctx;
  cudaStream_t stream = ctx.compute();
  const uint64_t* ptrs = res.d_ptrs;
  absl::Status s;
  {
    // Cholesky and solve (spec §2.9). The solve comes first: the block inversion below
    // overwrites L.
    NvtxRange range{"cholesky"};
    if (res.tiled_cholesky) {
      if (!(s = EnqueueTiledCholesky(res, layout, args, stream)).ok()) return s;
    } else {
      for (const BatchedCall& c : layout.potrf) {
        SPEXD_CUDA_RETURN_IF_ERROR(cusolverDnDpotrfBatched(
            ctx.cusolver(), CUBLAS_FILL_MODE_LOWER, c.n, PtrArray<double*>(ptrs, c.a_off), c.lda,
            args.slots.info + c.entry_begin, c.count));
      }
    }
    if (!(s = Mark(res, kMarkCholesky, stream)).ok()) return s;
  }
  {
    NvtxRange range{"solve"};
    if (res.solver == core::CudaTriangularSolver::kCusolverBatched) {
      for (const BatchedCall& c : layout.potrf) {
        // potrsBatched reports only argument errors (single int): eig_info[0] is reused for
        // it and overwritten later; a bad argument would also surface as non-finite x.
        SPEXD_CUDA_RETURN_IF_ERROR(cusolverDnDpotrsBatched(
            ctx.cusolver(), CUBLAS_FILL_MODE_LOWER, c.n, 1, PtrArray<double*>(ptrs, c.a_off), c.lda,
            PtrArray<double*>(ptrs, c.b_off), c.ldb, args.slots.eig_info, c.count));
      }
    } else if (res.tiled_cholesky) {
      SPEXD_CUDA_RETURN_IF_ERROR(LaunchBlockedCholeskySolve(args, stream));
    } else {
      SPEXD_CUDA_RETURN_IF_ERROR(LaunchCholeskySolve(args, stream));
    }
    SPEXD_CUDA_RETURN_IF_ERROR(LaunchCheckSolve(args, stream));
    if (!(s = Mark(res, kMarkSolve, stream)).ok()) return s;
  }
  {
    // C's core diagonal blocks from the factor (batch_layout.h).
    NvtxRange range{"inverse blocks"};
    if (res.band_inverse) {
      if (!(s = EnqueueBandInverse(res, layout, args, stream)).ok()) return s;
    } else {
      if (!(s = EnqueueTrailingInverse(res, layout, args, stream)).ok()) return s;
    }
    if (!(s = Mark(res, kMarkInverseBlocks, stream)).ok()) return s;
  }
  // Only the tridiagonal path leaves the compute stream (the library eigensolver is bound
  // to it).
  const cudaStream_t tail = res.eigen == core::CudaEigensolver::kSharedMemoryTridiagonalQl ? res.tail : stream;
  {
    // Q = C_ss^{-1/2}, R, flux, ivar, Rdiags (spec §2.10).
    NvtxRange range{"inverse sqrt and decorrelation"};
    if (res.eigen == core::CudaEigensolver::kCusolverSyevBatched) {
      if (!(s = LibraryEigen(res, layout, args)).ok()) return s;
      SPEXD_CUDA_RETURN_IF_ERROR(LaunchDecorrelate(args, /*from_eigenvectors=*/1, stream));
    } else if (res.eigen == core::CudaEigensolver::kSharedMemoryTridiagonalQl) {
      if (!(s = EnqueueTridiag(res, args, stream)).ok()) return s;
    } else {
      SPEXD_CUDA_RETURN_IF_ERROR(LaunchDecorrelate(args, /*from_eigenvectors=*/0, stream));
    }
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

absl::Status QueryLibraryEigenScratch(const GpuContext& ctx, int nt, int batch, double* a,
                                      double* w, std::size_t* device_bytes,
                                      std::size_t* host_bytes) {
  SPEXD_CUDA_RETURN_IF_ERROR(cusolverDnXsyevBatched_bufferSize(
      ctx.cusolver(), ctx.cusolver_params(), CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, nt,
      CUDA_R_64F, a, nt, CUDA_R_64F, w, CUDA_R_64F, device_bytes, host_bytes, batch));
  return absl::OkStatus();
}

}  // namespace spexd::cuda
