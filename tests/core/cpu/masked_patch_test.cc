// A patch whose whole pixel window is masked (spec §2.8): every bin gets only the zero-flux
// prior, M = 1e-15 I, so C's core blocks are 1e15 I, Q = C^-1/2 is a multiple of I and
// R = Q / rowsum is exactly the identity, ivar = 1e-15 and flux 0. The CPU backend's band is
// then empty (kd = 0) and its factor's storage beyond the band holds an earlier patch's
// numbers; reading them made R differ from I by ~1e-8 (found by the GPU parity test). The
// whole output must also be bit-identical at 1, 2 and 3 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "core/backend/backend.h"
#include "core/cpu/cpu_backend.h"
#include "core/plan/geometry.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

TEST(MaskedPatchTest, AWhollyMaskedPatchHasTheIdentityResolution) {
  core::ExtractionParams p;
  p.specmin = 0;
  p.nspec = 25;
  p.wmin = 6000.0;
  p.wmax = 6300.0;
  auto g = core::Geometry::Create(LoadBundledPsf(), p, 4128, 4114, /*cache_spots=*/false);
  ASSERT_TRUE(g.ok()) << g.status();
  core::PreprocImage image = MakeSyntheticFrame(**g, SyntheticOptions{});
  const core::PatchPlan& plan = (*g)->plan();
  // The second patch of the last sub-bundle: its neighbours (extracted before it on the
  // same workspaces) have full bands.
  const core::PatchDesc& masked = plan.patches[4 * (plan.patches.size() / 5) + 1];
  MaskWindowRows(masked, masked.y0, masked.y0 + masked.ny, &image);
  core::ExtractionJob job;
  job.geometry = *g;
  job.image = &image;
  std::vector<core::BundleResult> first;  // the 1-thread run's bundles
  for (int threads : {1, 2, 3}) {
    auto cpu = core::CreateCpuBackend(threads);
    int bundles = 0;
    auto s = cpu->Extract(job, [&](core::BundleResult&& b) {
      ++bundles;
      // The thread count decides which worker runs which group of patches, not the bits.
      if (threads == 1) {
        first.push_back(b);
      } else if (static_cast<std::size_t>(bundles) <= first.size()) {
        const core::BundleResult& a = first[static_cast<std::size_t>(bundles) - 1];
        EXPECT_EQ(b.flux, a.flux) << threads << " threads";
        EXPECT_EQ(b.ivar, a.ivar) << threads << " threads";
        EXPECT_EQ(b.rdiags, a.rdiags) << threads << " threads";
        EXPECT_EQ(b.chi2pix, a.chi2pix) << threads << " threads";
        EXPECT_EQ(b.pixmask_fraction, a.pixmask_fraction) << threads << " threads";
      }
      const int nk = 2 * b.ndiag + 1;
      double worst = 0;
      for (int f = 0; f < plan.nper; ++f) {
        const int row = masked.out_row - b.bundle * plan.bundlesize + f;
        for (int w = masked.out_col; w < masked.out_col + masked.nkeep; ++w) {
          const std::size_t i = static_cast<std::size_t>(row) * b.nwave + w;
          EXPECT_EQ(b.flux[i], 0.0) << "fibre " << row << " bin " << w;
          // ivar = rowsum(Q)^2 = 1 / C_ii = 1e-15 (the prior), to rounding.
          EXPECT_NEAR(b.ivar[i], 1e-15, 1e-27) << "fibre " << row << " bin " << w;
          for (int k = 0; k < nk; ++k) {
            const double want = k == b.ndiag ? 1.0 : 0.0;
            const std::size_t j = (static_cast<std::size_t>(row) * nk + k) * b.nwave + w;
            worst = std::max(worst, std::fabs(b.rdiags[j] - want));
          }
        }
      }
      // C_ss = 1e15 I exactly: Q and R carry no rounding beyond the square root's.
      EXPECT_LE(worst, 1e-15) << threads << " threads";
      return absl::OkStatus();
    });
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(bundles, 1);
  }
}

}  // namespace
}  // namespace spexd::testing
