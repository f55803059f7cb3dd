// Shadow parity's comparison: identical bundles and float64-rounding-sized
// differences pass; the test fault's 1e-6 perturbation, a resolution or mask change fail;
// ill-conditioned patches are judged with the envelope.
#include "core/frame/bundle_parity.h"

#include <cmath>

#include "core/frame/patch_outcome.h"
#include "gtest/gtest.h"

namespace spexd::core {
namespace {

// One bundle of 5 fibres x 40 bins, made of two patches of 5 spectra x 20 bins.
struct Fixture {
  PatchPlan plan;
  BundleResult b;
  Fixture() {
    plan.bundlesize = 5;
    plan.nper = 5;
    plan.nbundles = 1;
    plan.bundle_first_patch = {0, 2};
    for (int p = 0; p < 2; ++p) {
      PatchDesc d{};
      d.bundle = 0;
      d.out_row = 0;
      d.out_col = 20 * p;
      d.nkeep = 20;
      plan.patches.push_back(d);
    }
    b.Allocate(0, 0, 5, 40, 1);
    for (std::size_t i = 0; i < b.flux.size(); ++i) {
      b.flux[i] = 100.0 + std::sin(0.3 * static_cast<double>(i)) * 50.0;
      b.ivar[i] = 0.01 + 1e-4 * static_cast<double>(i % 7);
      b.chi2pix[i] = 1.0;
    }
    for (std::size_t i = 0; i < b.rdiags.size(); ++i) b.rdiags[i] = (i % 3 == 1) ? 0.8 : 0.1;
    b.patch_condition = {1e4, 2e4};
  }
};

TEST(BundleParityTest, IdenticalAndRoundingSizedDifferencesPass) {
  Fixture f;
  ParityReport same = CompareBundles(f.plan, f.b, f.b, ParityTolerances{});
  EXPECT_FALSE(same.drift) << same.detail;
  EXPECT_EQ(same.worst(), 0.0);
  BundleResult r = f.b;
  for (double& v : r.flux) v *= 1 + 3e-13;
  for (double& v : r.ivar) v *= 1 - 1e-12;
  ParityReport close = CompareBundles(f.plan, f.b, r, ParityTolerances{});
  EXPECT_FALSE(close.drift) << close.detail;
  EXPECT_GT(close.flux, 0.0);
  EXPECT_LT(close.worst(), 1e-11);
}

TEST(BundleParityTest, TheTestFaultIsADrift) {
  Fixture f;
  BundleResult served = f.b;
  PerturbBundleFlux(&served);
  ParityReport rep = CompareBundles(f.plan, served, f.b, ParityTolerances{});
  EXPECT_TRUE(rep.drift);
  EXPECT_NEAR(rep.flux, 1e-6, 1e-7);  // 1e-6 of the peak, relative to the peak
  EXPECT_NE(rep.detail.find("flux deviates"), std::string::npos) << rep.detail;
}

TEST(BundleParityTest, ResolutionMaskAndShapeChangesAreDrifts) {
  Fixture f;
  BundleResult r = f.b;
  r.rdiags[17] += 1e-9;
  EXPECT_TRUE(CompareBundles(f.plan, f.b, r, ParityTolerances{}).drift);
  r = f.b;
  r.pixmask_fraction[3] = 0.6;  // SOMEBADPIX on one side only
  ParityReport m = CompareBundles(f.plan, f.b, r, ParityTolerances{});
  EXPECT_TRUE(m.drift);
  EXPECT_EQ(m.mask_mismatches, 1);
  r = f.b;
  r.nwave = 39;
  EXPECT_TRUE(CompareBundles(f.plan, f.b, r, ParityTolerances{}).drift);
}

TEST(BundleParityTest, IllConditionedPatchesGetTheEnvelope) {
  Fixture f;
  BundleResult served = f.b;
  // Patch 1 (bins 20..39) is ill-conditioned on the served side.
  served.patch_condition[1] = 1e14;
  for (int fib = 0; fib < 5; ++fib) served.flux[static_cast<std::size_t>(fib) * 40 + 25] *= 1 + 1e-6;
  ParityReport rep = CompareBundles(f.plan, served, f.b, ParityTolerances{});
  EXPECT_FALSE(rep.drift) << rep.detail;
  EXPECT_EQ(rep.envelope_bins, 100);
  // Beyond the envelope it is a drift even there; outside such patches 1e-6 always is.
  served.flux[25] *= 1 + 1e-3;
  EXPECT_TRUE(CompareBundles(f.plan, served, f.b, ParityTolerances{}).drift);
  served = f.b;
  served.flux[5] *= 1 + 1e-6;
  EXPECT_TRUE(CompareBundles(f.plan, served, f.b, ParityTolerances{}).drift);
}

TEST(BundleParityTest, RecordPatchOutcomeKeepsConditionsOfSolvedPatchesOnly) {
  Fixture f;
  BundleResult b;
  b.Allocate(0, 0, 5, 40, 1);
  RecordPatchOutcome(f.plan, 0, PatchOutcome::kRetried, 5e3, &b);
  RecordPatchOutcome(f.plan, 1, PatchOutcome::kFailed, 7e3, &b);
  ASSERT_EQ(b.patch_condition.size(), 2u);
  EXPECT_EQ(b.patch_condition[0], 5e3);
  EXPECT_EQ(b.patch_condition[1], 0.0);
  EXPECT_EQ(b.counts.retried, 1);
  EXPECT_EQ(b.counts.extracted, 1);
  EXPECT_EQ(b.counts.failed, 1);
}

}  // namespace
}  // namespace spexd::core
