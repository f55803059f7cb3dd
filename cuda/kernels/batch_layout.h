// Host-side layout of one run of patches through the batched dense algebra: run entries
// (patch -> workspace slot), and the pointer arrays and shapes of every batched cuBLAS
// call. Pure C++ on integer addresses, so the index arithmetic is unit-tested on
// the host (tests/cuda/kernels/batch_layout_test.cc replays the calls with a naive GEMM).
//
// Algorithm (extraction-spec §2.9–2.10, "Decisions": C's diagonal blocks may come from
// the Cholesky factor). Unknowns are blocked by spectrum (nt = nwavetot per block,
// nb = nspectot blocks, core blocks [c0, c0+nper)). After M = L L^T:
//   * leaf: X_ii = L_ii^{-1} for i >= c0 (the tiled factor);
//   * trailing-first block inversion in place, for j = nb-2 .. c0 (step r = nb-1-j), with
//     b = min(B, r) (L is zero more than B blocks down):
//       P = L[j+1:j+1+b, j] · X_jj                (gemm 1 into the scratch, m = b·nt)
//       X[j+1:, j] = -X[j+1:, j+1:j+1+b] · P      (gemm 2, m = r·nt, k = b·nt; overwrites
//                                                  L's column block j)
//     X[j+1:, j+1:] is lower triangular; the blocks above its diagonal (NeedsZeroBlock)
//     are zeroed by the normal-equations kernel, which writes those columns anyway;
//   * C_jj = X[j:, j]^T X[j:, j] for the core blocks (gemm with A transposed), since
//     C = M^{-1} = X^T X with X = L^{-1}.
#ifndef SPEXD_CUDA_BATCH_LAYOUT_H_
#define SPEXD_CUDA_BATCH_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "cuda/kernels/device_types.h"
#include "core/numerics/host_device.h"
#include "core/numerics/patch_numerics.h"

namespace spexd::core {
struct PatchPlan;
}

