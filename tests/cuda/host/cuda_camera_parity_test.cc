// Every camera's full frame, CPU against CUDA (cuda_backend_fixture.h).
#include <memory>
#include <string>
#include <tuple>

#include "core/io/psf.h"
#include "core/plan/desi_cameras.h"
#include "core/plan/geometry.h"
#include "core/sim/simulator.h"
#include "gtest/gtest.h"
#include "tests/cuda/host/backend_parity.h"
#include "tests/cuda/host/cuda_backend_fixture.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

// Every camera: a full 500-fibre b and z frame (the synthetic b0, z0 PSFs of
// the reference data's psf/, $SPEXD_SHARED_DATA/psf on a GPU machine) simulated on its own CCD
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
  if (path.empty()) GTEST_SKIP() << "needs the reference data's " << name << " (or $SPEXD_SHARED_DATA)";
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

}  // namespace
}  // namespace spexd::testing
