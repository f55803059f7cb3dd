// Patches extracted in groups (PatchExtractor::ExtractGroup): the same stages as Extract,
// with the eigen-decompositions of every patch's core blocks (spec §2.10 step 2) done
// together, four blocks to a group of SIMD lanes (lane_eigen.h). One patch alone (five
// blocks) needs two groups, the second with one lane busy: a group costs the same
// whatever its lanes hold, so four patches take five groups instead of eight. Each
// lane's arithmetic is its own, so a block's decomposition does not depend on which
// blocks share its group: the same bits as Extract.
#include <algorithm>
#include <vector>

#include "core/cpu/internal/patch_extractor.h"
#include "core/cpu/internal/step_timer.h"

namespace spexd::core {

void PatchExtractor::ExtractGroup(const PatchDesc* const* patches, int count, const Spots& spots,
                                  const ImagePlanes& planes, PatchWorkspace* ws,
                                  BundleResult* bundle, PatchOutcome* outcomes,
                                  double* conditions, std::vector<double>* models) const {
  using internal::LaneEigen;
  using internal::StepTimer;
  const std::size_t nt = static_cast<std::size_t>(plan_.nwavetot);
  const std::size_t nper = static_cast<std::size_t>(plan_.nper);
  const std::size_t max_n = static_cast<std::size_t>(plan_.max_n);
  const std::size_t block = nt * nt;
  ws->group_x.resize(kGroup * max_n);
  ws->group_pixel.resize(3 * kGroup * max_n);
  ws->group_blocks.resize(kGroup * nper * block);
  ws->group_vals.resize(kGroup * nper * nt);
  ws->group_vecs.resize(kGroup * nper * block);
  auto x_of = [&](int i) { return ws->group_x.data() + i * max_n; };
  auto pixel_of = [&](int i, int which) {
    return ws->group_pixel.data() + (static_cast<std::size_t>(i) * 3 + which) * max_n;
  };
  // Blocks are numbered i * nper + k (patch i, core spectrum k).
  auto block_of = [&](std::size_t b) { return ws->group_blocks.data() + b * block; };
  auto vals_of = [&](std::size_t b) { return ws->group_vals.data() + b * nt; };
  auto vecs_of = [&](std::size_t b) { return ws->group_vecs.data() + b * block; };

  // Phase 1, patch by patch: normal equations to C's core blocks, and the pixel products
  // of x, which need the patch's window and sparse A (reused by the next patch).
  bool pending[kGroup] = {};
  for (int i = 0; i < count; ++i) {
    const PatchDesc& d = *patches[i];
    outcomes[i] = PatchOutcome::kSkipped;
    conditions[i] = 0.0;
    if (d.skipped != kSkipNone) continue;
    StepTimer timer;
    BuildSparseA(d, spots, ws);
    GatherWindow(d, planes, ws);
    timer.Lap(&ws->steps_.projection);
    if (!SolveToCoreBlocks(d, options_.regularize, ws)) {
      outcomes[i] = Extract(d, spots, planes, ws, bundle, models != nullptr ? &models[i] : nullptr);
      conditions[i] = ws->condition();
      continue;
    }
    conditions[i] = ws->condition();
    StepTimer copy_timer;
    std::copy(ws->x.begin(), ws->x.begin() + d.n, x_of(i));
    for (std::size_t k = 0; k < nper; ++k) {
      // C_ss's lower triangle (leading dimension n) into a compact block.
      const double* css = ws->cfull.data() + (d.core_row + k) * nt * (d.n + 1);
      double* dst = block_of(i * nper + k);
      for (std::size_t j = 0; j < nt; ++j) {
        std::copy(css + j * d.n + j, css + j * d.n + nt, dst + j * nt + j);
      }
    }
    copy_timer.Lap(&ws->steps_.decorrelate);
    PixelOutputs(d, x_of(i), ws, pixel_of(i, 0), pixel_of(i, 1), pixel_of(i, 2));
    copy_timer.Lap(&ws->steps_.outputs);
    pending[i] = true;
  }

  // Phase 2: every pending patch's blocks, four to a group of lanes (the last group
  // partial, as in DecomposeCoreBlocks); a lane that does not converge by dsyevd.
  StepTimer timer;
  std::vector<std::size_t> ids;
  for (int i = 0; i < count; ++i) {
    if (!pending[i]) continue;
    for (std::size_t k = 0; k < nper; ++k) ids.push_back(i * nper + k);
  }
  const std::size_t nblocks = ids.size();
  bool decomposed[kGroup] = {};
  for (int i = 0; i < count; ++i) decomposed[i] = pending[i];
  constexpr int L = LaneEigen::kLanes;
  for (std::size_t g = 0; g < nblocks; g += L) {
    const int lanes = static_cast<int>(std::min<std::size_t>(L, nblocks - g));
    const double* src[L];
    for (int l = 0; l < lanes; ++l) src[l] = block_of(ids[g + l]);
    ws->lanes->Load(src, static_cast<int>(nt), lanes);
    const unsigned ok = ws->lanes->Decompose();
    for (int l = 0; l < lanes; ++l) {
      const std::size_t b = ids[g + l];
      if (ok & (1u << l)) {
        ws->lanes->Export(l, vals_of(b), vecs_of(b));
      } else if (!DecomposeWithLapack(block_of(b), static_cast<int>(nt), vals_of(b), vecs_of(b), ws)) {
        decomposed[b / nper] = false;
      }
    }
  }
  timer.Lap(&ws->steps_.decorrelate);

  // Phase 3, patch by patch: decorrelation and the bundle's columns.
  for (int i = 0; i < count; ++i) {
    if (!pending[i]) continue;
    const PatchDesc& d = *patches[i];
    StepTimer step;
    bool ok = decomposed[i];
    if (ok) {
      DecorrelateCore(d, vals_of(i * nper), vecs_of(i * nper), x_of(i), ws);
      ok = KeptOutputsFinite(d, *ws);
    }
    step.Lap(&ws->steps_.decorrelate);
    if (!ok) {
      outcomes[i] = Extract(d, spots, planes, ws, bundle, models != nullptr ? &models[i] : nullptr);
      conditions[i] = ws->condition();
      continue;
    }
    FillBundle(d, *ws, pixel_of(i, 0), pixel_of(i, 1), pixel_of(i, 2), bundle);
    if (models != nullptr) {
      // Sparse A again: phase 1 reused its buffers for the next patch.
      BuildSparseA(d, spots, ws);
      ModelWindow(d, ws, &models[i]);
    }
    step.Lap(&ws->steps_.outputs);
    outcomes[i] = PatchOutcome::kExtracted;
  }
}

}  // namespace spexd::core
