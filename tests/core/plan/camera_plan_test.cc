// Full-frame plans of the b and z cameras (the synthetic b0 and z0 PSFs of
// the reference data's psf/) on their DESI grids (core/plan/desi_cameras.h): each camera's CCD
// size, and the z traces that reach past the CCD top at 9800-9824 A handled as
// gpu_specter's CPU path handles them (extraction-spec §2.6 step 5: the patch is skipped,
// its bins stay flux = ivar = 0; the GPU path truncates the window instead). The agreement
// of the extracted bins with gpu_specter itself is tests/python/test_gpu_specter_cameras.py.
#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/backend/extract_frame.h"
#include "core/cpu/cpu_backend.h"
#include "core/io/psf.h"
#include "core/plan/desi_cameras.h"
#include "core/plan/extraction_params.h"
#include "core/plan/geometry.h"
#include "core/plan/patch_plan.h"
#include "core/sim/simulator.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

std::shared_ptr<const Psf> LoadCameraPsf(const std::string& path) {
  auto psf = Psf::Load(path);
  EXPECT_TRUE(psf.ok()) << psf.status();
  return psf.ok() ? std::make_shared<const Psf>(std::move(*psf)) : nullptr;
}

// All 500 fibres on the camera's DESI grid.
ExtractionParams CameraFrameParams(const DesiArm& arm, Compat compat) {
  ExtractionParams p;
  p.nspec = 500;
  p.wmin = arm.wmin;
  p.wmax = arm.wmax;
  p.dw = arm.dw;
  p.psferr = arm.psferr;
  p.compat = compat;
  return p;
}

// Output columns [out_col, out_col + nkeep) of patch `d` whose stamp, for a core fibre,
// reaches past row `height` (the patch's core-y range then ends above the CCD).
bool CoreStampPastTop(const PatchPlan& plan, const PatchDesc& d, int height) {
  for (int r = 0; r < plan.nper; ++r) {
    const int fiber = d.fiber0 + d.core_row + r;
    for (int c = d.out_col; c < d.out_col + d.nkeep; ++c) {
      if (plan.corner_y(fiber, c + plan.wavepad_eff) + plan.stamp_ny > height) return true;
    }
  }
  return false;
}

TEST(CameraPlanTest, EveryArmIsFoundFromItsPsfDomain) {
  auto r = LoadCameraPsf(testing::BundledPsfPath());
  ASSERT_NE(r, nullptr);
  auto arm = DesiArmForPsf(*r);
  ASSERT_TRUE(arm.ok()) << arm.status();
  EXPECT_EQ(arm->arm, 'r');
  EXPECT_EQ(arm->GridText(), "5760.0,7620.0,0.8");
  EXPECT_EQ(arm->psferr, 0.01);
  SPEXD_REQUIRE_SHARED_DATA(b_path, "psf/psf-b0-synth.fits");
  SPEXD_REQUIRE_SHARED_DATA(z_path, "psf/psf-z0-synth.fits");
  auto b = DesiArmForPsf(*LoadCameraPsf(b_path));
  auto z = DesiArmForPsf(*LoadCameraPsf(z_path));
  ASSERT_TRUE(b.ok() && z.ok());
  EXPECT_EQ(b->arm, 'b');
  EXPECT_EQ(b->GridText(), "3600.0,5800.0,0.8");
  EXPECT_EQ(b->psferr, 0.04);
  EXPECT_EQ(z->arm, 'z');
  EXPECT_EQ(z->GridText(), "7520.0,9824.0,0.8");
  EXPECT_EQ(z->psferr, 0.01);
}

