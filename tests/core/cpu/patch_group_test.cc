// Patches extracted in groups (PatchExtractor::ExtractGroup) against the same
// patches extracted one by one (Extract): the same outcomes, conditions, outputs and
// models, bit for bit (every block goes through the SIMD lanes either way, and a lane's
// arithmetic does not depend on the blocks beside it).
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "core/cpu/internal/patch_extractor.h"
#include "core/io/psf.h"
#include "core/plan/geometry.h"
#include "core/sim/simulator.h"
#include "gtest/gtest.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

class PatchGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto psf = Psf::Load(testing::BundledPsfPath());
    ASSERT_TRUE(psf.ok()) << psf.status();
    psf_ = std::make_shared<const Psf>(std::move(*psf));
    params_.wmin = 6000.0; params_.wmax = 6200.0; params_.dw = 0.8;
    params_.specmin = 0; params_.nspec = 25;
    SimOptions sim;
    sim.fiber_begin = 0;
    sim.nfibers = 25;
    sim.wmin = params_.wmin; sim.wmax = params_.wmax; sim.dw = params_.dw;
    sim.noise = SimNoise::kPoisson;
    sim.seed = 5;
    auto spectra = GenerateSpectra(sim);
    ASSERT_TRUE(spectra.ok()) << spectra.status();
    auto frame = SimulateFrame(*psf_, *spectra, sim);
    ASSERT_TRUE(frame.ok()) << frame.status();
    image_ = ToPreprocImage(*frame);
    auto geo = Geometry::Create(psf_, params_, image_.height, image_.width);
    ASSERT_TRUE(geo.ok()) << geo.status();
    geo_ = *geo;
  }

  struct Run {
    BundleResult bundle;
    std::vector<PatchOutcome> outcomes;
    std::vector<double> conditions;
    std::vector<std::vector<double>> models;
  };

  // Bundle 0's patches, in groups of `group` (1: Extract each), with their models; with
  // `fresh_workspaces` (group 1), each patch on a workspace of its own, holding nothing an
  // earlier patch left.
  Run ExtractBundle(int group, bool fresh_workspaces = false) {
    const PatchPlan& plan = geo_->plan();
    PatchExtractor extractor(plan, PatchOptions{});
    auto ws = std::make_unique<PatchWorkspace>(plan);
    Run run;
    run.bundle.Allocate(0, plan.bundle_fiber_begin(0), plan.bundlesize, plan.nwave, plan.ndiag);
    const int p0 = plan.bundle_first_patch[0], p1 = plan.bundle_first_patch[1];
    run.outcomes.resize(p1 - p0);
    run.conditions.resize(p1 - p0);
    run.models.resize(p1 - p0);
    const ImagePlanes planes{image_.image.data(), image_.ivar.data()};
    const std::shared_ptr<const Spots> held = geo_->BundleSpots(0);  // kept or not
    const Spots& spots = *held;
    for (int i0 = 0; i0 < p1 - p0; i0 += group) {
      const int count = std::min(group, p1 - p0 - i0);
      if (group == 1) {
        if (fresh_workspaces && i0 > 0) ws = std::make_unique<PatchWorkspace>(plan);
        run.outcomes[i0] = extractor.Extract(plan.patches[p0 + i0], spots, planes, ws.get(),
                                             &run.bundle, &run.models[i0]);
        run.conditions[i0] = ws->condition();
        continue;
      }
      extractor.ExtractGroup(&plan.patches[p0 + i0], count, spots, planes, ws.get(), &run.bundle,
                             &run.outcomes[i0], &run.conditions[i0], &run.models[i0]);
    }
    SkippedHaveNoCondition(&run);
    return run;
  }

  // A skipped patch leaves its workspace as it was, so ws.condition() is the previous
  // patch's there; the backend records 0 for it (RecordPatchOutcome), and so does this.
  static void SkippedHaveNoCondition(Run* run) {
    for (std::size_t i = 0; i < run->outcomes.size(); ++i) {
      if (run->outcomes[i] == PatchOutcome::kSkipped) run->conditions[i] = 0.0;
    }
  }

  static void ExpectSame(const Run& alone, const Run& grouped) {
    EXPECT_EQ(alone.outcomes, grouped.outcomes);
    EXPECT_EQ(alone.conditions, grouped.conditions);
    EXPECT_EQ(alone.models, grouped.models);
    const BundleResult& a = alone.bundle;
    const BundleResult& g = grouped.bundle;
    EXPECT_EQ(a.flux, g.flux);
    EXPECT_EQ(a.ivar, g.ivar);
    EXPECT_EQ(a.rdiags, g.rdiags);
    EXPECT_EQ(a.pixmask_fraction, g.pixmask_fraction);
    EXPECT_EQ(a.chi2pix, g.chi2pix);
    EXPECT_EQ(a.failed_bins, g.failed_bins);
  }

  std::shared_ptr<const Psf> psf_;
  ExtractionParams params_;
  PreprocImage image_;
  std::shared_ptr<const Geometry> geo_;
};

