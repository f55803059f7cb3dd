// Numerical-health numbers of the CPU backend: the condition estimate of a
// factor is what it should be on matrices whose answer is known (a lower bound of the
// 2-norm condition, exact for a diagonal one), an ill-conditioned matrix lands above the
// shadow check's envelope threshold and a clean one below; in the backend, every solved
// patch of a clean frame records an estimate below that threshold, a fully masked piece of
// a trace lifts its patch above it, skipped patches record none, the same job gives the
// same numbers; and the CPU test fault plan (BackendOptions::cpu_test_faults) perturbs exactly the bundle it names.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <vector>

#include "core/cpu/internal/lapack.h"
#include "core/numerics/patch_numerics.h"

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

// M = L Lᵀ for a lower bidiagonal L with diagonal `d` and subdiagonal `s`, in LAPACK's
// lower band storage (kd = 1, ldab = 2), factored by dpbtrf as the backend does. Returns
// the estimate from the factor, and the 2-norm condition of M from its eigenvalues.
struct Estimate {
  double from_factor = 0, exact = 0;
  int info = 0;
};
Estimate FactorAndEstimate(const std::vector<double>& d, double s) {
  const int n = static_cast<int>(d.size()), kd = 1, ldab = 2;
  std::vector<double> band(static_cast<std::size_t>(n) * ldab), dense(static_cast<std::size_t>(n) * n);
  for (int q = 0; q < n; ++q) {
    // (L Lᵀ)[q, q] = d_q² + s² (q > 0), (L Lᵀ)[q + 1, q] = s d_q.
    const double mqq = d[q] * d[q] + (q > 0 ? s * s : 0.0);
    band[static_cast<std::size_t>(q) * ldab] = mqq;
    dense[static_cast<std::size_t>(q) * n + q] = mqq;
    if (q + 1 < n) {
      band[static_cast<std::size_t>(q) * ldab + 1] = s * d[q];
      dense[static_cast<std::size_t>(q) * n + q + 1] = s * d[q];
      dense[static_cast<std::size_t>(q + 1) * n + q] = s * d[q];
    }
  }
  Estimate e;
  dpbtrf_("L", &n, &kd, band.data(), &ldab, &e.info, 1);
  if (e.info != 0) return e;
  e.from_factor = FactorConditionEstimate(band.data(), n, ldab);
  std::vector<double> w(static_cast<std::size_t>(n));
  int lwork = -1, liwork = -1, iwork_q = 0, info = 0;
  double work_q = 0;
  dsyevd_("N", "L", &n, dense.data(), &n, w.data(), &work_q, &lwork, &iwork_q, &liwork, &info, 1, 1);
  lwork = static_cast<int>(work_q) + 1;
  liwork = iwork_q + 1;
  std::vector<double> work(static_cast<std::size_t>(lwork));
  std::vector<int> iwork(static_cast<std::size_t>(liwork));
  dsyevd_("N", "L", &n, dense.data(), &n, w.data(), work.data(), &lwork, iwork.data(), &liwork,
          &info, 1, 1);
  EXPECT_EQ(info, 0);
  e.exact = w.back() / w.front();  // ascending eigenvalues of an SPD matrix
  return e;
}

TEST(ConditionEstimateTest, KnownFactorsGiveTheirDiagonalRatio) {
  // dpbtrf returns L itself (the Cholesky factor with a positive diagonal is unique), so
  // the estimate is (max d / min d)² = (4 / 0.25)² = 256.
  const Estimate e = FactorAndEstimate({2.0, 0.5, 3.0, 1.0, 4.0, 0.25}, 0.3);
  ASSERT_EQ(e.info, 0);
  EXPECT_NEAR(e.from_factor, 256.0, 256.0 * 1e-12);
  EXPECT_LE(e.from_factor, e.exact * (1 + 1e-12));  // a lower bound of the 2-norm condition
  EXPECT_GT(e.exact, 256.0);                        // strictly, with the coupling
  // Diagonal M: the estimate is the condition itself, (3 / 0.5)² = 36.
  const Estimate diag = FactorAndEstimate({1.0, 0.5, 3.0}, 0.0);
  EXPECT_NEAR(diag.from_factor, 36.0, 36.0 * 1e-12);
  EXPECT_NEAR(diag.exact, 36.0, 36.0 * 1e-12);
}

