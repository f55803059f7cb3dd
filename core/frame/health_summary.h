// Numerical health of one extraction (issue 23): what the solves and the outputs say
// about how far the numbers can be trusted, gathered bundle by bundle as they are
// served. The bookkeeping both backends share (patch outcomes and per-patch condition
// estimates) comes in the BundleResults (core/frame/patch_outcome.h); this adds it up.
#ifndef SPEXD_CORE_HEALTH_SUMMARY_H_
#define SPEXD_CORE_HEALTH_SUMMARY_H_

#include <cstdint>
#include <vector>

#include "core/frame/extraction_result.h"
#include "core/frame/frame.h"

namespace spexd::core {

struct FrameHealth {
  PatchCounts counts;
  // Largest Cholesky condition estimate over the solved patches (CholeskyConditionEstimate),
  // and the bundle it came from (-1 when no patch was solved).
  double worst_condition = 0;
  int worst_condition_bundle = -1;
  // Bins (fibre x wavelength) with each specmask bit (spec §2.13, ComputeSpecMask).
  int64_t bins = 0;
  int64_t somebadpix = 0, allbadpix = 0, bad2dfit = 0;
  // Median chi2pix over the bins with ivar > 0 (0 when there are none): ~1 for a good
  // fit (spec §2.11).
  double median_chi2pix = 0;
};

// Adds up bundles (in the order they are served) into a FrameHealth. Keeps what the
// frame-wide BAD2DFIT rule needs (chi2pix, pixmask_fraction, failed bins: ~40 MB for a
// full r frame) unless the caller passes the assembled frame to Finish.
class HealthAccumulator {
 public:
  // keep_arrays = false when the caller will pass Finish an assembled frame.
  explicit HealthAccumulator(bool keep_arrays) : keep_arrays_(keep_arrays) {}
  void Add(const BundleResult& bundle);
  // The frame's health. `assembled`: the frame assembled from the same bundles (its mask
  // computed), or null to compute the specmask here from the kept arrays.
  FrameHealth Finish(const Frame* assembled);

 private:
  bool keep_arrays_;
  FrameHealth health_;
  int nwave_ = 0, nspec_ = 0;
  std::vector<double> chi2pix_, pixmask_, good_chi2_;
  std::vector<uint8_t> failed_;
};

// Counts the specmask bits of a frame whose mask is computed into `health`.
void CountMaskBits(const Frame& frame, FrameHealth* health);

}  // namespace spexd::core

#endif  // SPEXD_CORE_HEALTH_SUMMARY_H_
