// ValidateParams: every request integer and real checked against its documented range,
// with 64-bit arithmetic, and real DESI settings accepted.
#include "core/plan/extraction_params.h"

#include <chrono>
#include <climits>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "core/plan/memory_estimate.h"
#include "core/plan/patch_plan.h"
#include "core/io/psf.h"
#include "gtest/gtest.h"
#include "tests/bundled_psf_test.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

class ExtractionParamsTest : public testing::BundledPsfTest {};

struct ParamsCase {
  const char* what;
  std::function<void(ExtractionParams*)> edit;
  const char* message;  // expected in the error
};

TEST_F(ExtractionParamsTest, OutOfRangeValuesAreRefusedNamingTheParameter) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const ParamsCase cases[] = {
      // specmin + nspec wrapped around INT_MAX and passed the fibre check (a SIGSEGV).
      {"specmin near INT_MAX", [](ExtractionParams* p) { p->specmin = 2147483625; p->nspec = 25; },
       "specmin"},
      {"specmin INT_MAX, bundle of 1",
       [](ExtractionParams* p) { p->specmin = INT_MAX; p->nspec = 1; p->bundlesize = 1; p->nsubbundles = 1; },
       "specmin"},
      {"aligned specmin past the PSF", [](ExtractionParams* p) { p->specmin = 99975; p->nspec = 25; },
       "exceed"},
      {"nspec INT_MAX", [](ExtractionParams* p) { p->nspec = INT_MAX; }, "nspec"},
      {"nspec INT_MIN", [](ExtractionParams* p) { p->nspec = INT_MIN; }, "nspec"},
      {"bundlesize INT_MAX", [](ExtractionParams* p) { p->bundlesize = INT_MAX; }, "bundlesize"},
      {"bundlesize 0", [](ExtractionParams* p) { p->bundlesize = 0; }, "bundlesize"},
      {"nsubbundles over bundlesize", [](ExtractionParams* p) { p->nsubbundles = 50; }, "nsubbundles"},
      {"nsubbundles INT_MIN", [](ExtractionParams* p) { p->nsubbundles = INT_MIN; }, "nsubbundles"},
      {"nwavestep 1e8", [](ExtractionParams* p) { p->nwavestep = 100000000; }, "nwavestep"},
      {"nwavestep 2000", [](ExtractionParams* p) { p->nwavestep = 2000; }, "nwavestep"},
      {"nwavestep 0", [](ExtractionParams* p) { p->nwavestep = 0; }, "nwavestep"},
      {"wavepad INT_MAX", [](ExtractionParams* p) { p->wavepad = INT_MAX; }, "wavepad"},
      {"wavepad -1", [](ExtractionParams* p) { p->wavepad = -1; }, "wavepad"},
      {"wavepad_eff over its limit", [](ExtractionParams* p) { p->wavepad = 400; p->wavepad_frac = 2; },
       "effective wavelength padding"},
      {"wavepad_frac NaN", [nan](ExtractionParams* p) { p->wavepad_frac = nan; }, "wavepad_frac"},
      {"pixpad_frac 2", [](ExtractionParams* p) { p->pixpad_frac = 2; }, "pixpad_frac"},
      {"regularize Inf", [inf](ExtractionParams* p) { p->regularize = inf; }, "regularize"},
      {"regularize -1", [](ExtractionParams* p) { p->regularize = -1; }, "regularize"},
      {"regularize NaN", [nan](ExtractionParams* p) { p->regularize = nan; }, "regularize"},
      {"regularize 1e300", [](ExtractionParams* p) { p->regularize = 1e300; }, "regularize"},
      {"psferr Inf", [inf](ExtractionParams* p) { p->psferr = inf; }, "psferr"},
      {"psferr NaN", [nan](ExtractionParams* p) { p->psferr = nan; }, "psferr"},
      {"psferr -0.01", [](ExtractionParams* p) { p->psferr = -0.01; }, "psferr"},
      {"dw 1e-300", [](ExtractionParams* p) { p->dw = 1e-300; }, "dw"},
      {"dw 0", [](ExtractionParams* p) { p->dw = 0; }, "dw"},
      {"dw NaN", [nan](ExtractionParams* p) { p->dw = nan; }, "finite"},
      {"wmax below wmin", [](ExtractionParams* p) { p->wmin = 7000; p->wmax = 6000; }, "wmax"},
      {"single bin", [](ExtractionParams* p) { p->wmax = p->wmin; }, "bins"},
      // The r PSF is fitted on [5543, 7827]: a grid that only starts below it is refused too.
      {"grid from 43 A below the domain", [](ExtractionParams* p) { p->wmin = 5500; },
       "beyond the PSF domain [5543, 7827]"},
  };
  for (const ParamsCase& c : cases) {
    ExtractionParams p;
    c.edit(&p);
    const auto t0 = std::chrono::steady_clock::now();
    absl::Status s = ValidateParams(p, *psf_);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.what << ": " << s;
    EXPECT_NE(s.message().find(c.message), std::string::npos) << c.what << ": " << s;
    EXPECT_LT(secs, 0.1) << c.what;  // arithmetic only: no grid is built
    // The planner refuses them too, without crashing or allocating.
    EXPECT_FALSE(BuildPatchPlan(p, *psf_, 4128, 4114).ok()) << c.what;
  }
}

