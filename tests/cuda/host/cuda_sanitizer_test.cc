// Small CUDA jobs sized for compute-sanitizer (memcheck, racecheck; scripts select them by
// the CudaSanitizer name) that also run in the ordinary GPU tests (cuda_backend_fixture.h).
#include <string>

#include "gtest/gtest.h"
#include "tests/cuda/host/backend_parity.h"
#include "tests/cuda/host/cuda_backend_fixture.h"

namespace spexd::testing {
namespace {

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
  core::PreprocImage image = Synthetic(*geo, 9);
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
  core::PreprocImage image = Synthetic(*geo, 21);
  core::ExtractionJob job;
  job.geometry = geo;
  job.image = &image;
  job.want_model = true;
  RunOutput out = CheckParity(std::string("tiny shapes compat=") + core::CompatName(GetParam()), job);
  EXPECT_EQ(out.summary.counts.extracted, 5);
}

INSTANTIATE_TEST_SUITE_P(Compat, CudaSanitizer, ::testing::Values(core::Compat::kGpu, core::Compat::kCpu),
                         [](const auto& param_info) { return std::string(core::CompatName(param_info.param)); });

}  // namespace
}  // namespace spexd::testing
