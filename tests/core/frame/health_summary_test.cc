// Frame health (issue 23): the mask counts are those of the frame's specmask (one rule,
// ComputeSpecMask), the worst condition is the largest recorded patch estimate, and the
// median chi2pix is over the bins with ivar > 0.
#include "core/frame/health_summary.h"

#include "core/frame/frame.h"
#include "gtest/gtest.h"

namespace spexd::core {
namespace {

BundleResult MakeBundle(int index, int nfib, int nwave, double chi2_base) {
  BundleResult b;
  b.Allocate(index, index * nfib, nfib, nwave, 1);
  for (int f = 0; f < nfib; ++f) {
    for (int w = 0; w < nwave; ++w) {
      const std::size_t i = static_cast<std::size_t>(f) * nwave + w;
      b.chi2pix[i] = chi2_base + 0.01 * ((f * 7 + w * 3) % 11);
      b.ivar[i] = 1.0;
    }
  }
  return b;
}

TEST(HealthSummaryTest, CountsMatchTheFrameSpecmaskAndFindTheWorstPatch) {
  BundleResult a = MakeBundle(0, 3, 20, 1.0), b = MakeBundle(1, 3, 20, 1.0);
  a.pixmask_fraction[5] = 0.7;   // SOMEBADPIX
  a.pixmask_fraction[6] = 1.0;   // SOMEBADPIX and ALLBADPIX
  b.chi2pix[10] = 50.0;          // BAD2DFIT by the median rule
  b.failed_bins[33] = 1;         // BAD2DFIT by the failed patch
  b.ivar[33] = 0.0;              // not in the chi2 median
  a.patch_condition = {10.0, 0.0, 3e5};
  b.patch_condition = {7e6, 1.0};
  a.counts.retried = 1;
  b.counts.failed = 1;

  // Reference: the frame the assembler would build, with its specmask.
  Frame frame;
  frame.nspec = 6;
  frame.nwave = 20;
  for (const BundleResult* x : {&a, &b}) {
    frame.chi2pix.insert(frame.chi2pix.end(), x->chi2pix.begin(), x->chi2pix.end());
    frame.pixmask_fraction.insert(frame.pixmask_fraction.end(), x->pixmask_fraction.begin(),
                                  x->pixmask_fraction.end());
    frame.failed_bins.insert(frame.failed_bins.end(), x->failed_bins.begin(), x->failed_bins.end());
  }
  ComputeSpecMask(&frame);
  FrameHealth expected;
  CountMaskBits(frame, &expected);
  EXPECT_EQ(expected.somebadpix, 2);
  EXPECT_EQ(expected.allbadpix, 1);
  EXPECT_EQ(expected.bad2dfit, 2);

  for (bool keep : {true, false}) {
    HealthAccumulator acc(keep);
    acc.Add(a);
    acc.Add(b);
    const FrameHealth h = acc.Finish(keep ? nullptr : &frame);
    EXPECT_EQ(h.bins, 120);
    EXPECT_EQ(h.somebadpix, expected.somebadpix);
    EXPECT_EQ(h.allbadpix, expected.allbadpix);
    EXPECT_EQ(h.bad2dfit, expected.bad2dfit);
    EXPECT_EQ(h.worst_condition, 7e6);
    EXPECT_EQ(h.worst_condition_bundle, 1);
    EXPECT_EQ(h.counts.retried, 1);
    EXPECT_EQ(h.counts.failed, 1);
    // 119 bins with ivar > 0: the median is one of the base values near 1.05, not 50.
    EXPECT_GT(h.median_chi2pix, 1.0);
    EXPECT_LT(h.median_chi2pix, 1.11);
  }
}

TEST(HealthSummaryTest, EmptyFrameIsAllZero) {
  HealthAccumulator acc(true);
  const FrameHealth h = acc.Finish(nullptr);
  EXPECT_EQ(h.bins, 0);
  EXPECT_EQ(h.worst_condition_bundle, -1);
  EXPECT_EQ(h.median_chi2pix, 0.0);
}

}  // namespace
}  // namespace spexd::core