// Every real use (extraction-spec §2.2: desi_extract_spectra, spex, extract_frame,
// desi_benchmark_extract; psferr of desi_proc) and the range ends pass.
TEST_F(ExtractionParamsTest, RealDesiSettingsAndRangeEndsAreAccepted) {
  const ParamsCase cases[] = {
      {"desi_extract_spectra defaults", [](ExtractionParams*) {}, ""},
      {"extract_frame: 1 sub-bundle", [](ExtractionParams* p) { p->nsubbundles = 1; }, ""},
      {"desi_benchmark_extract",
       [](ExtractionParams* p) { p->nwavestep = 30; p->wavepad_frac = 0; p->pixpad_frac = 0; }, ""},
      {"PSF domain grid", [](ExtractionParams* p) { p->has_wavelength = false; }, ""},
      {"b psferr", [](ExtractionParams* p) { p->psferr = 0.04; }, ""},
      {"regularize retry value", [](ExtractionParams* p) { p->regularize = 1e-4; }, ""},
      {"one bundle of 25", [](ExtractionParams* p) { p->specmin = 475; p->nspec = 25; }, ""},
      {"nwavestep 10", [](ExtractionParams* p) { p->nwavestep = 10; }, ""},
      {"nwavestep 200", [](ExtractionParams* p) { p->nwavestep = 200; }, ""},
      {"nwavestep max", [](ExtractionParams* p) { p->nwavestep = ParamLimits::kMaxNWaveStep; }, ""},
      {"bundle of one fibre", [](ExtractionParams* p) { p->bundlesize = 1; p->nsubbundles = 1; }, ""},
      {"whole camera as one bundle",
       [](ExtractionParams* p) { p->bundlesize = 500; p->nsubbundles = 100; }, ""},
      {"barycentric dw", [](ExtractionParams* p) { p->dw = 0.8 / 1.0001; }, ""},
      {"coarse dw", [](ExtractionParams* p) { p->dw = ParamLimits::kMaxDw; }, ""},
      {"large padding", [](ExtractionParams* p) { p->wavepad = 100; p->wavepad_frac = 1; }, ""},
      {"grid within a bin of the domain",
       [](ExtractionParams* p) { p->wmin = 5543 - 0.8; p->wmax = 7827 + 0.8; }, ""},
  };
  for (const ParamsCase& c : cases) {
    ExtractionParams p;
    c.edit(&p);
    EXPECT_TRUE(ValidateParams(p, *psf_).ok()) << c.what << ": " << ValidateParams(p, *psf_);
  }
}

// The estimate sees the r frame as modest and a dense-matrix bomb as huge, before any
// allocation (nwavestep = 2000 took 1.5 GB and 21 s).
TEST_F(ExtractionParamsTest, MemoryEstimateSeparatesNormalFromBombs) {
  ExtractionParams normal;
  normal.want_model = true;
  absl::StatusOr<ExtractionPlan> normal_plan = ExtractionPlan::Create(normal, *psf_);
  ASSERT_TRUE(normal_plan.ok()) << normal_plan.status();
  const MemoryEstimate r = EstimateMemory(*normal_plan, *psf_, 4128LL * 4114, 16);
  EXPECT_GT(r.total(), 0.3e9) << r.Describe();
  EXPECT_LT(r.total(), 1.5e9) << r.Describe();
  // The estimate bounds what the planner and workspace really allocate.
  auto plan = BuildPatchPlan(normal, *psf_, 4128, 4114);
  ASSERT_TRUE(plan.ok());
  const double plan_bytes = static_cast<double>(plan->patches.size() * sizeof(PatchDesc) +
                                                (plan->xc.size() + plan->yc.size()) * sizeof(int32_t));
  EXPECT_GE(r.plan, plan_bytes);
  const double n = plan->max_n;
  EXPECT_GE(r.workspace / 16, 3 * n * n * sizeof(double));  // M band, L, C

  ExtractionParams bomb;
  bomb.bundlesize = 500;
  bomb.nsubbundles = 1;  // 500 x 74 unknowns per patch: an 11 GB normal matrix
  ASSERT_TRUE(ValidateParams(bomb, *psf_).ok());
  EXPECT_GT(EstimateMemory(*ExtractionPlan::Create(bomb, *psf_), *psf_, 4128LL * 4114, 1).total(),
            8e9);
}

}  // namespace
}  // namespace spexd::core
