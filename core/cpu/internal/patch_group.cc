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

  // Phase 2: every pending patch's blocks together (DecomposeBlocks: four to a group of
  // lanes, the last group partial, as for one patch).
  StepTimer timer;
  std::vector<const double*> lower;
  std::vector<double*> vals, vecs;
  for (int i = 0; i < count; ++i) {
    if (!pending[i]) continue;
    for (std::size_t k = 0; k < nper; ++k) {
      const std::size_t b = i * nper + k;
      lower.push_back(block_of(b));
      vals.push_back(vals_of(b));
      vecs.push_back(vecs_of(b));
    }
  }
  std::vector<char> ok(lower.size());
  DecomposeBlocks(static_cast<int>(lower.size()), lower.data(), static_cast<int>(nt), vals.data(),
                  vecs.data(), ws, ok.data());
  bool decomposed[kGroup] = {};
  for (int i = 0, b = 0; i < count; ++i) {
    if (!pending[i]) continue;
    decomposed[i] = true;
    for (std::size_t k = 0; k < nper; ++k) decomposed[i] = decomposed[i] && ok[b++] != 0;
  }
  timer.Lap(&ws->steps_.decorrelate);

  // Phase 3, patch by patch: decorrelation and the bundle's columns.
  for (int i = 0; i < count; ++i) {
    if (!pending[i]) continue;
    const PatchDesc& d = *patches[i];
    StepTimer step;
    bool good = decomposed[i];
    if (good) {
      DecorrelateCore(d, vals_of(i * nper), vecs_of(i * nper), x_of(i), ws);
      good = KeptOutputsFinite(d, *ws);
    }
    step.Lap(&ws->steps_.decorrelate);
    if (!good) {
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