// Without a requested grid the plan extracts the PSF's whole domain; RequestedGrid is the
// one rule, and what spexctl -v reports (not ExtractionParams' r-camera defaults).
TEST(CameraPlanTest, WithoutAGridThePlanTakesThePsfDomain) {
  std::vector<std::string> paths = {testing::BundledPsfPath(),
                                    testing::SharedDataPath("psf/psf-b0-synth.fits")};
  for (const std::string& path : paths) {
    if (path.empty()) continue;
    auto psf = LoadCameraPsf(path);
    ASSERT_NE(psf, nullptr);
    ExtractionParams p;
    p.has_wavelength = false;
    auto plan = ExtractionPlan::Create(p, *psf);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const GridRequest g = RequestedGrid(p, *psf);
    EXPECT_EQ(plan->grid().wmin, psf->wavemin()) << path;
    EXPECT_EQ(plan->grid().wmax, psf->wavemax()) << path;
    EXPECT_EQ(plan->grid().dw, 0.8) << path;
    EXPECT_EQ(g.wmin, plan->grid().wmin);
    EXPECT_EQ(g.wmax, plan->grid().wmax);
    EXPECT_EQ(plan->wave().front(), psf->wavemin());
    EXPECT_LE(plan->wave().back(), psf->wavemax() + 0.4);
    EXPECT_NE(plan->grid().wmin, p.wmin) << "the r default grid leaked into the plan";
  }
}

TEST(CameraPlanTest, BFrameOnItsSquareCcd) {
  SPEXD_REQUIRE_SHARED_DATA(path, "psf/psf-b0-synth.fits");
  auto psf = LoadCameraPsf(path);
  ASSERT_NE(psf, nullptr);
  EXPECT_EQ(psf->npix_y(), 4096);
  EXPECT_EQ(psf->npix_x(), 4096);
  const DesiArm arm = *DesiArmForPsf(*psf);
  // The CCD the PSF was fitted on bounds the image: an r-sized image is refused.
  auto too_big = Geometry::Create(psf, CameraFrameParams(arm, Compat::kGpu), 4128, 4114, false);
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.status().message().find("fitted on a 4096 x 4096 CCD"), std::string::npos)
      << too_big.status();
  for (Compat compat : {Compat::kCpu, Compat::kGpu}) {
    auto plan = BuildPatchPlan(CameraFrameParams(arm, compat), *psf, 4096, 4096);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->nwave, 2751);
    EXPECT_EQ(plan->image_height, 4096);
    EXPECT_EQ(plan->image_width, 4096);
    EXPECT_EQ(plan->nbundles, 20);
    // b's grid keeps every window inside the CCD: no patch is skipped or truncated.
    int outside = 0;
    for (const PatchDesc& d : plan->patches) {
      EXPECT_EQ(d.skipped, kSkipNone);
      if (d.y0 < 0 || d.y0 + d.ny > 4096 || d.x0 < 0 || d.x0 + d.nx > 4096) ++outside;
    }
    EXPECT_EQ(outside, 0);
    EXPECT_EQ(plan->patches.size(), 20u * 5u * 56u);  // ceil(2751 / 50) = 56 steps
  }
}

class ZCameraPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SPEXD_REQUIRE_SHARED_DATA(path, "psf/psf-z0-synth.fits");
    psf_ = LoadCameraPsf(path);
    ASSERT_NE(psf_, nullptr);
    arm_ = *DesiArmForPsf(*psf_);
  }
  std::shared_ptr<const Psf> psf_;
  DesiArm arm_;
};

