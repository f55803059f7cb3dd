#include "core/frame/health_summary.h"

#include <utility>

namespace spexd::core {

void HealthAccumulator::Add(const BundleResult& b) {
  health_.counts += b.counts;
  for (double c : b.patch_condition) {
    if (c > health_.worst_condition) {
      health_.worst_condition = c;
      health_.worst_condition_bundle = b.bundle;
    }
  }
  nwave_ = b.nwave;
  nspec_ += b.nfibers;
  const std::size_t n = static_cast<std::size_t>(b.nfibers) * b.nwave;
  for (std::size_t i = 0; i < n && i < b.ivar.size(); ++i) {
    if (b.ivar[i] > 0) good_chi2_.push_back(b.chi2pix[i]);
  }
  if (!keep_arrays_) return;
  chi2pix_.insert(chi2pix_.end(), b.chi2pix.begin(), b.chi2pix.end());
  pixmask_.insert(pixmask_.end(), b.pixmask_fraction.begin(), b.pixmask_fraction.end());
  failed_.insert(failed_.end(), b.failed_bins.begin(), b.failed_bins.end());
}

void CountMaskBits(const Frame& f, FrameHealth* h) {
  h->bins = static_cast<int64_t>(f.mask.size());
  h->somebadpix = h->allbadpix = h->bad2dfit = 0;
  for (uint32_t m : f.mask) {
    h->somebadpix += (m & kSomeBadPix) != 0;
    h->allbadpix += (m & kAllBadPix) != 0;
    h->bad2dfit += (m & kBad2DFit) != 0;
  }
}

FrameHealth HealthAccumulator::Finish(const Frame* assembled) {
  FrameHealth h = health_;
  h.median_chi2pix = Median(std::move(good_chi2_));
  if (assembled != nullptr) {
    CountMaskBits(*assembled, &h);
  } else if (keep_arrays_ && nspec_ > 0) {
    // The specmask as the frame would carry it: one rule, ComputeSpecMask (spec §2.13).
    Frame f;
    f.nspec = nspec_;
    f.nwave = nwave_;
    f.chi2pix = std::move(chi2pix_);
    f.pixmask_fraction = std::move(pixmask_);
    f.failed_bins = std::move(failed_);
    ComputeSpecMask(&f);
    CountMaskBits(f, &h);
  }
  return h;
}

}  // namespace spexd::core
