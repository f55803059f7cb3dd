// Frame health: the mask counts are those of the frame's specmask (one rule,
// ComputeSpecMask, with the request's mask policy), the worst condition is the largest
// recorded patch estimate, and the median chi2pix is over the bins with ivar > 0 and equals
// Median() bit for bit, on both paths (the assembled frame read in place; the streamed
// frame's kept chi2pix).
#include "core/frame/health_summary.h"

#include <cstdint>
#include <random>
#include <vector>

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

// The frame the assembler would build from `bundles`, with its specmask.
Frame Assemble(const std::vector<BundleResult>& bundles, MaskPolicy policy) {
  Frame frame;
  frame.nwave = bundles.front().nwave;
  for (const BundleResult& x : bundles) {
    frame.nspec += x.nfibers;
    frame.chi2pix.insert(frame.chi2pix.end(), x.chi2pix.begin(), x.chi2pix.end());
    frame.ivar.insert(frame.ivar.end(), x.ivar.begin(), x.ivar.end());
    frame.pixmask_fraction.insert(frame.pixmask_fraction.end(), x.pixmask_fraction.begin(),
                                  x.pixmask_fraction.end());
    frame.failed_bins.insert(frame.failed_bins.end(), x.failed_bins.begin(), x.failed_bins.end());
  }
  ComputeSpecMask(&frame, policy);
  return frame;
}

// Median() of the chi2pix with ivar > 0: the reference for both paths.
double ReferenceMedian(const Frame& frame) {
  std::vector<double> v;
  for (std::size_t i = 0; i < frame.chi2pix.size(); ++i) {
    if (frame.ivar[i] > 0) v.push_back(frame.chi2pix[i]);
  }
  return Median(v);
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

  const Frame frame = Assemble({a, b}, MaskPolicy::kDesispec);
  FrameHealth expected;
  CountMaskBits(frame, &expected);
  EXPECT_EQ(expected.somebadpix, 2);
  EXPECT_EQ(expected.allbadpix, 1);
  EXPECT_EQ(expected.bad2dfit, 2);

  for (bool keep : {true, false}) {
    SCOPED_TRACE(keep ? "kept chi2pix" : "assembled frame");
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
    EXPECT_EQ(h.median_chi2pix, ReferenceMedian(frame));
    EXPECT_GT(h.median_chi2pix, 1.0);
    EXPECT_LT(h.median_chi2pix, 1.11);
  }
}

// Random frames (outliers, masked and failed bins, zero ivar; odd and even bin counts)
// under each mask policy: both paths give ComputeSpecMask's counts and Median()'s median.
TEST(HealthSummaryTest, BothPathsEqualComputeSpecMaskOnRandomFrames) {
  std::mt19937_64 rng(23);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int trial = 0; trial < 12; ++trial) {
    const int nfib = 3 + trial % 4, nwave = 31 + trial, nbundles = 1 + trial % 3;
    const MaskPolicy policy = trial % 2 ? MaskPolicy::kDesispecExact : MaskPolicy::kDesispec;
    SCOPED_TRACE(::testing::Message() << "trial " << trial);
    std::vector<BundleResult> bundles;
    for (int k = 0; k < nbundles; ++k) {
      BundleResult b;
      b.Allocate(k, k * nfib, nfib, nwave, 1);
      for (std::size_t i = 0; i < b.chi2pix.size(); ++i) {
        b.chi2pix[i] = 0.5 + u(rng) + (u(rng) < 0.03 ? 40 * u(rng) : 0.0);
        b.ivar[i] = u(rng) < 0.1 ? 0.0 : u(rng);
        const double r = u(rng);
        // 1 - 1e-13: ALLBADPIX under kDesispec only (the policies differ there).
        b.pixmask_fraction[i] = r < 0.05 ? 1.0 : r < 0.1 ? 1.0 - 1e-13 : r < 0.2 ? 0.6 : 0.0;
        b.failed_bins[i] = u(rng) < 0.02;
      }
      bundles.push_back(std::move(b));
    }
    const Frame frame = Assemble(bundles, policy);
    FrameHealth expected;
    CountMaskBits(frame, &expected);
    ASSERT_GT(expected.bad2dfit, 0);
    for (bool keep : {true, false}) {
      HealthAccumulator acc(keep, policy);
      for (const BundleResult& b : bundles) acc.Add(b);
      const FrameHealth h = acc.Finish(keep ? nullptr : &frame);
      EXPECT_EQ(h.bins, expected.bins);
      EXPECT_EQ(h.somebadpix, expected.somebadpix);
      EXPECT_EQ(h.allbadpix, expected.allbadpix);
      EXPECT_EQ(h.bad2dfit, expected.bad2dfit);
      EXPECT_EQ(h.median_chi2pix, ReferenceMedian(frame));
    }
  }
}

TEST(HealthSummaryTest, MedianWhereEqualsMedianBitForBit) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> g(1.0, 0.3);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (std::size_t n : {1u, 2u, 3u, 10u, 11u, 1000u, 4097u, 20000u}) {
    std::vector<double> v(n), w(n);
    for (std::size_t i = 0; i < n; ++i) {
      // Negatives, zeros of both signs, ties, one bucket crowded and values far apart.
      const double r = u(rng);
      v[i] = r < 0.05 ? -g(rng) : r < 0.08 ? (r < 0.065 ? 0.0 : -0.0) : r < 0.2 ? 1.0
             : r < 0.22 ? 1e300 : g(rng);
      w[i] = u(rng) < 0.3 ? 0.0 : 1.0;
    }
    std::vector<double> selected;
    for (std::size_t i = 0; i < n; ++i) {
      if (w[i] > 0) selected.push_back(v[i]);
    }
    EXPECT_EQ(MedianWhere(v.data(), nullptr, n), Median(v)) << n;
    EXPECT_EQ(MedianWhere(v.data(), w.data(), n), Median(selected)) << n;
  }
  // Two middle values in different buckets (far apart): their mean, as numpy.
  const std::vector<double> apart = {1.0, 1e10, -5.0, 3e20};
  EXPECT_EQ(MedianWhere(apart.data(), nullptr, apart.size()), 0.5 + 0.5e10);
  EXPECT_EQ(MedianWhere(apart.data(), nullptr, 0), 0.0);
  const std::vector<double> none = {1.0, 2.0};
  const std::vector<double> zero = {0.0, -1.0};
  EXPECT_EQ(MedianWhere(none.data(), zero.data(), 2), 0.0);  // nothing selected
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
