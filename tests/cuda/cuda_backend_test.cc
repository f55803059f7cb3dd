// GPU tests of the CUDA backend module (ctest label "gpu"). The module is loaded through
// core::CreateBackend({.kind = BackendKind::kCuda}) exactly as the server does; without a device or
// module every test skips with the reason. Parity with core::CpuBackend at the bar of the
// spec's "Decisions": FLUX, IVAR within 1e-10 of each spectrum's maximum, RESOLUTION
// 1e-10 absolute, PIXMASK_FRACTION 1e-12, CHI2PIX 1e-8 relative.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/backend/backend.h"
#include "core/frame/bundle_parity.h"
#include "core/frame/health_summary.h"
#include "core/cpu/cpu_backend.h"
#include "core/plan/desi_cameras.h"
#include "core/plan/geometry.h"
#include "core/io/preproc.h"
#include "core/io/psf.h"
#include "core/plan/spots.h"
#include "core/sim/simulator.h"
#include "gtest/gtest.h"
#include "tests/cuda/backend_parity.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

using core::BundleResult;

class CudaBackendTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<core::BackendOptions> options = spexd::testing::CudaTestOptions();
    // A misspelt SPEXD_CUDA_* value must fail, not skip: the status becomes the backend's.
    absl::StatusOr<std::unique_ptr<core::Backend>> b =
        options.ok() ? core::CreateBackend(*options) : options.status();
    if (b.ok()) {
      gpu_ = std::move(b).value().release();
    } else {
      skip_reason_ = new std::string(b.status().ToString());
    }
    cpu_ = core::CreateCpuBackend(0).release();
    psf_ = new std::shared_ptr<const core::Psf>(LoadBundledPsf());
  }
  static void TearDownTestSuite() {
    delete gpu_;
    delete cpu_;
    delete psf_;
    delete skip_reason_;
    gpu_ = nullptr;
    cpu_ = nullptr;
    psf_ = nullptr;
    skip_reason_ = nullptr;
  }
  void SetUp() override {
    if (gpu_ == nullptr) GTEST_SKIP() << "CUDA backend unavailable: " << *skip_reason_;
    ASSERT_NE(*psf_, nullptr) << "PSF fixture not found";
  }

  static std::shared_ptr<const core::Geometry> MakeGeometry(core::ExtractionParams p, int height = 4128,
                                                            int width = 4114) {
    auto g = core::Geometry::Create(*psf_, p, height, width, /*cache_spots=*/false);
    EXPECT_TRUE(g.ok()) << g.status();
    return g.ok() ? *g : nullptr;
  }

  // CPU vs GPU on one job; returns the GPU output. `ill_conditioned`: the job has
  // truncated or heavily masked windows, judged with IllConditionedAllowance.
  static RunOutput CheckParity(const std::string& what, const core::ExtractionJob& job,
                               bool ill_conditioned = false) {
    auto ref = RunJob(*cpu_, job);
    EXPECT_TRUE(ref.ok()) << ref.status();
    auto got = RunJob(*gpu_, job);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!ref.ok() || !got.ok()) return RunOutput{};
    if (ill_conditioned) {
      int64_t flagged = 0;
      const Allowance al = IllConditionedAllowance(*job.geometry, *job.image, ref->bundles, &flagged);
      std::cout << "[parity] " << what << ": " << flagged << " ill-conditioned patches" << std::endl;
      ExpectParity(what, Compare(ref->bundles, got->bundles, &al));
    } else {
      ExpectParity(what, Compare(ref->bundles, got->bundles));
    }
    std::cout << "[timing] " << what << ": cpu " << ref->summary.seconds << " s, gpu "
              << got->summary.seconds << " s (" << got->summary.counts.extracted << " patches, "
              << got->summary.counts.failed << " failed, " << got->summary.counts.retried
              << " retried)" << std::endl;
    return std::move(got).value();
  }

  static core::Backend* gpu_;
  static core::Backend* cpu_;
  static std::shared_ptr<const core::Psf>* psf_;
  static std::string* skip_reason_;
};

