// The GPU host waits (core::CudaHostWait: spexd blocks, a backend made alone keeps CUDA's
// choice) only change how a host thread waits: each one is taken by the device (GpuContext reads the flag back and
// refuses a driver that kept another) and gives the very same spectra. Label "gpu": skips
// without a device.
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/backend/backend.h"
#include "core/plan/geometry.h"
#include "gtest/gtest.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

absl::StatusOr<std::vector<core::BundleResult>> Extract(core::CudaHostWait wait,
                                                        const core::ExtractionJob& job,
                                                        std::string* description) {
  absl::StatusOr<core::BackendOptions> options = CudaTestOptions();
  if (!options.ok()) return options.status();
  options->cuda_host_wait = wait;
  auto backend = core::CreateBackend(*options);
  if (!backend.ok()) return backend.status();
  *description = (*backend)->description();
  std::vector<core::BundleResult> out;
  auto s = (*backend)->Extract(job, [&](core::BundleResult&& b) {
    out.push_back(std::move(b));
    return absl::OkStatus();
  });
  if (!s.ok()) return s.status();
  return out;
}

TEST(CudaHostWait, EveryChoiceIsTakenAndGivesTheSameSpectra) {
  {
    absl::StatusOr<core::BackendOptions> options = CudaTestOptions();
    ASSERT_TRUE(options.ok()) << options.status();
    if (auto probe = core::CreateBackend(*options); !probe.ok()) {
      GTEST_SKIP() << "CUDA backend unavailable: " << probe.status();
    }
  }
  core::ExtractionParams p;
  p.specmin = 0;
  p.nspec = 50;
  p.wmin = 6000.0;
  p.wmax = 6200.0;
  auto g = core::Geometry::Create(LoadBundledPsf(), p, 4128, 4114, /*cache_spots=*/false);
  ASSERT_TRUE(g.ok()) << g.status();
  const core::PreprocImage frame = MakeSyntheticFrame(**g, SyntheticOptions{});
  core::ExtractionJob job;
  job.geometry = *g;
  job.image = &frame;

  std::string description;
  auto base = Extract(core::CudaHostWait::kAuto, job, &description);
  ASSERT_TRUE(base.ok()) << base.status();
  ASSERT_EQ(base->size(), 2u);
  // Block last: the flag is the device's, and the binary's later tests then run with it.
  for (core::CudaHostWait w : {core::CudaHostWait::kBlock}) {
    auto run = Extract(w, job, &description);
    ASSERT_TRUE(run.ok()) << core::Name(w) << ": " << run.status();
    EXPECT_NE(description.find(absl::StrCat("host wait ", core::Name(w))), std::string::npos)
        << description;
    ASSERT_EQ(run->size(), base->size());
    for (std::size_t i = 0; i < base->size(); ++i) {
      // Bit-identical: the same kernels on the same data; only the host's waiting differs.
      EXPECT_EQ((*run)[i].flux, (*base)[i].flux) << core::Name(w) << " bundle " << i;
      EXPECT_EQ((*run)[i].ivar, (*base)[i].ivar) << core::Name(w) << " bundle " << i;
      EXPECT_EQ((*run)[i].rdiags, (*base)[i].rdiags) << core::Name(w) << " bundle " << i;
      EXPECT_EQ((*run)[i].chi2pix, (*base)[i].chi2pix) << core::Name(w) << " bundle " << i;
    }
  }
}

}  // namespace
}  // namespace spexd::testing
