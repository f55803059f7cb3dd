// What happened to one patch, and the bookkeeping both backends do for it
// (extraction-spec §2.12, §2.15 and the "Decisions" NaN retry rule).
#ifndef SPEXD_CORE_PATCH_OUTCOME_H_
#define SPEXD_CORE_PATCH_OUTCOME_H_

#include "core/frame/extraction_result.h"
#include "core/plan/patch_plan.h"

namespace spexd::core {

enum class PatchOutcome {
  kExtracted,  // solved at the request's regularisation
  kRetried,    // solved at kRetryRegularize after the first attempt failed
  kFailed,     // failed even after the retry (or the request's regularisation was set)
  kSkipped,    // window leaves the CCD (PatchDesc::skipped)
};

// Adds one patch outcome to the counters (a retried patch counts as extracted too).
void CountOutcome(PatchOutcome outcome, PatchCounts* counts);

// The bookkeeping both backends do for patch `patch` (plan index) of `bundle`: counts the
// outcome (CountOutcome) and records the condition estimate of its kept solve in
// bundle->patch_condition (0 unless extracted or retried). Not thread-safe per bundle:
// call it from one thread once the patches are done.
void RecordPatchOutcome(const PatchPlan& plan, int patch, PatchOutcome outcome, double condition,
                        BundleResult* bundle);

// A failed patch: its kept core bins get zero outputs (flux, ivar, pixmask fraction,
// chi2pix, resolution) and the failed flag that becomes BAD2DFIT. `bundle` is the
// BundleResult of the patch's bundle.
void MarkPatchFailed(const PatchPlan& plan, const PatchDesc& patch, BundleResult* bundle);

}  // namespace spexd::core

#endif  // SPEXD_CORE_PATCH_OUTCOME_H_
