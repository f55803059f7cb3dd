// Numerical health of one extraction: what the solves and the outputs say
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

// Adds up bundles (in the order they are served) into a FrameHealth.
//
// Add counts the patches and builds the median chi2pix's histogram (MedianWhere's first
// pass) bundle by bundle, as they stream. Two ways to finish, chosen at construction:
// * with the assembled frame (Finish(&frame)): the mask counts and the median's second
//   pass read the frame's arrays in place; Add keeps no array.
// * without one (a frame streamed to the client, never assembled on the server): the
//   frame-wide BAD2DFIT rule (spec §2.13: chi2pix against its wavelength's median over all
//   fibres) needs every chi2pix of the frame, so Add keeps that one array (8 bytes a bin,
//   ~9 MB for an r frame) plus a flag byte a bin; the local bits (SOMEBADPIX, ALLBADPIX,
//   failed patches) and each fibre's median are settled in Add.
// Either way the counts equal those of ComputeSpecMask with the same policy.
class HealthAccumulator {
 public:
  // keep_chi2pix: no assembled frame will be passed to Finish. expected_bins (optional)
  // reserves the kept array once.
  explicit HealthAccumulator(bool keep_chi2pix, MaskPolicy policy = MaskPolicy::kDesispec,
                             std::size_t expected_bins = 0);
  void Add(const BundleResult& bundle);
  // The frame's health. `assembled`: the frame assembled from the same bundles (its mask
  // computed), or null (then keep_chi2pix must have been set, else the mask counts are 0).
  FrameHealth Finish(const Frame* assembled);

 private:
  bool keep_;
  MaskPolicy policy_;
  FrameHealth health_;
  int nwave_ = 0, nspec_ = 0;
  // keep_ only: the frame's chi2pix (fibre-major), per bin kWeighted | kFailed, and each
  // fibre's chi2pix median.
  std::vector<double> chi2pix_;
  std::vector<uint8_t> flags_;
  std::vector<double> fiber_median_, scratch_;
  // The median chi2pix's histogram (MedianWhere's first pass, bin by bin in Add; 1 MiB)
  // and the bins it counts (ivar > 0).
  std::vector<uint32_t> chi2_hist_;
  std::size_t weighted_ = 0;
};

// Counts the specmask bits of a frame whose mask is computed into `health`.
void CountMaskBits(const Frame& frame, FrameHealth* health);

// Median (numpy's: the mean of the two middle values for an even count; 0 when none) of
// values[i] over the i < n with weights[i] > 0 (all i when `weights` is null), equal bit
// for bit to Median() of those values, without copying them: a histogram pass on the top
// bits of each value's order-preserving key, then a selection among the few values of the
// one or two buckets that hold the middle (scratch: a 1 MiB histogram plus those values).
double MedianWhere(const double* values, const double* weights, std::size_t n);

}  // namespace spexd::core

#endif  // SPEXD_CORE_HEALTH_SUMMARY_H_