TEST(ConditionEstimateTest, IllConditionedMatrixLandsAboveTheEnvelopeThreshold) {
  const double threshold = ParityTolerances{}.ill_conditioned;  // 1e6: rounding x 1e6 = 1e-10
  // A well-conditioned banded SPD matrix (condition ~ 10) stays below, one pivot of 1e-5
  // next to pivots of ~1 (what a fully masked bin regularised to a tiny diagonal gives)
  // goes far above: (2 / 1e-5)² = 4e10.
  const Estimate good = FactorAndEstimate({1.0, 2.0, 1.5, 1.2, 0.9}, 0.2);
  const Estimate bad = FactorAndEstimate({1.0, 2.0, 1e-5, 1.2, 0.9}, 0.2);
  ASSERT_EQ(good.info, 0);
  ASSERT_EQ(bad.info, 0);
  EXPECT_LT(good.from_factor, 10.0);
  // The small pivot comes out of a cancellation (0.04 + 1e-10 - 0.04): ~1e-8 relative.
  EXPECT_NEAR(bad.from_factor, 4e10, 4e10 * 1e-6);
  EXPECT_GT(bad.from_factor, threshold);
  EXPECT_LE(bad.from_factor, bad.exact * (1 + 1e-9));
  // Undefined estimates are 0 (never a spurious "healthy" 1): no pivots, a zero or a
  // negative pivot, a non-finite one.
  const double zero_pivot[] = {1.0, 0.0, 2.0};
  const double negative[] = {1.0, -1.0};
  const double inf[] = {INFINITY, 1.0};
  EXPECT_EQ(FactorConditionEstimate(zero_pivot, 0, 1), 0.0);
  EXPECT_EQ(FactorConditionEstimate(zero_pivot, 3, 1), 0.0);
  EXPECT_EQ(FactorConditionEstimate(negative, 2, 1), 0.0);
  EXPECT_EQ(FactorConditionEstimate(inf, 2, 1), 0.0);
  // A matrix that is not positive definite never reaches the estimate: dpbtrf refuses it.
  std::vector<double> not_spd = {1.0, 2.0, 1.0, 0.0};  // [[1, 2], [2, 1]], band storage
  int n = 2, kd = 1, ldab = 2, info = 0;
  dpbtrf_("L", &n, &kd, not_spd.data(), &ldab, &info, 1);
  EXPECT_NE(info, 0);
}

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
        // A clean frame: far below where the shadow check widens its bar (~600 on a
        // simulated r frame; bundle_parity.h).
        EXPECT_LT(c, ParityTolerances{}.ill_conditioned) << "patch " << p;
        ++solved;
      }
    }
    EXPECT_EQ(solved > 0, true);
  }
  // Deterministic: the same job, the same numbers (bit for bit).
  const std::vector<BundleResult> again = Run(*cpu);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].patch_condition, again[i].patch_condition);
}

// A piece of one fibre's trace fully masked (ivar 0 over its columns for ~20 A): its
// bins have no weight and are regularised to a tiny diagonal (spec §2.8), so the patches
// that hold them become ill-conditioned, above the shadow check's threshold, while the
// patches of the other bundle stay as they were.
TEST_F(PatchConditionTest, FullyMaskedTraceMakesItsPatchIllConditioned) {
  auto cpu = CreateCpuBackend(2);
  const std::vector<BundleResult> clean = Run(*cpu);
  const int fiber = 27;  // bundle 1, inside the 400-column image
  const double w0 = 5795.0, w1 = 5815.0;
  const double ya = psf_->Y(fiber, w0), yb = psf_->Y(fiber, w1);
  ASSERT_GT(yb, ya + 5);  // rows grow with wavelength
  for (int y = std::max(static_cast<int>(ya), 0); y <= std::min(static_cast<int>(yb) + 1, image_.height - 1);
       ++y) {
    // The trace's column at this row (wavelength linear in y over 20 A is close enough).
    const double w = w0 + (w1 - w0) * (y - ya) / (yb - ya);
    const int xc = static_cast<int>(std::lround(psf_->X(fiber, w)));
    for (int x = std::max(xc - 8, 0); x <= std::min(xc + 8, image_.width - 1); ++x) {
      image_.ivar[static_cast<std::size_t>(y) * image_.width + x] = 0.0;
    }
  }
  const std::vector<BundleResult> masked = Run(*cpu);
  ASSERT_EQ(masked.size(), 2u);
  const double threshold = ParityTolerances{}.ill_conditioned;
  auto worst = [](const BundleResult& b) {
    return *std::max_element(b.patch_condition.begin(), b.patch_condition.end());
  };
  EXPECT_LT(worst(clean[1]), threshold);
  EXPECT_GT(worst(masked[1]), threshold) << "clean worst " << worst(clean[1]);
  // Measured: the two patches of the fibre's sub-bundle that hold 5795-5815 A go from
  // ~300-900 to 4e7-1e8; every other patch keeps its estimate bit for bit.
  ASSERT_EQ(masked[1].patch_condition.size(), clean[1].patch_condition.size());
  int changed = 0;
  for (std::size_t k = 0; k < clean[1].patch_condition.size(); ++k) {
    if (masked[1].patch_condition[k] == clean[1].patch_condition[k]) continue;
    ++changed;
    EXPECT_GT(masked[1].patch_condition[k], threshold) << "patch " << k;
  }
  EXPECT_GE(changed, 1);
  EXPECT_LE(changed, 3);  // one sub-bundle's patches over ~20 A, not the bundle
  EXPECT_EQ(masked[0].patch_condition, clean[0].patch_condition);  // bundle 0 untouched
}

TEST_F(PatchConditionTest, CpuFaultSwitchPerturbsOnlyItsBundle) {
  EXPECT_FALSE(ParseCpuFaultPlan("perturb_bundle_flux=x").ok());
  EXPECT_FALSE(ParseCpuFaultPlan("melt=1").ok());
  EXPECT_EQ(ParseCpuFaultPlan("perturb_bundle_flux=1")->perturb_bundle_flux, 1);
  auto clean = CreateCpuBackend(2);
  const std::vector<BundleResult> ref = Run(*clean);
  BackendOptions o;
  o.kind = BackendKind::kCpu;
  o.threads = 2;
  o.cpu_test_faults = "perturb_bundle_flux=1";
  auto faulty = CreateBackend(o);
  ASSERT_TRUE(faulty.ok()) << faulty.status();
  const std::vector<BundleResult> got = Run(**faulty);
  ASSERT_EQ(got.size(), 2u);
  const PatchPlan& plan = geometry_->plan();
  EXPECT_FALSE(CompareBundles(plan, got[0], ref[0], ParityTolerances{}).drift);
  const ParityReport bad = CompareBundles(plan, got[1], ref[1], ParityTolerances{});
  EXPECT_TRUE(bad.drift);
  EXPECT_NEAR(bad.flux, 1e-6, 1e-7);
  o.cpu_test_faults = "bogus=1";
  EXPECT_FALSE(CreateBackend(o).ok());
}

}  // namespace
}  // namespace spexd::core
