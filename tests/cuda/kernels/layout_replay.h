// Host replay of the batched-call layout of cuda/kernels/batch_layout.cc: the workspace buffers
// live in host memory (the layout's pointers are host addresses), the library calls are
// naive loops and the kernels are serial host versions doing the same arithmetic per
// element in the same order. Used by batch_layout_test.cc (no GPU needed).
#ifndef SPEXD_TESTS_CUDA_LAYOUT_REPLAY_H_
#define SPEXD_TESTS_CUDA_LAYOUT_REPLAY_H_

#include <cstdint>
#include <vector>

#include "core/plan/patch_plan.h"
#include "cuda/kernels/batch_layout.h"

namespace spexd::cuda::testing {

// Six patches of 3 or 4 blocks of nt = 4 (first, middle and last sub-bundle shapes of spec
// §2.5, twice), one skipped.
core::PatchPlan SmallPlan();

// Entry b's A, B, C addresses as GemmBatched launches them: from the call's strided runs
// when it has them, else from its pointer arrays.
struct Operands {
  uint64_t a, b, c;
};
Operands EntryOperands(const BatchedCall& c, const std::vector<uint64_t>& ptrs, int b);

// C = alpha op(A) op(B) + beta C, column-major, for every entry of the call (EntryOperands).
void NaiveGemm(const BatchedCall& c, const std::vector<uint64_t>& ptrs);

struct Replay {
  explicit Replay(core::PatchPlan p, LayoutChoices choices);
  // Fills each entry's lower triangle with a random SPD matrix (NaN above the diagonal:
  // nothing may read it, but for the zeros the normal-equations kernel writes there for
  // the trailing-first inversion) and keeps the matrix and its inverse as references.
  void FillSpd(uint64_t seed);
  // With nan_past_band, FillSpd leaves the blocks more than max(band, 1) below the
  // diagonal NaN instead of zero, as BuildNormalEquationsKernel does: the tiled factor and
  // the trailing inversion must read none of them.
  bool nan_past_band = false;
  // LayoutChoices::panel_p: the panel leaves P_k in the scratch and trtri has no gemm 1.
  bool PanelP() const { return choices.panel_p; }
  // Unblocked potrf in place (the reference factor).
  void HostPotrf();
  // The tiled path: chol_update GEMMs, TileFactorKernel and PanelSolveKernel on the host.
  // The factor writes the leaves X_kk = L_kk^{-1} the trailing inversion needs over L_kk
  // on M's diagonal (then Factor's diagonal blocks hold them: IsLeafInPlace), the others
  // to the scratch.
  void TiledCholesky();
  bool IsLeafInPlace(const RunEntry& e, int k) const;
  // Block inversion after the tiled factor: the trtri and Gram GEMMs.
  void InvertBlocks();
  // Lower triangle of the factor of slot `slot` (column-major n x n, zeros above).
  std::vector<double> Factor(int slot) const;

  core::PatchPlan plan;
  LayoutChoices choices;
  int nt = 0, ld = 0, nb = 0, nslots = 0;
  int64_t t_stride = 0, p_base = 0;
  int p_band = 0;
  std::vector<double> m, x, t, c;
  RunLayout layout;
  std::vector<std::vector<double>> spd, inverse;  // by slot, n x n
};

}  // namespace spexd::cuda::testing

#endif  // SPEXD_TESTS_CUDA_LAYOUT_REPLAY_H_
