// What the service's health reporting reads from the CUDA backend (cuda_backend_fixture.h):
// the patch condition estimates and frame health, and the parity check's test fault.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>

#include "core/frame/bundle_parity.h"
#include "core/frame/health_summary.h"
#include "gtest/gtest.h"
#include "tests/cuda/host/backend_parity.h"
#include "tests/cuda/host/cuda_backend_fixture.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

using core::BundleResult;

// Numerical-health numbers: the CUDA backend computes each patch's condition
// estimate on the device from its factor (CheckSolveKernel); the CPU backend from LAPACK's.
// Same rule (core::CholeskyConditionEstimate), so they agree to rounding; the patch outcomes
// and the frame health built from them agree exactly.
TEST_F(CudaBackendTest, HealthNumbersMatchTheCpuBackend) {
  auto geo = MakeGeometry(100, 50, 6000.0, 6400.0);
  ASSERT_NE(geo, nullptr);
  core::PreprocImage image = Synthetic(*geo, 23, /*masked_pixels=*/2000);
  core::ExtractionJob job;
  job.geometry = geo;
  job.image = &image;
  auto ref = RunJob(*cpu_, job);
  auto got = RunJob(*gpu_, job);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(ref->bundles.size(), got->bundles.size());
  double worst_rel = 0;
  int64_t compared = 0, ill = 0;
  core::HealthAccumulator href(true), hgot(true);
  for (std::size_t i = 0; i < ref->bundles.size(); ++i) {
    const BundleResult& r = ref->bundles[i];
    const BundleResult& g = got->bundles[i];
    href.Add(r);
    hgot.Add(g);
    ASSERT_EQ(r.patch_condition.size(), g.patch_condition.size());
    for (std::size_t k = 0; k < r.patch_condition.size(); ++k) {
      const double a = r.patch_condition[k], b = g.patch_condition[k];
      EXPECT_EQ(a == 0.0, b == 0.0) << "bundle " << r.bundle << " patch " << k;
      if (a == 0.0 || b == 0.0) continue;
      // Above 1e10 the smallest pivot carries rounding amplified by the conditioning
      // itself (the spec's ill-conditioned patches): compared to 10 % only.
      if (a > 1e10) {
        ++ill;
        EXPECT_NEAR(b, a, 0.1 * a) << "bundle " << r.bundle << " patch " << k;
        continue;
      }
      ++compared;
      worst_rel = std::max(worst_rel, std::fabs(a - b) / a);
    }
  }
  std::cout << "[health] " << compared << " patch condition estimates, worst relative difference "
            << worst_rel << " (" << ill << " above 1e10)" << std::endl;
  EXPECT_GT(compared, 0);
  // The diagonal of L in float64 from two summation orders: ~1e-15 relative per element,
  // more in ill-conditioned patches; 1e-6 bounds them all with room.
  EXPECT_LT(worst_rel, 1e-6);
  const core::FrameHealth a = href.Finish(nullptr), b = hgot.Finish(nullptr);
  EXPECT_EQ(a.counts.retried, b.counts.retried);
  EXPECT_EQ(a.counts.failed, b.counts.failed);
  EXPECT_EQ(a.worst_condition_bundle, b.worst_condition_bundle);
  EXPECT_NEAR(a.worst_condition, b.worst_condition, (a.worst_condition > 1e10 ? 0.1 : 1e-6) * a.worst_condition);
  EXPECT_EQ(a.somebadpix, b.somebadpix);
  EXPECT_EQ(a.allbadpix, b.allbadpix);
  EXPECT_EQ(a.bad2dfit, b.bad2dfit);
  EXPECT_NEAR(a.median_chi2pix, b.median_chi2pix, 1e-8 * std::max(1.0, a.median_chi2pix));
}

// The test fault of the CUDA path (SPEXD_TEST_CUDA_FAULTS=perturb_bundle_flux=B) is read
// when a backend is created: a second backend made with it perturbs bundle B by 1e-6 of
// each spectrum's peak, which the shadow parity comparison flags; bundle 0 stays clean.
TEST_F(CudaBackendTest, PerturbBundleFluxFaultIsFlaggedByTheParityCheck) {
  auto geo = MakeGeometry(100, 50, 6000.0, 6400.0);
  ASSERT_NE(geo, nullptr);
  core::PreprocImage image = MakeSyntheticFrame(*geo, SyntheticOptions{});
  core::ExtractionJob job;
  job.geometry = geo;
  job.image = &image;
  auto options = spexd::testing::CudaTestOptions();
  ASSERT_TRUE(options.ok());
  ::setenv("SPEXD_TEST_CUDA_FAULTS", "perturb_bundle_flux=1", 1);
  auto faulty = core::CreateBackend(*options);
  ::unsetenv("SPEXD_TEST_CUDA_FAULTS");
  ASSERT_TRUE(faulty.ok()) << faulty.status();
  auto ref = RunJob(*cpu_, job);
  auto got = RunJob(**faulty, job);
  ASSERT_TRUE(ref.ok() && got.ok());
  ASSERT_EQ(got->bundles.size(), 2u);
  for (BundleResult& b : ref->bundles) core::FinalizeBundle(geo->dwave(), &b);
  for (BundleResult& b : got->bundles) core::FinalizeBundle(geo->dwave(), &b);
  const core::ParityReport clean =
      core::CompareBundles(geo->plan(), got->bundles[0], ref->bundles[0], core::ParityTolerances{});
  EXPECT_FALSE(clean.drift) << clean.detail;
  const core::ParityReport bad =
      core::CompareBundles(geo->plan(), got->bundles[1], ref->bundles[1], core::ParityTolerances{});
  EXPECT_TRUE(bad.drift);
  EXPECT_NEAR(bad.flux, 1e-6, 2e-7);
}

}  // namespace
}  // namespace spexd::testing
