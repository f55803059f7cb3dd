// A CUDA backend keeps the device state of as many geometries as device memory allows;
// one over that takes over the buffers of the least recently used (GeometryState::Create's
// `recycled`), larger or smaller than it needs. Here the bound is two
// (SPEXD_TEST_CUDA_FAULTS=warm_geometries=2), so that a third geometry recycles. Every
// extraction must be bit-identical to a fresh backend's of the same geometry, whatever
// state the buffers were left in. Label "gpu": skips without a device.
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

struct Case {
  std::shared_ptr<const core::Geometry> geometry;
  core::PreprocImage frame;
};

absl::StatusOr<std::vector<core::BundleResult>> Extract(core::Backend& b, const Case& c) {
  core::ExtractionJob job;
  job.geometry = c.geometry;
  job.image = &c.frame;
  return ExtractBundles(b, job);
}

TEST(CudaGeometryRecycle, EvictedBuffersGiveTheFreshBackendsSpectra) {
  absl::StatusOr<core::BackendOptions> options = CudaTestOptions();
  ASSERT_TRUE(options.ok()) << options.status();
  // Read when the backend is created only: the fresh backends below keep the default.
  ::setenv("SPEXD_TEST_CUDA_FAULTS", "warm_geometries=2", 1);
  auto backend = core::CreateBackend(*options);
  ::unsetenv("SPEXD_TEST_CUDA_FAULTS");
  if (!backend.ok()) GTEST_SKIP() << "CUDA backend unavailable: " << backend.status();

  // Three geometries of different sizes (fibres, wavelength ranges), so that a recycled
  // spots buffer is sometimes too small (reallocated) and sometimes too large (kept).
  struct Shape { int specmin, nspec; double wmin, wmax; };
  const Shape shapes[] = {{0, 50, 6000.0, 6200.0}, {25, 25, 6500.0, 6600.0}, {50, 75, 7000.0, 7300.0}};
  std::vector<Case> cases;
  for (const Shape& sh : shapes) {
    core::ExtractionParams p;
    p.specmin = sh.specmin;
    p.nspec = sh.nspec;
    p.wmin = sh.wmin;
    p.wmax = sh.wmax;
    auto g = core::Geometry::Create(LoadBundledPsf(), p, 4128, 4114, /*cache_spots=*/false);
    ASSERT_TRUE(g.ok()) << g.status();
    cases.push_back(Case{*g, MakeSyntheticFrame(**g, SyntheticOptions{})});
  }
  std::vector<std::vector<core::BundleResult>> fresh;
  for (const Case& c : cases) {
    auto own = core::CreateBackend(*options);
    ASSERT_TRUE(own.ok()) << own.status();
    auto r = Extract(**own, c);
    ASSERT_TRUE(r.ok()) << r.status();
    fresh.push_back(*std::move(r));
  }
  // 0, 1 fill the two slots; 2 recycles 0's buffers (larger spots), 0 recycles 1's
  // (smaller), 1 recycles 2's (larger), and so on.
  for (int i : {0, 1, 2, 0, 1, 2, 2, 0}) {
    auto r = Extract(**backend, cases[i]);
    ASSERT_TRUE(r.ok()) << "geometry " << i << ": " << r.status();
    ASSERT_EQ(r->size(), fresh[i].size());
    for (std::size_t b = 0; b < r->size(); ++b) {
      EXPECT_EQ((*r)[b].flux, fresh[i][b].flux) << "geometry " << i << " bundle " << b;
      EXPECT_EQ((*r)[b].ivar, fresh[i][b].ivar) << "geometry " << i << " bundle " << b;
      EXPECT_EQ((*r)[b].rdiags, fresh[i][b].rdiags) << "geometry " << i << " bundle " << b;
      EXPECT_EQ((*r)[b].chi2pix, fresh[i][b].chi2pix) << "geometry " << i << " bundle " << b;
    }
  }
}

}  // namespace
}  // namespace spexd::testing