core::Backend* CudaBackendTest::gpu_ = nullptr;
core::Backend* CudaBackendTest::cpu_ = nullptr;
std::shared_ptr<const core::Psf>* CudaBackendTest::psf_ = nullptr;
std::string* CudaBackendTest::skip_reason_ = nullptr;

TEST_F(CudaBackendTest, DescribesItsDevice) {
  EXPECT_EQ(gpu_->name(), "cuda");
  EXPECT_TRUE(gpu_->healthy());
  std::cout << "[device] " << gpu_->description() << std::endl;
}

class CudaParity : public CudaBackendTest, public ::testing::WithParamInterface<core::Compat> {};

TEST_P(CudaParity, CaseA) {
  const std::string path = SharedDataPath("caseA/preproc.fits.gz");
  if (path.empty()) GTEST_SKIP() << "needs ../shared/data/caseA (or $SPEXD_SHARED_DATA)";
  core::PreprocOptions popts;
  popts.mask_policy = core::MaskPolicy::kAnyBit;  // data README: treat MASK != 0 as IVAR = 0
  auto image = core::ReadPreproc(path, popts);
  ASSERT_TRUE(image.ok()) << image.status();
  core::ExtractionParams p;
  p.specmin = 0;
  p.nspec = 50;
  p.compat = GetParam();
  auto geo = MakeGeometry(p, image->height, image->width);
  ASSERT_NE(geo, nullptr);
  core::ExtractionJob job;
  job.geometry = geo;
  job.image = &*image;
  job.want_model = true;
  CheckParity(std::string("caseA compat=") + core::CompatName(p.compat), job);
  EXPECT_TRUE(gpu_->healthy());
}

TEST_P(CudaParity, SyntheticFrameSubsetsAndRepeats) {
  core::ExtractionParams p;
  p.specmin = 100;
  p.nspec = 50;
  p.wmin = 6000.0;
  p.wmax = 6400.0;
  p.compat = GetParam();
  auto geo = MakeGeometry(p);
  ASSERT_NE(geo, nullptr);
  SyntheticOptions so;
  so.seed = 11;
  core::PreprocImage image = MakeSyntheticFrame(*geo, so);
  core::ExtractionJob job;
  job.geometry = geo;
  job.image = &image;
  job.want_model = true;
  const std::string what = std::string("synthetic compat=") + core::CompatName(p.compat);
  RunOutput first = CheckParity(what, job);
  // Warm repeat: bit-identical (deterministic summation orders everywhere).
  auto again = RunJob(*gpu_, job);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(BitIdentical(first.bundles, again->bundles)) << "repeat differs";
  // A subset request gives the same bundle as the full request.
  job.bundles = {1};
  auto subset = RunJob(*gpu_, job);
  ASSERT_TRUE(subset.ok()) << subset.status();
  ASSERT_EQ(subset->bundles.size(), 1u);
  ASSERT_EQ(first.bundles.size(), 2u);
  EXPECT_TRUE(BitIdentical({first.bundles[1]}, subset->bundles)) << "subset differs";
}

// The backend keeps its bundles' arrays from frame to frame (core::BundleArrayPool): a
// frame assembled into arrays that held another frame's results still matches the CPU
// backend, and its bundles reuse the memory the other frame's gave back.
TEST_F(CudaBackendTest, ArraysRecycledFromAnotherFrameGiveTheCpuBackendsResults) {
  core::ExtractionParams p;
  p.specmin = 100;
  p.nspec = 50;
  p.wmin = 6000.0;
  p.wmax = 6400.0;
  auto geo = MakeGeometry(p);
  ASSERT_NE(geo, nullptr);
  SyntheticOptions other_options;
  other_options.seed = 12;
  core::PreprocImage other = MakeSyntheticFrame(*geo, other_options);
  SyntheticOptions so;
  so.seed = 11;
  core::PreprocImage image = MakeSyntheticFrame(*geo, so);
  core::ExtractionJob job;
  job.geometry = geo;
  job.image = &other;
  std::vector<const double*> other_memory;
  {
    auto first = RunJob(*gpu_, job);
    ASSERT_TRUE(first.ok()) << first.status();
    for (const BundleResult& b : first->bundles) {
      EXPECT_NE(b.recycler, nullptr);
      other_memory.push_back(b.flux.data());
      other_memory.push_back(b.rdiags.data());
    }
  }  // the other frame's arrays go back to the backend
  job.image = &image;
  const RunOutput got = CheckParity("synthetic on recycled arrays", job);
  ASSERT_EQ(got.bundles.size(), 2u);
  int reused = 0;
  for (const BundleResult& b : got.bundles) {
    reused += static_cast<int>(std::count(other_memory.begin(), other_memory.end(), b.flux.data()));
    reused += static_cast<int>(std::count(other_memory.begin(), other_memory.end(), b.rdiags.data()));
  }
  EXPECT_GE(reused, 2) << "the frame did not reuse the other frame's arrays";
}

