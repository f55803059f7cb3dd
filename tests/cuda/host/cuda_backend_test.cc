// The CUDA backend against the CPU backend (cuda_backend_fixture.h): the reference case,
// synthetic frames (subsets, warm repeats, recycled arrays), the CCD's edges, non-finite
// and masked patches, and a mismatched image refused.
#include <algorithm>
#include <string>
#include <vector>

#include "core/frame/extraction_result.h"
#include "core/io/preproc.h"
#include "gtest/gtest.h"
#include "tests/cuda/host/backend_parity.h"
#include "tests/cuda/host/cuda_backend_fixture.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

using core::BundleResult;

TEST_F(CudaBackendTest, DescribesItsDevice) {
  EXPECT_EQ(gpu_->name(), "cuda");
  EXPECT_TRUE(gpu_->healthy());
  std::cout << "[device] " << gpu_->description() << std::endl;
}

class CudaParity : public CudaBackendTest, public ::testing::WithParamInterface<core::Compat> {};

TEST_P(CudaParity, CaseA) {
  const std::string path = SharedDataPath("caseA/preproc.fits.gz");
  if (path.empty()) GTEST_SKIP() << "needs the reference data's caseA/ (or $SPEXD_SHARED_DATA)";
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
  CheckParity(std::string("caseA compat=") + core::CompatName(GetParam()), job);
  EXPECT_TRUE(gpu_->healthy());
}

TEST_P(CudaParity, SyntheticFrameSubsetsAndRepeats) {
  auto geo = MakeGeometry(100, 50, 6000.0, 6400.0, GetParam());
  ASSERT_NE(geo, nullptr);
  core::PreprocImage image = Synthetic(*geo, 11);
  core::ExtractionJob job;
  job.geometry = geo;
  job.image = &image;
  job.want_model = true;
  const std::string what = std::string("synthetic compat=") + core::CompatName(GetParam());
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
    core::PreprocImage image = Synthetic(*geo, 5);
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

// The backend keeps its bundles' arrays from frame to frame (core::BundleArrayPool): a
// frame assembled into arrays that held another frame's results still matches the CPU
// backend, and its bundles reuse the memory the other frame's gave back.
TEST_F(CudaBackendTest, ArraysRecycledFromAnotherFrameGiveTheCpuBackendsResults) {
  auto geo = MakeGeometry(100, 50, 6000.0, 6400.0);
  ASSERT_NE(geo, nullptr);
  core::PreprocImage other = Synthetic(*geo, 12);
  core::PreprocImage image = Synthetic(*geo, 11);
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

TEST_F(CudaBackendTest, NonFinitePatchesAndMaskedPatchesAreHandled) {
  auto geo = MakeGeometry(0, 25, 6000.0, 6300.0);
  ASSERT_NE(geo, nullptr);
  core::PreprocImage image = Synthetic(*geo, 3);
  const core::PatchPlan& plan = geo->plan();
  // Patch 3 of sub-bundle 0: its solve and retry fail (OverflowPatch).
  OverflowPatch(plan, plan.patches[3], &image);
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
  core::PreprocImage image2 = Synthetic(*geo, 4);
  job.image = &image2;
  RunOutput out2 = CheckParity("after failures", job);
  EXPECT_EQ(out2.summary.counts.failed, 0);
}

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
