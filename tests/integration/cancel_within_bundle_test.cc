// A cancel (or a deadline, which sets the same flag) must stop the CPU backend within a
// patch, not at the next bundle (a 10 s deadline ran 10 s over because a
// bundle of a full frame takes seconds). One bundle here, so the old check between
// bundles never fired: the extraction ran to the end and returned OK.
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "core/backend/backend.h"
#include "core/plan/geometry.h"
#include "core/io/preproc.h"
#include "core/io/psf.h"
#include "gtest/gtest.h"
#include "tests/integration/service_fixture.h"

namespace spexd::testing {
namespace {

using Clock = std::chrono::steady_clock;

TEST(CancelWithinBundleTest, CpuBackendStopsBetweenPatchesOfOneBundle) {
  auto psf_value = core::Psf::Load(Inputs().psf_path);
  ASSERT_TRUE(psf_value.ok()) << psf_value.status();
  auto psf = std::make_shared<const core::Psf>(*std::move(psf_value));
  auto image = core::ReadPreproc(Inputs().frame_path, core::PreprocOptions{});
  ASSERT_TRUE(image.ok()) << image.status();
  // One bundle of 25 fibres in 30 patches (5 sub-bundles x 6 wavelength steps).
  core::ExtractionParams params = SmallParams();
  params.nspec = 25;
  params.nwavestep = 10;
  auto geometry = core::Geometry::Create(psf, params, image->height, image->width, false);
  ASSERT_TRUE(geometry.ok()) << geometry.status();
  ASSERT_EQ((*geometry)->plan().nbundles, 1);
  ASSERT_GE((*geometry)->plan().patches.size(), 20u);
  core::BackendOptions bo;
  bo.threads = 1;
  auto backend = core::CreateBackend(bo);
  ASSERT_TRUE(backend.ok());
  std::atomic<bool> cancel{false};
  core::ExtractionJob job;
  job.geometry = *geometry;
  job.image = &*image;
  job.psferr = 0.01;
  job.cancel = &cancel;
  auto run = [&] { return (*backend)->Extract(job, [](core::BundleResult&&) { return absl::OkStatus(); }); };
  ASSERT_TRUE(run().ok());  // warms the bundle's spots
  auto t0 = Clock::now();
  ASSERT_TRUE(run().ok());
  const auto full = Clock::now() - t0;
  // Cancel a quarter of the way through: the backend must stop long before the end.
  std::thread canceller([&] {
    std::this_thread::sleep_for(full / 4);
    cancel.store(true);
  });
  t0 = Clock::now();
  auto cancelled = run();
  const auto took = Clock::now() - t0;
  canceller.join();
  EXPECT_TRUE(absl::IsCancelled(cancelled.status())) << cancelled.status();
  EXPECT_LT(std::chrono::duration<double>(took).count(),
            0.75 * std::chrono::duration<double>(full).count())
      << "full run " << std::chrono::duration<double>(full).count() << " s";
}

}  // namespace
}  // namespace spexd::testing
