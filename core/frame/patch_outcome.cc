#include "core/frame/patch_outcome.h"

#include <cstddef>
#include <cstring>

#include "core/base/float_convert.h"

namespace spexd::core {

void CountOutcome(PatchOutcome outcome, PatchCounts* counts) {
  switch (outcome) {
    case PatchOutcome::kExtracted: ++counts->extracted; break;
    case PatchOutcome::kRetried: ++counts->extracted; ++counts->retried; break;
    case PatchOutcome::kFailed: ++counts->failed; break;
    case PatchOutcome::kSkipped: ++counts->skipped; break;
  }
}

void RecordPatchOutcome(const PatchPlan& plan, int patch, PatchOutcome outcome, double condition,
                        BundleResult* bundle) {
  CountOutcome(outcome, &bundle->counts);
  const int first = plan.bundle_first_patch[bundle->bundle];
  const std::size_t npatches =
      static_cast<std::size_t>(plan.bundle_first_patch[bundle->bundle + 1] - first);
  if (bundle->patch_condition.size() != npatches) bundle->patch_condition.assign(npatches, 0.0);
  const bool solved = outcome == PatchOutcome::kExtracted || outcome == PatchOutcome::kRetried;
  bundle->patch_condition[static_cast<std::size_t>(patch - first)] = solved ? condition : 0.0;
}

void MarkPatchFailed(const PatchPlan& plan, const PatchDesc& d, BundleResult* bundle) {
  const int nk = 2 * plan.ndiag + 1, nwave = bundle->nwave;
  for (int s = 0; s < plan.nper; ++s) {
    const std::size_t row = static_cast<std::size_t>(d.out_row - d.bundle * plan.bundlesize + s);
    for (int w = 0; w < d.nkeep; ++w) {
      const std::size_t i = row * nwave + d.out_col + w;
      bundle->flux[i] = bundle->ivar[i] = bundle->pixmask_fraction[i] = bundle->chi2pix[i] = 0.0;
      bundle->failed_bins[i] = 1;
      for (int k = 0; k < nk; ++k) {
        const std::size_t j = (row * nk + static_cast<std::size_t>(k)) * nwave + d.out_col + w;
        if (bundle->rdiags.empty()) {  // narrowed already: 0.0 is four zero bytes
          const bool file = !bundle->rdiags_file.empty();
          char* word = (file ? bundle->rdiags_file : bundle->rdiags_f32).data() + 4 * j;
          if (file && bundle->rdiags_file_word_sum) {
            *bundle->rdiags_file_word_sum -= BigEndianWordSum(word, 4);
          }
          std::memset(word, 0, 4);
        } else {
          bundle->rdiags[j] = 0.0;
        }
      }
    }
  }
}

}  // namespace spexd::core
