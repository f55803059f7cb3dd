// Patches extracted in groups (PatchExtractor::ExtractGroup): the same stages as Extract,
// with the eigen-decompositions of every patch's core blocks (spec §2.10 step 2) done
// together, four or eight blocks to a group of SIMD lanes (lane_eigen.h). One patch alone
// (five blocks) needs two groups of four, the second with one lane busy: a group costs
// the same whatever its lanes hold, so eight patches take ten groups instead of sixteen
// (five of eight lanes). Each lane's arithmetic is its own, so a block's decomposition
// does not depend on which blocks share its group: the same bits as Extract.
#include <algorithm>

#include "core/cpu/internal/patch_extractor.h"
#include "core/cpu/internal/step_timer.h"

namespace spexd::core {

void PatchExtractor::ExtractGroup(const PatchDesc* patches, int count, const Spots& spots,
                                  const ImagePlanes& planes, PatchWorkspace* ws,
                                  BundleResult* bundle, PatchOutcome* outcomes,
                                  double* conditions, std::vector<double>* models) const {
  using internal::StepTimer;
  const int nt = plan_.nwavetot, nper = plan_.nper;
  const std::size_t max_n = static_cast<std::size_t>(plan_.max_n);
  const std::size_t block = static_cast<std::size_t>(nt) * nt;
  ws->group_x.resize(kGroup * max_n);
  ws->group_pixel.resize(3 * kGroup * max_n);
  ws->group_blocks.resize(kGroup * nper * block);
  ws->group_vals.resize(kGroup * nper * static_cast<std::size_t>(nt));
  ws->group_vecs.resize(kGroup * nper * block);
  ws->group_ok.resize(kGroup * nper);
  auto x_of = [&](int i) { return ws->group_x.data() + i * max_n; };
  auto pixel_of = [&](int i, int which) {
    return ws->group_pixel.data() + (static_cast<std::size_t>(i) * 3 + which) * max_n;
  };
  auto model_of = [&](int i) { return models != nullptr ? &models[i] : nullptr; };
  // The patches that reach their core blocks, in order; the blocks of the j-th of them
  // are j * nper .. j * nper + nper - 1 of the group's block arrays.
  int reached[kGroup];
  int nreached = 0;

  // Phase 1, patch by patch: normal equations to C's core blocks, and the pixel products
  // of x, which need the patch's window and sparse A (reused by the next patch).
  for (int i = 0; i < count; ++i) {
    const PatchDesc& d = patches[i];
    outcomes[i] = PatchOutcome::kSkipped;
    conditions[i] = 0.0;
    if (d.skipped != kSkipNone) continue;
    StepTimer timer;
    BuildSparseA(d, spots, ws);
    GatherWindow(d, planes, ws);
    timer.Lap(&ws->steps_.projection);
    const bool solved = SolveToCoreBlocks(d, options_.regularize, ws);
    conditions[i] = ws->condition();
    if (!solved) {
      outcomes[i] = Extract(d, spots, planes, ws, bundle, model_of(i));
      conditions[i] = ws->condition();
      continue;
    }
    StepTimer copy_timer;
    std::copy(ws->x.begin(), ws->x.begin() + d.n, x_of(i));
    for (int k = 0; k < nper; ++k) {
      CopyLowerTriangle(CoreBlock(d, k, *ws), d.n, nt,
                        ws->group_blocks.data() + static_cast<std::size_t>(nreached * nper + k) * block);
    }
    copy_timer.Lap(&ws->steps_.decorrelate);
    PixelOutputs(d, x_of(i), *ws, pixel_of(i, 0), pixel_of(i, 1), pixel_of(i, 2));
    copy_timer.Lap(&ws->steps_.outputs);
    reached[nreached++] = i;
  }

  // Phase 2: the blocks of every patch that reached them, together (DecomposeBlocks: a
  // group of lanes at a time, the last group partial, as for one patch).
  StepTimer timer;
  const BlockSet blocks{ws->group_blocks.data(), block, nt, ws->group_vals.data(),
                        ws->group_vecs.data()};
  DecomposeBlocks(nreached * nper, blocks, ws, ws->group_ok.data());
  timer.Lap(&ws->steps_.decorrelate);

  // Phase 3, patch by patch: decorrelation and the bundle's columns.
  for (int j = 0; j < nreached; ++j) {
    const int i = reached[j];
    const PatchDesc& d = patches[i];
    const std::size_t b0 = static_cast<std::size_t>(j) * nper;
    StepTimer step;
    bool good = std::all_of(ws->group_ok.begin() + b0, ws->group_ok.begin() + b0 + nper,
                            [](char ok) { return ok != 0; });
    if (good) {
      DecorrelateCore(d, blocks.vals + b0 * nt, blocks.vecs + b0 * block, x_of(i), ws);
      good = KeptOutputsFinite(d, *ws);
    }
    step.Lap(&ws->steps_.decorrelate);
    if (!good) {
      outcomes[i] = Extract(d, spots, planes, ws, bundle, model_of(i));
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