// Numerical-health numbers: the CUDA backend computes each patch's condition
// estimate on the device from its factor (CheckSolveKernel); the CPU backend from LAPACK's.
// Same rule (core::CholeskyConditionEstimate), so they agree to rounding; the patch outcomes
// and the frame health built from them agree exactly.
TEST_F(CudaBackendTest, HealthNumbersMatchTheCpuBackend) {
  core::ExtractionParams p;
  p.specmin = 100;
  p.nspec = 50;
  p.wmin = 6000.0;
  p.wmax = 6400.0;
  auto geo = MakeGeometry(p);
  ASSERT_NE(geo, nullptr);
  SyntheticOptions so;
  so.seed = 23;
  so.masked_pixels = 2000;
  core::PreprocImage image = MakeSyntheticFrame(*geo, so);
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
  core::ExtractionParams p;
  p.specmin = 100;
  p.nspec = 50;
  p.wmin = 6000.0;
  p.wmax = 6400.0;
  auto geo = MakeGeometry(p);
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

TEST_P(CudaParity, EdgeWindows) {
  // Near the top of the CCD windows are truncated (compat gpu) or skipped (compat cpu);
  // windows beyond it or below row 0 are skipped (spec §2.6 step 5).
  struct Grid {
    double wmin, wmax;
    const char* name;
  };
  for (const Grid& grid : {Grid{7500.0, 7827.0, "top"}, Grid{5543.0, 5700.0, "bottom"}}) {
    core::ExtractionParams p;
    p.specmin = 0;
    p.nspec = 25;
    p.wmin = grid.wmin;
    p.wmax = grid.wmax;
    p.compat = GetParam();
    auto geo = MakeGeometry(p);
    ASSERT_NE(geo, nullptr);
    SyntheticOptions so;
    so.seed = 5;
    core::PreprocImage image = MakeSyntheticFrame(*geo, so);
    core::ExtractionJob job;
    job.geometry = geo;
    job.image = &image;
    job.want_model = true;
    RunOutput out = CheckParity(std::string(grid.name) + " edge compat=" + core::CompatName(p.compat),
                                job, /*ill_conditioned=*/true);
    EXPECT_GT(out.summary.counts.skipped, 0);
    EXPECT_GT(out.summary.counts.extracted, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Compat, CudaParity, ::testing::Values(core::Compat::kGpu, core::Compat::kCpu),
                         [](const auto& param_info) { return std::string(core::CompatName(param_info.param)); });

// Every camera: a full 500-fibre b and z frame (the synthetic b0, z0 PSFs of
// ../shared/data/psf, $SPEXD_SHARED_DATA/psf on a GPU machine) simulated on its own CCD
// (NPIX_Y x NPIX_X: 4096 x 4096, 4128 x 4114) and extracted on its DESI grid with its
// psferr, CPU against CUDA at the spec's bar, for both compat settings. z's top fibres reach
// past the CCD at 9800-9824 A: compat cpu skips those patches on both backends, compat gpu
// extracts them from truncated windows (ill-conditioned: IllConditionedAllowance).
class CudaCameraParity : public CudaBackendTest,
                         public ::testing::WithParamInterface<std::tuple<char, core::Compat>> {};

TEST_P(CudaCameraParity, FullFrame) {
  const auto [arm_name, compat] = GetParam();
  const std::string name = arm_name == 'b' ? "psf/psf-b0-synth.fits" : "psf/psf-z0-synth.fits";
  const std::string path = SharedDataPath(name);
  if (path.empty()) GTEST_SKIP() << "needs ../shared/data/" << name << " (or $SPEXD_SHARED_DATA)";
  auto loaded = core::Psf::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto psf = std::make_shared<const core::Psf>(std::move(*loaded));
  auto arm = core::DesiArmForPsf(*psf);
  ASSERT_TRUE(arm.ok()) << arm.status();
  ASSERT_EQ(arm->arm, arm_name);
  core::ExtractionParams p;
  p.nspec = 500;
  p.wmin = arm->wmin;
  p.wmax = arm->wmax;
  p.dw = arm->dw;
  p.psferr = arm->psferr;
  p.compat = compat;
  auto geo = core::Geometry::Create(psf, p, psf->npix_y(), psf->npix_x(), /*cache_spots=*/false);
  ASSERT_TRUE(geo.ok()) << geo.status();
  core::SimOptions so;
  so.nfibers = 500;
  so.wmin = p.wmin;
  so.wmax = p.wmax;
  so.dw = p.dw;
  so.seed = arm_name == 'b' ? 31 : 37;
  so.num_hot_pixels = 200;
  so.camera = std::string(1, arm_name) + "0";
  auto image = SimulatedImage(*psf, so);
  ASSERT_TRUE(image.ok()) << image.status();
  ASSERT_EQ(image->height, psf->npix_y());
  ASSERT_EQ(image->width, psf->npix_x());
  core::ExtractionJob job;
  job.geometry = *geo;
  job.image = &*image;
  job.psferr = *p.psferr;
  job.want_model = true;
  RunOutput out = CheckParity(std::string(1, arm_name) + " frame compat=" + core::CompatName(compat),
                              job, /*ill_conditioned=*/true);
  EXPECT_EQ(out.summary.counts.failed, 0);
  EXPECT_EQ(out.summary.counts.extracted + out.summary.counts.skipped,
            static_cast<int64_t>((*geo)->plan().patches.size()));
  EXPECT_EQ(out.summary.counts.skipped > 0, arm_name == 'z' && compat == core::Compat::kCpu);
  EXPECT_TRUE(gpu_->healthy());
}

INSTANTIATE_TEST_SUITE_P(
    Cameras, CudaCameraParity,
    ::testing::Combine(::testing::Values('b', 'z'), ::testing::Values(core::Compat::kGpu, core::Compat::kCpu)),
    [](const auto& param_info) {
      return std::string(1, std::get<0>(param_info.param)) + "_" +
             core::CompatName(std::get<1>(param_info.param));
    });

TEST_F(CudaBackendTest, NonFinitePatchesAndMaskedPatchesAreHandled) {
  core::ExtractionParams p;
  p.specmin = 0;
  p.nspec = 25;
  p.wmin = 6000.0;
  p.wmax = 6300.0;
  auto geo = MakeGeometry(p);
  ASSERT_NE(geo, nullptr);
  SyntheticOptions so;
  so.seed = 3;
  core::PreprocImage image = MakeSyntheticFrame(*geo, so);
  const core::PatchPlan& plan = geo->plan();
  // Patch 3 of sub-bundle 0: huge pixel values overflow A^T N d to inf, so the solve is
  // not finite and the retry fails too -> flagged, outputs zero (spec §2.15).
  const core::PatchDesc& bad = plan.patches[3];
  const int cy = bad.y0 + bad.ny / 2, cx = plan.corner_x(bad.fiber0, bad.wave0 + plan.nwavetot / 2) + 8;
  for (int y = cy - 1; y <= cy + 1; ++y) {
    image.image[static_cast<std::size_t>(y) * image.width + cx] = 1e308;
    image.ivar[static_cast<std::size_t>(y) * image.width + cx] = 1e308;
  }
  // Patch 1 of sub-bundle 4: its whole window masked (all bins get the zero-flux prior).
  const core::PatchDesc& masked = plan.patches[static_cast<std::size_t>(4 * (plan.patches.size() / 5) + 1)];
  for (int y = masked.y0; y < masked.y0 + masked.ny; ++y) {
    for (int x = masked.x0; x < masked.x0 + masked.nx; ++x) image.ivar[static_cast<std::size_t>(y) * image.width + x] = 0.0;
  }
  core::ExtractionJob job;
  job.geometry = geo;
  job.image = &image;
  job.want_model = true;
  RunOutput out = CheckParity("non-finite and masked patches", job, /*ill_conditioned=*/true);
  EXPECT_GT(out.summary.counts.failed, 0);
  EXPECT_TRUE(gpu_->healthy());
  // The backend still works afterwards.
  SyntheticOptions clean;
  clean.seed = 4;
  core::PreprocImage image2 = MakeSyntheticFrame(*geo, clean);
  job.image = &image2;
  RunOutput out2 = CheckParity("after failures", job);
  EXPECT_EQ(out2.summary.counts.failed, 0);
}

// Small GPU-only job for compute-sanitizer (memcheck, racecheck): 5 patches, model on,
// one non-finite patch so that the retry path runs too.
class CudaSanitizer : public CudaBackendTest, public ::testing::WithParamInterface<core::Compat> {};

TEST_P(CudaSanitizer, SmallFrame) {
  core::ExtractionParams p;
  p.specmin = 25;
  p.nspec = 25;
  p.wmin = 6000.0;
  p.wmax = 6039.2;  // 50 bins: one patch per sub-bundle
  p.compat = GetParam();
  auto geo = MakeGeometry(p);
  ASSERT_NE(geo, nullptr);
  SyntheticOptions so;
  so.seed = 9;
  core::PreprocImage image = MakeSyntheticFrame(*geo, so);
  const core::PatchDesc& bad = geo->plan().patches[1];
  const std::size_t at = static_cast<std::size_t>(bad.y0 + bad.ny / 2) * image.width + bad.x0 + bad.nx / 2;
  image.image[at] = 1e308;
  image.ivar[at] = 1e308;
  core::ExtractionJob job;
  job.geometry = geo;
  job.image = &image;
  job.want_model = true;
  auto out = RunJob(*gpu_, job);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_GT(out->summary.counts.extracted, 0);
  EXPECT_GT(out->summary.counts.failed, 0);
  EXPECT_TRUE(gpu_->healthy());
}

// Non-default shapes (nwavetot = 12, n = 72 or 84, one patch per sub-bundle): the kernels
// take every size from the plan. Small enough for racecheck.
TEST_P(CudaSanitizer, TinyShapes) {
  core::ExtractionParams p;
  p.specmin = 50;
  p.nspec = 25;
  p.wmin = 6000.0;
  p.wmax = 6000.8;
  p.nwavestep = 2;
  p.wavepad = 5;
  p.wavepad_frac = 0.0;
  p.compat = GetParam();
  auto geo = MakeGeometry(p);
  ASSERT_NE(geo, nullptr);
  SyntheticOptions so;
  so.seed = 21;
  core::PreprocImage image = MakeSyntheticFrame(*geo, so);
  core::ExtractionJob job;
  job.geometry = geo;
  job.image = &image;
  job.want_model = true;
  RunOutput out = CheckParity(std::string("tiny shapes compat=") + core::CompatName(p.compat), job);
  EXPECT_EQ(out.summary.counts.extracted, 5);
}

INSTANTIATE_TEST_SUITE_P(Compat, CudaSanitizer, ::testing::Values(core::Compat::kGpu, core::Compat::kCpu),
                         [](const auto& param_info) { return std::string(core::CompatName(param_info.param)); });

TEST_F(CudaBackendTest, RejectsMismatchedImage) {
  core::ExtractionParams p;
  p.nspec = 25;
  auto geo = MakeGeometry(p);
  ASSERT_NE(geo, nullptr);
  core::PreprocImage image;
  image.height = 10;
  image.width = 10;
  image.image.assign(100, 0.0);
  image.ivar.assign(100, 0.0);
  core::ExtractionJob job;
  job.geometry = geo;
  job.image = &image;
  auto s = gpu_->Extract(job, [](BundleResult&&) { return absl::OkStatus(); });
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(gpu_->healthy());
}

}  // namespace
}  // namespace spexd::testing
