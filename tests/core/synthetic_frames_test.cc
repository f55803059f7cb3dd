// The test frames of tests/synthetic_frames.h, checked here on the host: the GPU tests
// that use the padded-grid frame cannot run without a device.
#include "tests/synthetic_frames.h"

#include <algorithm>
#include <memory>
#include <string>

#include "core/plan/geometry.h"
#include "core/io/preproc.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

// Photons in the stamp rectangle of fibre f at fullwave index w, minus the read-noise
// floor's expectation (0): the signal the padding of that patch sees.
double StampSignal(const core::PatchPlan& plan, const core::PreprocImage& image, int f, int w) {
  double sum = 0;
  const int y0 = plan.corner_y(f, w), x0 = plan.corner_x(f, w);
  for (int y = std::max(0, y0); y < std::min(image.height, y0 + plan.stamp_ny); ++y) {
    for (int x = std::max(0, x0); x < std::min(image.width, x0 + plan.stamp_nx); ++x) {
      sum += image.image[static_cast<std::size_t>(y) * image.width + x];
    }
  }
  return sum;
}

// Both ends of the padded grid are lit, also where it reaches past the PSF's domain (the
// bottom and top edge grids of the CUDA EdgeWindows test), and masked pixels land on the
// plan's rows.
TEST(SyntheticFramesTest, PaddedGridFrameLightsBothEndsOfThePadding) {
  std::shared_ptr<const core::Psf> psf = LoadBundledPsf();
  ASSERT_NE(psf, nullptr);
  struct Grid {
    double wmin, wmax;
  };
  for (const Grid& g : {Grid{6000.0, 6400.0}, Grid{5543.0, 5700.0}, Grid{7500.0, 7827.0}}) {
    SCOPED_TRACE(::testing::Message() << g.wmin << "-" << g.wmax);
    core::ExtractionParams p;
    p.specmin = 25;
    p.nspec = 25;
    p.wmin = g.wmin;
    p.wmax = g.wmax;
    auto geo = core::Geometry::Create(psf, p, 4128, 4114, /*cache_spots=*/false);
    ASSERT_TRUE(geo.ok()) << geo.status();
    const core::PatchPlan& plan = (*geo)->plan();
    SyntheticOptions so;
    so.seed = 5;
    const core::PreprocImage image = MakeSyntheticFrame(**geo, so);
    ASSERT_EQ(image.height, 4128);
    ASSERT_EQ(image.width, 4114);
    ASSERT_EQ(image.image.size(), 4128u * 4114u);
    const int last = static_cast<int>(plan.fullwave.size()) - 1;
    for (int f : {plan.specmin, plan.specmin + plan.nspec - 1}) {
      // The continuum alone gives >= ~90 photons per bin; the noise over a stamp of
      // ~190 pixels is ~40 photons.
      if (plan.corner_y(f, 0) >= 0) {
        EXPECT_GT(StampSignal(plan, image, f, 0), 60.0) << f;
      }
      if (plan.corner_y(f, last) + plan.stamp_ny <= image.height) {
        EXPECT_GT(StampSignal(plan, image, f, last), 60.0) << f;
      }
    }
    EXPECT_GT(image.n_masked, 50u);
    EXPECT_LT(image.n_masked, 20000u);
  }
}

// The service tests' file: a cut-out that holds every window of its grid, the requested
// defects, and a FIBERMAP; the variants change what they say and nothing else.
TEST(SyntheticFramesTest, CutOutPreprocFileAndItsVariants) {
  std::shared_ptr<const core::Psf> psf = LoadBundledPsf();
  ASSERT_NE(psf, nullptr);
  SyntheticFrameOptions o;
  auto bytes = MakeSyntheticPreproc(*psf, o);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto image = core::ReadPreprocFromMemory(bytes->data(), bytes->size(), "synthetic",
                                           {.mask_policy = core::MaskPolicy::kDesispec,
                                            .require_fibermap = true});
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_LT(image->height, 1000);  // a cut-out, not the 4128-row CCD
  EXPECT_LT(image->width, 1000);  // of 4114 columns
  EXPECT_EQ(image->n_masked, 1u);  // the hot pixel; BADREADNOISE is not masked by 0x2FF
  core::ExtractionParams p;
  p.nspec = o.nfibers;
  p.wmin = o.wmin;
  p.wmax = o.wmax;
  EXPECT_TRUE(core::Geometry::Create(psf, p, image->height, image->width).ok());

  o.dead_columns = 3;
  auto dead = MakeSyntheticPreproc(*psf, o);
  ASSERT_TRUE(dead.ok());
  auto dead_image = core::ReadPreprocFromMemory(dead->data(), dead->size(), "dead",
                                                {.mask_policy = core::MaskPolicy::kDesispec});
  ASSERT_TRUE(dead_image.ok()) << dead_image.status();
  EXPECT_EQ(dead_image->n_masked, 1u + 3u * static_cast<unsigned>(dead_image->height));
}

}  // namespace
}  // namespace spexd::testing