TEST_F(PatchGroupTest, GroupsGiveThePatchesOfOneByOne) {
  ASSERT_EQ(geo_->plan().nper, 5);
  const Run alone = ExtractBundle(1);
  for (PatchOutcome o : alone.outcomes) EXPECT_EQ(o, PatchOutcome::kExtracted);
  for (const auto& m : alone.models) EXPECT_FALSE(m.empty());
  for (int group : {2, 3, PatchExtractor::kGroup}) {
    SCOPED_TRACE(::testing::Message() << "groups of " << group);
    ExpectSame(alone, ExtractBundle(group));
  }
}

// A patch whose first attempt fails inside a group is extracted alone, retry included,
// as Extract would: NaN pixels with weight make b, then x, non-finite in every attempt
// (kFailed), and the group's other patches are unaffected.
TEST_F(PatchGroupTest, AFailingPatchInAGroupFollowsTheOneByOneRules) {
  const PatchPlan& plan = geo_->plan();
  const PatchDesc& d = plan.patches[plan.bundle_first_patch[0] + 1];
  const int y = d.y0 + d.ny / 2, x = d.x0 + d.nx / 2;
  image_.image[static_cast<std::size_t>(y) * image_.width + x] =
      std::numeric_limits<double>::quiet_NaN();
  image_.ivar[static_cast<std::size_t>(y) * image_.width + x] = 1.0;
  const Run alone = ExtractBundle(1);
  const Run grouped = ExtractBundle(PatchExtractor::kGroup);
  EXPECT_EQ(alone.outcomes[1], PatchOutcome::kFailed);
  EXPECT_EQ(grouped.outcomes[1], PatchOutcome::kFailed);
  ExpectSame(alone, grouped);
}

// A patch's bits do not depend on what its workspace held before: the workspaces keep
// each patch's arrays only where it writes them (M's band, the factor within its reach),
// so a reader past those bounds sees an earlier patch's numbers. Masked windows give the
// narrowest bands (a wholly masked one kd = 0: the band inverse once read L_JJ beyond it).
TEST_F(PatchGroupTest, APatchDoesNotDependOnWhatItsWorkspaceHeld) {
  const PatchPlan& plan = geo_->plan();
  const int p0 = plan.bundle_first_patch[0];
  const PatchDesc& whole = plan.patches[p0 + 2];
  testing::MaskWindowRows(whole, whole.y0, whole.y0 + whole.ny, &image_);
  const PatchDesc& half = plan.patches[p0 + 4];
  testing::MaskWindowRows(half, half.y0, half.y0 + half.ny / 2, &image_);
  const Run fresh = ExtractBundle(1, /*fresh_workspaces=*/true);
  for (int group : {1, PatchExtractor::kGroup}) {
    SCOPED_TRACE(::testing::Message() << "one workspace, groups of " << group);
    ExpectSame(fresh, ExtractBundle(group));
  }
}

// The same near the top of the CCD, where windows are truncated (compat gpu: smaller n and
// windows than the workspace was sized for, spec §2.6).
TEST_F(PatchGroupTest, ATruncatedWindowDoesNotDependOnWhatItsWorkspaceHeld) {
  // Past the simulator's wavelengths: the tests' synthetic frame on the padded grid.
  params_.wmin = 7500.0;
  params_.wmax = 7827.0;
  auto geo = Geometry::Create(psf_, params_, 4128, 4114);
  ASSERT_TRUE(geo.ok()) << geo.status();
  geo_ = *geo;
  image_ = testing::MakeSyntheticFrame(*geo_, testing::SyntheticOptions{});
  const PatchPlan& plan = geo_->plan();
  int truncated = 0;
  for (int p = plan.bundle_first_patch[0]; p < plan.bundle_first_patch[1]; ++p) {
    const PatchDesc& d = plan.patches[p];
    truncated += d.skipped == 0 && d.y0 + d.ny >= image_.height ? 1 : 0;
  }
  ASSERT_GT(truncated, 0) << "no window of bundle 0 reaches the CCD's top row";
  const Run fresh = ExtractBundle(1, /*fresh_workspaces=*/true);
  for (int group : {1, PatchExtractor::kGroup}) {
    SCOPED_TRACE(::testing::Message() << "one workspace, groups of " << group);
    ExpectSame(fresh, ExtractBundle(group));
  }
}

}  // namespace
}  // namespace spexd::core
