// Numerical-health numbers of the CPU backend (issue 23): every solved patch records its
// Cholesky condition estimate, skipped ones none; the same job gives the same numbers; and
// the SPEXD_TEST_CPU_FAULTS switch perturbs exactly the bundle it names.
#include <cmath>
#include <cstdlib>
#include <memory>
#include <vector>

#include "core/backend/backend.h"
#include "core/backend/test_faults.h"
#include "core/cpu/cpu_backend.h"
#include "core/frame/bundle_parity.h"
#include "core/plan/geometry.h"
#include "core/sim/simulator.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

class PatchConditionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    psf_ = testing::LoadBundledPsf();
    ASSERT_NE(psf_, nullptr);
    SimOptions sim;
    sim.nfibers = 50;
    sim.wmin = 5760.0;
    sim.wmax = 5840.0;
    sim.seed = 5;
    sim.height = 700;
    sim.width = 400;
    sim.num_hot_pixels = 40;
    sim.num_threads = 2;
    auto image = testing::SimulatedImage(*psf_, sim);
    ASSERT_TRUE(image.ok()) << image.status();
    image_ = *std::move(image);
    ExtractionParams p;
    p.specmin = 0;
    p.nspec = 50;
    p.wmin = 5760.0;
    p.wmax = 5840.0;
    auto geo = Geometry::Create(psf_, p, image_.height, image_.width);
    ASSERT_TRUE(geo.ok()) << geo.status();
    geometry_ = *geo;
  }

  std::vector<BundleResult> Run(Backend& backend) {
    ExtractionJob job;
    job.geometry = geometry_;
    job.image = &image_;
    std::vector<BundleResult> out;
    auto s = backend.Extract(job, [&](BundleResult&& b) {
      out.push_back(std::move(b));
      return absl::OkStatus();
    });
    EXPECT_TRUE(s.ok()) << s.status();
    return out;
  }

  std::shared_ptr<const Psf> psf_;
  PreprocImage image_;
  std::shared_ptr<const Geometry> geometry_;
};

TEST_F(PatchConditionTest, EverySolvedPatchHasAConditionEstimate) {
  auto cpu = CreateCpuBackend(2);
  const std::vector<BundleResult> a = Run(*cpu);
  ASSERT_EQ(a.size(), 2u);
  const PatchPlan& plan = geometry_->plan();
  int64_t solved = 0;
  for (const BundleResult& b : a) {
    const int p0 = plan.bundle_first_patch[b.bundle], p1 = plan.bundle_first_patch[b.bundle + 1];
    ASSERT_EQ(b.patch_condition.size(), static_cast<std::size_t>(p1 - p0));
    for (int p = p0; p < p1; ++p) {
      const double c = b.patch_condition[static_cast<std::size_t>(p - p0)];
      if (plan.patches[p].skipped != kSkipNone) {
        EXPECT_EQ(c, 0.0);
      } else {
        EXPECT_GE(c, 1.0) << "patch " << p;  // (max/min)^2 of a positive diagonal
        EXPECT_TRUE(std::isfinite(c));
        ++solved;
      }
    }
    EXPECT_EQ(solved > 0, true);
  }
  // Deterministic: the same job, the same numbers (bit for bit).
  const std::vector<BundleResult> again = Run(*cpu);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].patch_condition, again[i].patch_condition);
}

TEST_F(PatchConditionTest, CpuFaultSwitchPerturbsOnlyItsBundle) {
  EXPECT_FALSE(ParseCpuFaultPlan("perturb_bundle_flux=x").ok());
  EXPECT_FALSE(ParseCpuFaultPlan("melt=1").ok());
  EXPECT_EQ(ParseCpuFaultPlan("perturb_bundle_flux=1")->perturb_bundle_flux, 1);
  auto clean = CreateCpuBackend(2);
  const std::vector<BundleResult> ref = Run(*clean);
  ::setenv("SPEXD_TEST_CPU_FAULTS", "perturb_bundle_flux=1", 1);
  BackendOptions o;
  o.kind = BackendKind::kCpu;
  o.threads = 2;
  auto faulty = CreateBackend(o);
  ::unsetenv("SPEXD_TEST_CPU_FAULTS");
  ASSERT_TRUE(faulty.ok()) << faulty.status();
  const std::vector<BundleResult> got = Run(**faulty);
  ASSERT_EQ(got.size(), 2u);
  const PatchPlan& plan = geometry_->plan();
  EXPECT_FALSE(CompareBundles(plan, got[0], ref[0], ParityTolerances{}).drift);
  const ParityReport bad = CompareBundles(plan, got[1], ref[1], ParityTolerances{});
  EXPECT_TRUE(bad.drift);
  EXPECT_NEAR(bad.flux, 1e-6, 1e-7);
  ::setenv("SPEXD_TEST_CPU_FAULTS", "bogus=1", 1);
  EXPECT_FALSE(CreateBackend(o).ok());
  ::unsetenv("SPEXD_TEST_CPU_FAULTS");
}

}  // namespace
}  // namespace spexd::core
