// Where the second-to-last batch's finalise (pixel model, chi2pix, column sums) and the
// rest of its download are enqueued: by default after the last batch's reduction on the
// compute stream (cuda/batch_extractor.cc, issue 25 session 32), with
// SPEXD_CUDA_DEFER_FINALISE=0 right after its own decorrelation. Only the order of
// kernels and copies on the streams differs, so the spectra must be bit-identical; a
// finalise that ran before its batch's decorrelation, or a download before its finalise,
// would read another batch's solution or stale outputs and differ. Three bundles as three
// batches (SPEXD_CUDA_BATCH_PLAN=1), the model requested. Label "gpu": skips without a
// device.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/plan/geometry.h"
#include "gtest/gtest.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

absl::StatusOr<std::vector<core::BundleResult>> ExtractWithFinalise(const char* defer,
                                                                    const core::ExtractionJob& job) {
  absl::StatusOr<core::BackendOptions> options = CudaOptionsFromEnv();
  if (!options.ok()) return options.status();
  setenv("SPEXD_CUDA_BATCH_PLAN", "1", 1);
  setenv("SPEXD_CUDA_DEFER_FINALISE", defer, 1);
  auto backend = core::CreateBackend(*options);  // the switches are read at creation
  unsetenv("SPEXD_CUDA_BATCH_PLAN");
  unsetenv("SPEXD_CUDA_DEFER_FINALISE");
  if (!backend.ok()) return backend.status();
  std::vector<core::BundleResult> out;
  auto s = (*backend)->Extract(job, [&](core::BundleResult&& b) {
    out.push_back(std::move(b));
    return absl::OkStatus();
  });
  if (!s.ok()) return s.status();
  return out;
}

TEST(CudaFinaliseOrder, DeferredAndInlineFinaliseGiveTheSameBits) {
  {
    absl::StatusOr<core::BackendOptions> options = CudaOptionsFromEnv();
    ASSERT_TRUE(options.ok()) << options.status();
    if (auto probe = core::CreateBackend(*options); !probe.ok()) {
      GTEST_SKIP() << "CUDA backend unavailable: " << probe.status();
    }
  }
  core::ExtractionParams p;
  p.specmin = 0;
  p.nspec = 75;
  p.wmin = 6000.0;
  p.wmax = 6200.0;
  auto g = core::Geometry::Create(LoadBundledPsf(), p, 4128, 4114, /*cache_spots=*/false);
  ASSERT_TRUE(g.ok()) << g.status();
  const core::PreprocImage frame = MakeSyntheticFrame(**g, SyntheticOptions{});
  core::ExtractionJob job;
  job.geometry = *g;
  job.image = &frame;
  job.want_model = true;
  auto deferred = ExtractWithFinalise("1", job);
  ASSERT_TRUE(deferred.ok()) << deferred.status();
  auto inline_ = ExtractWithFinalise("0", job);
  ASSERT_TRUE(inline_.ok()) << inline_.status();
  ASSERT_EQ(deferred->size(), 3u);
  ASSERT_EQ(inline_->size(), deferred->size());
  for (std::size_t i = 0; i < deferred->size(); ++i) {
    const core::BundleResult& a = (*deferred)[i];
    const core::BundleResult& b = (*inline_)[i];
    EXPECT_EQ(a.bundle, b.bundle);
    EXPECT_EQ(a.flux, b.flux) << "bundle " << i;
    EXPECT_EQ(a.ivar, b.ivar) << "bundle " << i;
    EXPECT_EQ(a.rdiags, b.rdiags) << "bundle " << i;
    EXPECT_EQ(a.chi2pix, b.chi2pix) << "bundle " << i;
    EXPECT_EQ(a.pixmask_fraction, b.pixmask_fraction) << "bundle " << i;
    EXPECT_EQ(a.model, b.model) << "bundle " << i;
    EXPECT_FALSE(a.model.empty()) << "bundle " << i;
  }
}

}  // namespace
}  // namespace spexd::testing