namespace spexd::cuda {

// Which diagonal blocks get a leaf inverse, and which blocks above the diagonal of the
// trailing part must be zero (shared by the kernels and the host replay test).
SPEXD_HD bool NeedsLeafInverse(int i, int core_row, int nspectot) {
  return i >= core_row && i < nspectot;
}
SPEXD_HD bool NeedsZeroBlock(int i, int k, int core_row, int nspectot) {
  return i > core_row && i < k && k < nspectot;
}

// Blocks below the diagonal of M that the trailing-first inversion reads in a column of L
// (its first GEMM takes at least L[j+1, j], even where nothing couples): the normal
// equations write M that far, and the GEMMs stay inside it.
SPEXD_HD int TrailingReadBand(int band) { return band > 1 ? band : 1; }

// LayoutChoices::panel_p: the panel kernel of Cholesky step j leaves gemm 1's product
// P_j = L[j+1:j+1+b, j] X_jj (b = min(TrailingReadBand(band), nspectot - 1 - j) blocks of
// rows, leading dimension b nt) for every j the trailing-first inversion takes
// (core_row <= j <= nspectot - 2), in the slot's GEMM scratch past its nb leaf blocks:
// p_band = the plan's largest TrailingReadBand, blocks of p_band nt^2 doubles per j
// (nb - 1 of them: WorkspaceSpec::t_stride).
SPEXD_HD bool NeedsPanelP(int j, int core_row, int nspectot) { return j >= core_row && j + 2 <= nspectot; }
SPEXD_HD int PanelPBlocks(int j, int band, int nspectot) {
  const int r = nspectot - 1 - j;
  return TrailingReadBand(band) < r ? TrailingReadBand(band) : r;
}
SPEXD_HD int64_t PanelPOffset(int j, int64_t p_base, int p_band, int nt) {
  return p_base + static_cast<int64_t>(j) * p_band * nt * nt;
}
// A slot's GEMM scratch in doubles: nb leaf blocks (p_base = nb nt^2), then the P_j of
// j <= nb - 2 (p_band 0 without panel_p).
SPEXD_HD int64_t ScratchStride(int nb, int nt, int p_band) {
  return static_cast<int64_t>(nt) * nt * (nb + static_cast<int64_t>(p_band) * (nb > 1 ? nb - 1 : 0));
}

// Base addresses (as integers) and strides of one workspace set.
struct SlotAddresses {
  uint64_t m = 0, x = 0, t = 0, c = 0;  // doubles
  int64_t ld = 0, t_stride = 0;
  int64_t p_base = 0;  // LayoutChoices::panel_p: where the P_j start in a slot's scratch
  int p_band = 0;      // and the blocks of rows each may have (PanelPOffset)
};

// Entries of a call whose A, B and C addresses each step by one stride: one strided
// batched GEMM (strides in doubles). A whole run of workspace slots gives one such run per
// call; cuBLAS's strided batched DGEMMs of these shapes took 0.77x the time of the same
// calls through pointer arrays (H200).
struct StridedRun {
  uint64_t a = 0, b = 0, c = 0;  // first entry's addresses
  int64_t sa = 0, sb = 0, sc = 0;
  int first = 0, count = 0;  // entries [first, first + count) of the call
};

struct BatchedCall {
  int m = 0, n = 0, k = 0;
  int lda = 0, ldb = 0, ldc = 0;
  int transa = 0;  // 1: op(A) = A^T
  int transb = 0;  // 1: op(B) = B^T
  double alpha = 1.0, beta = 0.0;
  int64_t a_off = 0, b_off = 0, c_off = 0;  // offsets into RunLayout::ptrs
  int count = 0;
  std::vector<StridedRun> strided;  // the GEMM calls' entries as strided runs, in order
};

// The calls' entries cut into maximal strided runs (at most `max_runs`; else `strided`
// stays empty and the call goes through its pointer arrays).
void SplitStrided(const std::vector<uint64_t>& ptrs, BatchedCall* call, int max_runs);

struct RunLayout {
  std::vector<RunEntry> entries;               // sorted by n
  // Tiled Cholesky (tiled_cholesky.h), step 1 for k = 1..: M[k:, k] -= L[k:, :k] L[k, :k]^T
  // over the blocks inside each entry's band only (rows k + 1.. alone with
  // LayoutChoices::diag_update_in_factor). chol_update[k - 1] holds step k's calls.
  std::vector<std::vector<BatchedCall>> chol_update;
  std::vector<std::vector<BatchedCall>> trtri; // per step r = 1..: {gemm 1 per b, gemm 2 per b}
  std::vector<BatchedCall> gram;               // one per distinct k
  std::vector<uint64_t> ptrs;                  // all pointer arrays, back to back
};

// Entries of the non-skipped patches of `bundles` (plan indices), with bundle positions
// in the order given, sorted by (n, core_row, patch), and slot = position.
std::vector<RunEntry> MakeBatchEntries(const core::PatchPlan& plan, const std::vector<int>& bundles,
                                       double regularize);

// Which calls a run needs besides the tiled Cholesky's updates and the block inversion.
struct LayoutChoices {
  // The trailing-first inversion's gemm 1 done by the tiled Cholesky's panel kernel
  // (NeedsPanelP): trtri has gemm 2 only, which reads P_j from the scratch (PanelPOffset)
  // (BatchExtractor::PanelP).
  bool panel_p = false;
  // The tiled Cholesky's diagonal block updates done by its factor kernel
  // (RunArgs::diag_update): chol_update takes the rows below the diagonal block only.
  bool diag_update_in_factor = false;
  // The updates of the rows below the diagonal block done by the DMMA panel kernel before
  // its solve (RunArgs::panel_update): chol_update takes the diagonal block only (with
  // diag_update_in_factor, nothing).
  bool panel_update = false;
};

// Layout of a run over `entries` (any slots; re-sorted by n, stably).
RunLayout BuildRunLayout(const core::PatchPlan& plan, std::vector<RunEntry> entries,
                         const SlotAddresses& slots, LayoutChoices choices);

// Upper bound of RunLayout::ptrs.size() for `count` entries.
std::size_t MaxPointerCount(const core::PatchPlan& plan, int count);

// Number of spectrum blocks of the largest patch (ld / nwavetot).
int MaxBlocks(const core::PatchPlan& plan);
// A patch's coupled band as its run entries carry it (RunEntry::band; the whole patch where
// the plan has no coupled_band), and the largest TrailingReadBand of the plan's patches
// (the P_j's blocks of rows in the scratch, LayoutChoices::panel_p).
int EntryBand(const core::PatchPlan& plan, int p);
int PanelPBand(const core::PatchPlan& plan);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_BATCH_LAYOUT_H_