TEST_F(ZCameraPlanTest, TracesPastTheCcdTopAreSkippedOnTheCpuPathAndTruncatedOnTheGpuPath) {
  EXPECT_EQ(psf_->npix_y(), 4128);
  EXPECT_EQ(psf_->npix_x(), 4114);
  const int height = psf_->npix_y();
  auto cpu = BuildPatchPlan(CameraFrameParams(arm_, Compat::kCpu), *psf_, height, psf_->npix_x());
  auto gpu = BuildPatchPlan(CameraFrameParams(arm_, Compat::kGpu), *psf_, height, psf_->npix_x());
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  EXPECT_EQ(cpu->nwave, 2881);
  ASSERT_EQ(cpu->patches.size(), gpu->patches.size());
  ASSERT_EQ(cpu->fullwave[static_cast<std::size_t>(cpu->wavepad_eff)], cpu->wave.front());
  std::set<int> skipped_fibers;
  int skipped = 0;
  for (std::size_t i = 0; i < cpu->patches.size(); ++i) {
    const PatchDesc& c = cpu->patches[i];
    const PatchDesc& g = gpu->patches[i];
    const bool past_top = c.y0 + c.ny > height;  // the untruncated window
    EXPECT_NE(c.skipped, kSkipBottomEdge);
    EXPECT_NE(c.skipped, kSkipXEdge);
    EXPECT_EQ(c.skipped == kSkipTopEdge, past_top) << "patch " << i;
    // A core stamp above the CCD always takes its window past the top.
    if (CoreStampPastTop(*cpu, c, height)) {
      EXPECT_TRUE(past_top) << "patch " << i;
    }
    // The GPU path extracts the same patch from a window cut at the top row.
    EXPECT_EQ(g.skipped, kSkipNone) << "patch " << i;
    EXPECT_EQ(g.y0, c.y0);
    EXPECT_EQ(g.ny, past_top ? height - c.y0 : c.ny) << "patch " << i;
    if (!past_top) continue;
    ++skipped;
    // Only the red end: every skipped core bin is at or above 9700 A.
    EXPECT_GE(cpu->wave[static_cast<std::size_t>(c.out_col)], 9700.0) << "patch " << i;
    for (int r = 0; r < cpu->nper; ++r) skipped_fibers.insert(c.out_row + r);
  }
  EXPECT_GT(skipped, 0);
  // The reference data's PSF notes: the top rows of fibres 0-29 and 470-499 reach past the CCD
  // at 9800-9824 A; whole sub-bundles (5 fibres) are skipped, their neighbours' padding
  // spectra included, so at most one sub-bundle more on each side.
  for (int f = 0; f < 30; ++f) EXPECT_EQ(skipped_fibers.count(f), 1u) << "fibre " << f;
  for (int f = 470; f < 500; ++f) EXPECT_EQ(skipped_fibers.count(f), 1u) << "fibre " << f;
  for (int f : skipped_fibers) EXPECT_TRUE(f < 35 || f >= 465) << "fibre " << f;
}

// The CPU backend on the z frame's red end (fibres 0-24, 9700-9824 A, compat cpu): the
// bins of the skipped patches are exactly the ones left at flux = ivar = 0, every other
// bin is extracted.
TEST_F(ZCameraPlanTest, SkippedPatchesLeaveZeroBinsAndTheRestIsExtracted) {
  ExtractionParams p = CameraFrameParams(arm_, Compat::kCpu);
  p.nspec = 25;
  p.wmin = 9700.0;
  auto geo = Geometry::Create(psf_, p, psf_->npix_y(), psf_->npix_x(), false);
  ASSERT_TRUE(geo.ok()) << geo.status();
  SimOptions so;
  so.nfibers = 25;
  so.wmin = p.wmin;
  so.wmax = p.wmax;
  so.dw = p.dw;
  so.seed = 5;
  so.num_threads = 2;
  auto image = testing::SimulatedImage(*psf_, so);
  ASSERT_TRUE(image.ok()) << image.status();
  ExtractionJob job;
  job.geometry = *geo;
  job.image = &*image;
  job.psferr = *p.psferr;
  auto backend = CreateCpuBackend(2);
  auto frame = ExtractFrame(*backend, job);
  ASSERT_TRUE(frame.ok()) << frame.status();
  const PatchPlan& plan = (*geo)->plan();
  std::vector<char> in_skipped(static_cast<std::size_t>(frame->nspec) * frame->nwave, 0);
  for (const PatchDesc& d : plan.patches) {
    if (d.skipped == kSkipNone) continue;
    EXPECT_EQ(d.skipped, kSkipTopEdge);
    for (int r = 0; r < plan.nper; ++r) {
      for (int c = d.out_col; c < d.out_col + d.nkeep; ++c) {
        in_skipped[static_cast<std::size_t>(d.out_row + r) * frame->nwave + c] = 1;
      }
    }
  }
  int zero = 0;
  for (std::size_t i = 0; i < in_skipped.size(); ++i) {
    if (in_skipped[i]) {
      ++zero;
      EXPECT_EQ(frame->flux[i], 0.0) << i;
      EXPECT_EQ(frame->ivar[i], 0.0) << i;
    } else {
      EXPECT_GT(frame->ivar[i], 0.0) << i;
    }
  }
  EXPECT_GT(zero, 0);
  EXPECT_EQ(frame->counts.skipped, static_cast<int64_t>(std::count_if(
      plan.patches.begin(), plan.patches.end(), [](const PatchDesc& d) { return d.skipped != 0; })));
}

}  // namespace
}  // namespace spexd::core
