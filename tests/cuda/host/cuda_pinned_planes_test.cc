// Float32 planes in memory pinned by the backend's PlanePinner (what the server decodes
// preproc files into) are uploaded straight from their memory, with no host staging, and
// give the very same spectra as the staged paths. Label "gpu": skips without a device.
#include <memory>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/plan/geometry.h"
#include "core/io/plane_buffer.h"
#include "core/io/psf.h"
#include "gtest/gtest.h"
#include "tests/cuda/host/extract_run.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

using Run = ExtractRun;

absl::StatusOr<Run> Extract(core::Backend& b, const std::shared_ptr<const core::Geometry>& g,
                            const core::PreprocImage& image) {
  return ExtractAll(b, g, image, /*want_model=*/false);
}

TEST(CudaPinnedPlanes, UploadedWithoutStagingAndIdenticalToTheStagedPaths) {
  absl::StatusOr<core::BackendOptions> options = CudaTestOptions();
  ASSERT_TRUE(options.ok()) << options.status();
  auto backend = core::CreateBackend(*options);
  if (!backend.ok()) GTEST_SKIP() << "CUDA backend unavailable: " << backend.status();
  ASSERT_NE((*backend)->gpu(), nullptr) << "the CUDA backend has GPU capabilities";
  std::shared_ptr<core::PlaneMemoryPinner> pinner = (*backend)->gpu()->PlanePinner();
  ASSERT_NE(pinner, nullptr) << "the CUDA backend pins planes";
  core::ExtractionParams p;
  p.specmin = 25;
  p.nspec = 50;
  p.wmin = 6000.0;
  p.wmax = 6100.0;
  auto g = core::Geometry::Create(LoadBundledPsf(), p, 4128, 4114, /*cache_spots=*/false);
  ASSERT_TRUE(g.ok()) << g.status();
  const core::PreprocImage frame = MakeSyntheticFrame(**g, SyntheticOptions{});

  core::PlaneBufferPool pool(int64_t{1} << 30);
  pool.set_pinner(pinner);
  const core::PreprocImage pinned = Float32Planes(frame, &pool);
  const core::PreprocImage pageable = Float32Planes(frame, nullptr);
  core::PreprocImage widened;  // float64 planes holding the same float32 values
  widened.height = frame.height;
  widened.width = frame.width;
  widened.image.assign(pageable.image32.begin(), pageable.image32.end());
  widened.ivar.assign(pageable.ivar32.begin(), pageable.ivar32.end());

  auto staged = Extract(**backend, *g, pageable);
  ASSERT_TRUE(staged.ok()) << staged.status();
  auto direct = Extract(**backend, *g, pinned);
  ASSERT_TRUE(direct.ok()) << direct.status();
  auto narrowed = Extract(**backend, *g, widened);
  ASSERT_TRUE(narrowed.ok()) << narrowed.status();
  ASSERT_FALSE(direct->bundles.empty());
  EXPECT_GT(direct->summary.counts.extracted, 0);
  // The direct path does no host staging at all; the others copy or narrow into it.
  EXPECT_EQ(direct->summary.stage_seconds["upload_host"], 0.0);
  EXPECT_GT(staged->summary.stage_seconds["upload_host"], 0.0);
  ExpectSameBundles(staged->bundles, direct->bundles, "pinned vs pageable float32");
  ExpectSameBundles(narrowed->bundles, direct->bundles, "pinned float32 vs float64 planes");
}

}  // namespace
}  // namespace spexd::testing
