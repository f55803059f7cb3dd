// The decorrelation's eigen-decompositions of a patch's core blocks C_ss (spec §2.10 step
// 2). Four or eight blocks at a time in SIMD lanes (lane_eigen.h): fewer flops than dsyevd per
// block, and no OpenBLAS call, whose buffer lock serialises many threads calling it at
// once (the CPU frame stopped scaling past 8 cores on the GPU host).
// Any lane that does not converge goes to dsyevd.
// Eigenvector order and signs do not matter: only V f(w) V^T is used (spec §2.10).
#include <algorithm>

#include "core/cpu/internal/lapack.h"
#include "core/cpu/internal/patch_extractor.h"

namespace spexd::core {
namespace {

constexpr std::size_t kOne = 1;  // Fortran hidden length of a one-character argument

}  // namespace

void PatchExtractor::CopyLowerTriangle(const double* lower, int ld, int nt, double* dst) {
  for (int j = 0; j < nt; ++j) {
    const double* col = lower + static_cast<std::size_t>(j) * ld;
    std::copy(col + j, col + nt, dst + static_cast<std::size_t>(j) * nt + j);
  }
}

const double* PatchExtractor::CoreBlock(const PatchDesc& d, int k, const PatchWorkspace& ws) const {
  const std::size_t nt = static_cast<std::size_t>(plan_.nwavetot);
  return ws.cfull.data() + static_cast<std::size_t>(d.core_row + k) * nt * (static_cast<std::size_t>(d.n) + 1);
}

bool PatchExtractor::DecomposeWithLapack(const double* lower, int ld, double* vals, double* vecs,
                                         PatchWorkspace* ws) const {
  int nt = plan_.nwavetot;
  CopyLowerTriangle(lower, ld, nt, vecs);
  int info = 0;
  int lwork = static_cast<int>(ws->lapack_work.size());
  int liwork = static_cast<int>(ws->lapack_iwork.size());
  dsyevd_("V", "L", &nt, vecs, &nt, vals, ws->lapack_work.data(), &lwork,
          ws->lapack_iwork.data(), &liwork, &info, kOne, kOne);
  return info == 0;
}

// A block whose condition (from the lanes' eigenvalues) exceeds kRelativeEigenCondition
// is decomposed again by the relative-accuracy path (relative_eigen.h), which replaces the
// lanes' result where it succeeds.
void PatchExtractor::RefineIfIllConditioned(const double* lower, int ld, double* vals, double* vecs,
                                            PatchWorkspace* ws) const {
  const int nt = plan_.nwavetot;
  const auto [lo, hi] = std::minmax_element(vals, vals + nt);
  if (*lo > 0.0 && *hi <= internal::kRelativeEigenCondition * *lo) return;
  ws->relative->Decompose(lower, ld, vals, vecs);  // writes nothing where it declines
}

bool PatchExtractor::DecomposeBlocks(int count, const BlockSet& blocks, PatchWorkspace* ws,
                                     char* ok) const {
  using internal::LaneEigen;
  const std::size_t nt = static_cast<std::size_t>(plan_.nwavetot);
  auto lower = [&](int b) { return blocks.lower + static_cast<std::size_t>(b) * blocks.lower_stride; };
  auto vals = [&](int b) { return blocks.vals + static_cast<std::size_t>(b) * nt; };
  auto vecs = [&](int b) { return blocks.vecs + static_cast<std::size_t>(b) * nt * nt; };
  bool all = true;
  auto lapack = [&](int b) {
    const bool done = DecomposeWithLapack(lower(b), blocks.ld, vals(b), vecs(b), ws);
    if (ok != nullptr) ok[b] = done ? 1 : 0;
    all = all && done;
  };
  // A last partial group in lanes too (it costs as much as a whole one): every block by the
  // same solver, so a patch's bits do not depend on the blocks beside it.
  const int width = ws->lanes->lanes();
  for (int k = 0; k < count; k += width) {
    const int lanes = std::min(width, count - k);
    const double* src[LaneEigen::kMaxLanes];
    for (int l = 0; l < lanes; ++l) src[l] = lower(k + l);
    ws->lanes->Load(src, blocks.ld, lanes);
    const unsigned converged = ws->lanes->Decompose();
    for (int l = 0; l < lanes; ++l) {
      if (converged & (1u << l)) {
        ws->lanes->Export(l, vals(k + l), vecs(k + l));
        if (ok != nullptr) ok[k + l] = 1;
        RefineIfIllConditioned(lower(k + l), blocks.ld, vals(k + l), vecs(k + l), ws);
      } else {
        lapack(k + l);
      }
    }
  }
  return all;
}

bool PatchExtractor::DecomposeCoreBlocks(const PatchDesc& d, PatchWorkspace* ws) const {
  // C's core blocks lie down its diagonal, nwavetot * (n + 1) apart (leading dimension n).
  const std::size_t nt = static_cast<std::size_t>(plan_.nwavetot);
  const BlockSet blocks{CoreBlock(d, 0, *ws), nt * (static_cast<std::size_t>(d.n) + 1), d.n,
                        ws->block_vals.data(), ws->block_vecs.data()};
  return DecomposeBlocks(plan_.nper, blocks, ws, nullptr);
}

}  // namespace spexd::core
